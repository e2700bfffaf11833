// Every Kafka call of the project goes through this module, so the client
// (kafkajs, unmaintained since 2023) can be swapped without touching the pipeline.
import kafkajs, {
  Kafka,
  Partitioners,
  logLevel,
  type Admin,
  type Consumer,
  type ICustomPartitioner,
  type Producer,
  type ProducerRecord,
  type RecordMetadata,
  type SASLOptions,
} from 'kafkajs';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import type tls from 'node:tls';
import { promisify } from 'node:util';
import type { Logger } from './logger.js';
import { ConfigError } from './config.js';
import { codecs } from './kafka-codecs.js';
import { mskIamTokenProvider } from './msk-iam.js';
import { coalescedCommits } from './ordered-commits.js';

const execFileAsync = promisify(execFile);

// Snappy, LZ4 and zstd batches readable (and writable) by every client made here.

export type { Admin, Consumer, Producer, Kafka };
// Enums of the client that callers name (a topic's settings, a batch's codec). Read from the
// default export: Node's ESM loader does not find them among kafkajs's named exports.
export const { CompressionTypes, ConfigResourceTypes } = kafkajs;
const { CompressionCodecs, AclResourceTypes, AclOperationTypes, AclPermissionTypes, ResourcePatternTypes } = kafkajs;

let codecsRegistered = false;

/** Puts the codecs of kafka-codecs.ts into kafkajs (its codec table is one per process). */
export function registerKafkaCodecs(): void {
  if (codecsRegistered) return;
  codecsRegistered = true;
  CompressionCodecs[CompressionTypes.Snappy] = () => codecs.snappy;
  CompressionCodecs[CompressionTypes.LZ4] = () => codecs.lz4;
  CompressionCodecs[CompressionTypes.ZSTD] = () => codecs.zstd;
}

/** The codecs by the names Kafka's `compression.type` uses, for settings. */
export const COMPRESSION_TYPES = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
} as const;

export type CompressionName = keyof typeof COMPRESSION_TYPES;

registerKafkaCodecs();

export type { EachBatchPayload, KafkaMessage, IHeaders } from 'kafkajs';
import type { EachBatchPayload } from 'kafkajs';

/**
 * A record batch the client could not decode (a codec it lacks, bytes it cannot read).
 * The patched kafkajs (patches/) hands it over as one marker message with the batch's
 * last offset, in place of the batch and everything after it in that partition's fetch.
 */
export interface UndecodableBatch {
  firstOffset: string;
  lastOffset: string;
  codec: string;
  reason: string;
}

/** The undecodable batch a message stands for, if it is such a marker. */
export function undecodableBatch(message: object): UndecodableBatch | undefined {
  return (message as { undecodableBatch?: UndecodableBatch }).undecodableBatch;
}

export interface KafkaSettings {
  brokers: readonly string[];
  clientId: string;
  /** TLS and SASL (kafkaSecurityFrom); absent: plaintext, anonymous. */
  security?: KafkaSecurity;
}

export type SaslMechanism = 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512' | 'OAUTHBEARER' | 'AWS_MSK_IAM';

/** How a client proves itself to the brokers and checks them: the KAFKA_SECURITY_PROTOCOL family of variables. */
export interface KafkaSecurity {
  /** true: TLS, the server checked against the system's CAs; an object: with these CAs and an optional client certificate (mTLS). */
  ssl?: true | tls.ConnectionOptions;
  sasl?: SASLOptions;
}

/** The variables of infrastructureSpec that say how to reach Kafka. */
export interface KafkaSecurityConfig {
  KAFKA_SECURITY_PROTOCOL: string;
  KAFKA_SASL_MECHANISM: string;
  KAFKA_SASL_USERNAME: string;
  KAFKA_SASL_PASSWORD: string;
  KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: string;
  KAFKA_SASL_OAUTHBEARER_TOKEN_COMMAND: string;
  /** AWS_MSK_IAM only; absent in callers that never use it. */
  KAFKA_AWS_REGION?: string;
  KAFKA_TLS_CA_FILE: string;
  KAFKA_TLS_CERT_FILE: string;
  KAFKA_TLS_KEY_FILE: string;
}

/**
 * The security of a Kafka client from the configuration, the same for every client of
 * the project. Files are read here, once (a certificate rotated on disk is read at the
 * next start); an OAUTHBEARER token is read again at every authentication, so a file a
 * sidecar refreshes, or a command that prints a fresh token, keeps working.
 * Throws, naming the variable, on settings that cannot work together.
 */
export function kafkaSecurityFrom(config: KafkaSecurityConfig): KafkaSecurity {
  const protocol = config.KAFKA_SECURITY_PROTOCOL.toUpperCase();
  const usesTls = protocol === 'SSL' || protocol === 'SASL_SSL';
  const usesSasl = protocol === 'SASL_PLAINTEXT' || protocol === 'SASL_SSL';
  const security: KafkaSecurity = {};
  const tlsFiles = [config.KAFKA_TLS_CA_FILE, config.KAFKA_TLS_CERT_FILE, config.KAFKA_TLS_KEY_FILE].some(Boolean);
  if (tlsFiles && !usesTls)
    throw new ConfigError(`KAFKA_TLS_* files are set but KAFKA_SECURITY_PROTOCOL is ${protocol}: use SSL or SASL_SSL`);
  if (Boolean(config.KAFKA_TLS_CERT_FILE) !== Boolean(config.KAFKA_TLS_KEY_FILE)) {
    throw new ConfigError('KAFKA_TLS_CERT_FILE and KAFKA_TLS_KEY_FILE go together (the client certificate and its key)');
  }
  if (usesTls) {
    security.ssl = tlsFiles
      ? {
          ...(config.KAFKA_TLS_CA_FILE ? { ca: [fs.readFileSync(config.KAFKA_TLS_CA_FILE)] } : {}),
          ...(config.KAFKA_TLS_CERT_FILE
            ? { cert: fs.readFileSync(config.KAFKA_TLS_CERT_FILE), key: fs.readFileSync(config.KAFKA_TLS_KEY_FILE) }
            : {}),
        }
      : true;
  }
  const mechanism = config.KAFKA_SASL_MECHANISM.toUpperCase();
  if (!usesSasl) {
    if (mechanism) throw new ConfigError(`KAFKA_SASL_MECHANISM is ${mechanism} but KAFKA_SECURITY_PROTOCOL is ${protocol}: use SASL_SSL`);
    return security;
  }
  if (mechanism === 'OAUTHBEARER') {
    const file = config.KAFKA_SASL_OAUTHBEARER_TOKEN_FILE;
    const command = config.KAFKA_SASL_OAUTHBEARER_TOKEN_COMMAND;
    if (Boolean(file) === Boolean(command)) {
      throw new ConfigError('OAUTHBEARER needs exactly one of KAFKA_SASL_OAUTHBEARER_TOKEN_FILE and KAFKA_SASL_OAUTHBEARER_TOKEN_COMMAND');
    }
    security.sasl = { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: await bearerToken(file, command) }) };
    return security;
  }
  if (mechanism === 'AWS_MSK_IAM') {
    const region = config.KAFKA_AWS_REGION ?? '';
    if (!region) throw new ConfigError("KAFKA_AWS_REGION is required with KAFKA_SASL_MECHANISM=AWS_MSK_IAM (the MSK cluster's region)");
    if (!usesTls)
      throw new ConfigError('KAFKA_SASL_MECHANISM=AWS_MSK_IAM needs KAFKA_SECURITY_PROTOCOL=SASL_SSL (MSK takes IAM over TLS only)');
    security.sasl = { mechanism: 'oauthbearer', oauthBearerProvider: mskIamTokenProvider(region) };
    return security;
  }
  if (mechanism !== 'PLAIN' && mechanism !== 'SCRAM-SHA-256' && mechanism !== 'SCRAM-SHA-512') {
    throw new ConfigError(
      `KAFKA_SASL_MECHANISM must be PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM with ${protocol}, got "${mechanism}"`,
    );
  }
  if (!config.KAFKA_SASL_USERNAME) throw new ConfigError(`KAFKA_SASL_USERNAME is required with KAFKA_SASL_MECHANISM=${mechanism}`);
  const username = config.KAFKA_SASL_USERNAME;
  const password = config.KAFKA_SASL_PASSWORD;
  security.sasl =
    mechanism === 'PLAIN'
      ? { mechanism: 'plain', username, password }
      : mechanism === 'SCRAM-SHA-256'
        ? { mechanism: 'scram-sha-256', username, password }
        : { mechanism: 'scram-sha-512', username, password };
  return security;
}

/** An OAUTHBEARER token: the file's content, or what the command prints (its first line), trimmed. */
export async function bearerToken(file: string, command: string): Promise<string> {
  const token = file
    ? (await fs.promises.readFile(file, 'utf8')).trim()
    : (await execFileAsync('/bin/sh', ['-c', command], { timeout: 30_000 })).stdout.split('\n')[0]!.trim();
  if (!token) throw new Error(`the OAUTHBEARER token ${file ? `file ${file}` : 'command'} gave no token`);
  return token;
}

/** A client's settings from the configuration: brokers, client id (prefix + service) and security. */
export function kafkaSettingsFrom(
  config: KafkaSecurityConfig & { KAFKA_BROKERS: readonly string[]; KAFKA_CLIENT_ID: string },
  service: string,
): KafkaSettings {
  return { brokers: config.KAFKA_BROKERS, clientId: `${config.KAFKA_CLIENT_ID}-${service}`, security: kafkaSecurityFrom(config) };
}

const levels: Record<number, 'error' | 'warn' | 'info' | 'debug'> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
  [logLevel.DEBUG]: 'debug',
};

/**
 * kafkajs logs, at error level, answers that Kafka gives while a broker, a group
 * coordinator or a new topic's leaders are starting, and that it retries itself; and
 * it warns that bounded retries "may invalidate EoS", which ours are on purpose (the
 * gateway answers 503 rather than wait without end). Those go to debug: an error line
 * should mean something is wrong. "Topic creation errors" is its line for a topic another
 * service created first (ensureTopic throws every other creation failure itself).
 */
const EXPECTED =
  /coordinator is loading|group coordinator is not available|leadership election|does not host this topic-partition|Limiting retries for the idempotent producer|Topic creation errors/i;

/** Whether a Kafka error is one of the conditions a starting cluster answers for a moment, which the client retries itself. */
export function isExpectedKafkaCondition(message: string): boolean {
  return EXPECTED.test(message);
}

/**
 * kafkajs's "Restarting the consumer in N ms" line, logged at error level after every
 * crash it restarts from. It carries no cause; our consumers report the crash itself
 * through `SourceEvents.crashed`, which the service logs with its cause (info while
 * Kafka finishes starting, a warning otherwise), so this line goes to debug.
 */
const RESTARTING = /^Restarting the consumer in /;

/** The level our logger gives one kafkajs log entry. */
export function kafkaLogLevel(level: number, message: string, error?: unknown): 'error' | 'warn' | 'info' | 'debug' {
  if (RESTARTING.test(message) || isExpectedKafkaCondition(`${message} ${String(error ?? '')}`)) return 'debug';
  return levels[level] ?? 'info';
}

export function createKafka(settings: KafkaSettings, logger?: Logger): Kafka {
  return new Kafka({
    clientId: settings.clientId,
    brokers: [...settings.brokers],
    ...(settings.security?.ssl ? { ssl: settings.security.ssl } : {}),
    ...(settings.security?.sasl ? { sasl: settings.security.sasl } : {}),
    connectionTimeout: 3000,
    requestTimeout: 10000,
    logLevel: logger ? logLevel.WARN : logLevel.NOTHING,
    logCreator: () => (entry) => {
      if (!logger) return;
      const { message, ...rest } = entry.log;
      const level = kafkaLogLevel(entry.level, message, rest.error);
      logger[level]({ kafka: rest, namespace: entry.namespace }, message);
    },
  });
}

/**
 * Largest record batch a topic accepts. A usage record may be 1 MiB on its own,
 * and the gateway batches several per partition, so the broker's 1 MB default is
 * raised on every topic we create.
 */
export const TOPIC_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/**
 * Creates the topic when missing (an existing topic keeps its partitions) and returns
 * once every partition has a leader. kafkajs's own wait (`waitForLeaders`) gives up at
 * the first UNKNOWN_TOPIC_OR_PARTITION, which a KRaft broker answers for a moment
 * after creating a topic: 7 of 50 topics created 10 at a time failed that way here.
 */
export async function ensureTopic(
  kafka: Kafka,
  topic: string,
  partitions: number,
  waitMs = 30_000,
  /** Topic settings beside the message size, for example `cleanup.policy: compact`. */
  config: Record<string, string> = {},
): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = await admin.listTopics();
    if (!existing.includes(topic)) {
      try {
        await admin.createTopics({
          topics: [
            {
              topic,
              numPartitions: partitions,
              replicationFactor: -1,
              configEntries: [
                { name: 'max.message.bytes', value: String(TOPIC_MAX_MESSAGE_BYTES) },
                ...Object.entries(config).map(([name, value]) => ({ name, value })),
              ],
            },
          ],
          waitForLeaders: false,
        });
      } catch (error) {
        // Two services racing to create the same topic is fine.
        if ((error as { type?: string }).type !== 'TOPIC_ALREADY_EXISTS') throw error;
      }
    }
    await untilLeaders(admin, topic, waitMs);
  } finally {
    await admin.disconnect();
  }
}

async function untilLeaders(admin: Admin, topic: string, waitMs: number): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    let problem: unknown;
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
      const found = topics.find((entry) => entry.name === topic)?.partitions ?? [];
      if (found.length > 0 && found.every((partition) => partition.leader >= 0)) return;
      problem = new Error('not every partition has a leader yet');
    } catch (error) {
      problem = error;
    }
    if (Date.now() >= deadline) {
      throw new Error(`topic ${topic} has no leader for every partition after ${waitMs} ms: ${(problem as Error).message}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * The durable producer: idempotent, acks=all. kafkajs requires a single request
 * in flight for idempotence; throughput comes from batching, not concurrency.
 */
export function createDurableProducer(kafka: Kafka, options: { retries: number; maxRetryTimeMs: number }): Producer {
  return kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    createPartitioner: recordingPartitioner,
    retry: { retries: options.retries, maxRetryTime: options.maxRetryTimeMs, initialRetryTime: 100 },
  });
}

/** One keyed record for a topic, in the project's own words (no client's types). */
export interface OutgoingRecord {
  /** The partitioning key (a record copied from another topic keeps its own, which may be absent). */
  key: string | Buffer | null;
  /** Absent only for a record copied as it was (a dead letter of an empty message). */
  value: Buffer | null;
  /** Header values; one left undefined is not sent. */
  headers?: Record<string, string | undefined>;
}

/**
 * A durable producer as the project uses one (idempotent, acks from every in-sync
 * replica), whatever client is behind it. `send` resolves once every record is
 * acknowledged and throws otherwise; after a throw the outcome is unknown (the records
 * may still be written), so the sender is closed and another opened: an idempotent
 * producer must not reuse sequence numbers whose fate it does not know.
 */
export interface RecordSender {
  send(topic: string, records: readonly OutgoingRecord[]): Promise<void>;
  close(): Promise<void>;
}

export interface SenderOptions {
  retries: number;
  maxRetryTimeMs: number;
  /** The record batches' codec; none when absent. */
  compression?: CompressionName;
}

/** A connected RecordSender on kafkajs's durable producer (the Java client's murmur2 partitioning). */
export async function openKafkajsSender(kafka: Kafka, options: SenderOptions): Promise<RecordSender> {
  const producer = createDurableProducer(kafka, options);
  try {
    await producer.connect();
  } catch (error) {
    await producer.disconnect().catch(() => undefined);
    throw error;
  }
  const compression = options.compression && options.compression !== 'none' ? COMPRESSION_TYPES[options.compression] : undefined;
  return {
    async send(topic, records) {
      await sendAcknowledged(producer, {
        topic,
        acks: -1,
        ...(compression === undefined ? {} : { compression }),
        // The records as they are, not copied: one object per record on the gateway's hot
        // path. The partitioner notes each record's partition on it (sendAcknowledged reads it).
        messages: records as OutgoingRecord[],
      });
    },
    close: () => producer.disconnect(),
  };
}

/** One record read from a topic, in the project's own words (no client's types). */
export interface IncomingRecord {
  key: Buffer | null;
  value: Buffer | null;
  /** Header values as read (a header repeated: all of its values). */
  headers?: Record<string, Buffer | string | (Buffer | string)[] | undefined>;
  offset: string;
  /** When the producer wrote it: epoch milliseconds, as text. */
  timestamp: string;
}

/** The records of one partition a RecordSource hands over at a time. */
export interface IncomingBatch {
  topic: string;
  partition: number;
  /** In offset order; they end before a record batch the client could not decode, which `undecodable` then names. */
  records: readonly IncomingRecord[];
  undecodable: UndecodableBatch | undefined;
  /**
   * Whether the records are still this consumer's to load: false once a rebalance may
   * have given the partition to another member, or the consumer stops.
   */
  live(): boolean;
  /** Tells the group this member is alive (to call while a batch takes long). */
  heartbeat(): Promise<void>;
  // live() and heartbeat() hold none of the records: a reader may keep them past the batch.
  /** Lets the client fetch past `offset`; what is committed is the caller's (RecordSource.commit). */
  release(offset: string): void;
}

/**
 * A consumer group member as the ingester uses one, whatever client is behind it: it
 * hands over each partition's records in order, never commits by itself, and says when
 * the group's assignment may change.
 */
export interface RecordSource {
  /**
   * Reads `topic` from the group's committed offsets (the earliest where none), handing
   * the batches of up to `partitionsConcurrently` partitions at once to `onBatch`;
   * `onAssignment` runs whenever the assignment may change (records handed over before
   * may belong to another member). An error thrown by `onBatch` stops the consumer
   * (the source's `crashed` event, not restarting). Resolves once running.
   */
  run(options: {
    topic: string;
    partitionsConcurrently: number;
    onBatch(batch: IncomingBatch): Promise<void>;
    onAssignment(): void;
  }): Promise<void>;
  /** Commits a partition's offset for the group: the offset of the next record to read. */
  commit(topic: string, partition: number, offset: string): Promise<void>;
  /** Stops fetching the partitions named (every partition of the topic when none). */
  pause(topic: string, partitions?: number[]): void;
}

export interface SourceOptions {
  groupId: string;
  /** How long a fetch waits to fill a batch. */
  maxWaitMs: number;
  maxBytesPerPartition: number;
  maxBytes: number;
  sessionTimeoutMs: number;
  rebalanceTimeoutMs: number;
  heartbeatIntervalMs: number;
}

/** What a source reports about its membership, for readiness and logs. */
export interface SourceEvents {
  /** Joined the group (consuming). */
  joined(): void;
  /** Stopped consuming. */
  stopped(): void;
  /**
   * Crashed: `restarting` when the error came from the client or the brokers (the source
   * restarts itself), false when it came from `onBatch` (the process should end).
   */
  crashed(error: Error, restarting: boolean): void;
}

/** Whether an error (or what caused it) is kafkajs's own, as opposed to one thrown by the caller's code. */
function causedByClient(error: Error): boolean {
  let cause: unknown = error;
  while ((cause as { cause?: unknown }).cause) cause = (cause as { cause: unknown }).cause;
  return (cause as Error).name?.startsWith('KafkaJS') ?? false;
}

/**
 * A connected RecordSource on kafkajs's consumer. kafkajs restarts a crashed consumer
 * in-process when the cause is the client's or the brokers' (also after a group
 * coordinator not found: patches/, docs/development.md); an error out of `onBatch`
 * would only repeat at the same offset, so the consumer is left stopped and `crashed`
 * says so. `close` leaves the group.
 */
export async function openKafkajsSource(
  kafka: Kafka,
  options: SourceOptions,
  events: SourceEvents,
): Promise<RecordSource & { close(): Promise<void> }> {
  const consumer = kafka.consumer({
    groupId: options.groupId,
    maxWaitTimeInMs: options.maxWaitMs,
    maxBytesPerPartition: options.maxBytesPerPartition,
    maxBytes: options.maxBytes,
    sessionTimeout: options.sessionTimeoutMs,
    rebalanceTimeout: options.rebalanceTimeoutMs,
    heartbeatInterval: options.heartbeatIntervalMs,
    retry: { restartOnFailure: async (error) => causedByClient(error) },
  });
  consumer.on(consumer.events.GROUP_JOIN, () => events.joined());
  consumer.on(consumer.events.STOP, () => events.stopped());
  consumer.on(consumer.events.CRASH, ({ payload }) => events.crashed(payload.error, payload.restart));
  await consumer.connect();
  return { ...kafkajsRecordSource(consumer), close: () => consumer.disconnect() };
}

/** The RecordSource of a kafkajs consumer (connected, not running yet). */
export function kafkajsRecordSource(
  consumer: Pick<Consumer, 'events' | 'on' | 'subscribe' | 'run' | 'commitOffsets' | 'pause'>,
): RecordSource {
  const latest: LatestBatches = { assignment: 0, batches: new Map() };
  return {
    async run({ topic, partitionsConcurrently, onBatch, onAssignment }) {
      // The assignment may change: the batches handed over before are no longer live (their
      // partitions may be another member's), and a partition this member lost must not keep
      // its last batch's records in memory until it is assigned here again.
      const assignmentMayChange = () => {
        latest.assignment++;
        latest.batches.clear();
        onAssignment();
      };
      consumer.on(consumer.events.REBALANCING, assignmentMayChange);
      consumer.on(consumer.events.GROUP_JOIN, assignmentMayChange);
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently: partitionsConcurrently,
        eachBatch: (payload) => onBatch(incomingBatch(payload, latest)),
      });
    },
    commit: coalescedCommits((offsets) => consumer.commitOffsets(offsets)),
    pause: (topic, partitions) => consumer.pause([partitions ? { topic, partitions } : { topic }]),
  };
}

/**
 * Each partition's latest batch's liveness and heartbeat. kafkajs's functions of a batch
 * hold the whole batch (every record as fetched, through the scope they were made in),
 * and they say nothing of that batch alone: whether the consumer runs, whether the
 * partition was sought, a heartbeat for the member. So a batch's `live` and `heartbeat`
 * ask the latest batch's, and a reader may keep them past its batch (the ingester
 * keeps them with each chunk until it loads) without keeping its records. Emptied
 * whenever the assignment may change: a batch handed over before is not live after it.
 */
interface LatestBatches {
  /** Counts the times the assignment may have changed. */
  assignment: number;
  batches: Map<string, Pick<EachBatchPayload, 'heartbeat' | 'isRunning' | 'isStale'>>;
}

/** kafkajs's batch as an IncomingBatch: its messages as they are (no copy), cut before the undecodable batch's marker. */
function incomingBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload, latest: LatestBatches): IncomingBatch {
  // The patched client hands a batch it could not decode over as one marker, last.
  const stuck = batch.messages.findIndex((message) => undecodableBatch(message) !== undefined);
  const partition = `${batch.topic}:${batch.partition}`;
  latest.batches.set(partition, { heartbeat, isRunning, isStale });
  const assignment = latest.assignment;
  // The partition's latest batch, while the assignment has not changed since this one.
  const current = () => (latest.assignment === assignment ? latest.batches.get(partition) : undefined);
  return {
    topic: batch.topic,
    partition: batch.partition,
    records: stuck < 0 ? batch.messages : batch.messages.slice(0, stuck),
    undecodable: stuck < 0 ? undefined : undecodableBatch(batch.messages[stuck]!),
    live: () => {
      const now = current();
      return now !== undefined && now.isRunning() && !now.isStale();
    },
    heartbeat: async () => current()?.heartbeat(),
    release: resolveOffset,
  };
}

/**
 * What the services ask of Kafka's admin API, in the project's own terms: whether the
 * brokers answer for a topic (readiness) and a consumer group's lag. Connects at the
 * first call, so a service starts without Kafka; a failed call drops its connection and
 * the next call opens another (a connection broken while a broker was away is never
 * reused).
 */
export interface KafkaInspector {
  /** Resolves once the brokers answer the topic's metadata; throws otherwise. */
  topicReachable(topic: string): Promise<void>;
  /** Per partition: messages of `topic` the group has not committed (consumerLag). */
  consumerLag(groupId: string, topic: string): Promise<{ partition: number; lag: number }[]>;
  /** Drops the connection (a later call opens another). */
  close(): Promise<void>;
}

/** A KafkaInspector on kafkajs's admin client. */
export function openKafkaInspector(kafka: Kafka): KafkaInspector {
  let current: Promise<Admin> | undefined;
  const drop = (failed: Promise<Admin>) => {
    if (current !== failed) return;
    current = undefined;
    void failed.then((admin) => admin.disconnect()).catch(() => undefined);
  };
  const use = async <T>(work: (admin: Admin) => Promise<T>): Promise<T> => {
    const connecting = (current ??= (async () => {
      const admin = kafka.admin();
      await admin.connect();
      return admin;
    })());
    try {
      return await work(await connecting);
    } catch (error) {
      drop(connecting);
      throw error;
    }
  };
  return {
    topicReachable: (topic) => use((admin) => admin.fetchTopicMetadata({ topics: [topic] }).then(() => undefined)),
    consumerLag: (groupId, topic) => use((admin) => consumerLag(admin, groupId, topic)),
    async close() {
      const closing = current;
      current = undefined;
      if (closing) await (await closing.catch(() => undefined))?.disconnect();
    },
  };
}

/**
 * The inspector's consumerLag read at most every `maxAgeMs`, for readers asked often (a
 * Prometheus scrape, the admin API): one read in flight at a time, and a failed read is
 * not kept.
 */
export function cachedConsumerLag(
  inspector: Pick<KafkaInspector, 'consumerLag'>,
  groupId: string,
  topic: string,
  maxAgeMs: number,
): () => Promise<{ partition: number; lag: number }[]> {
  let last: { at: number; value: Promise<{ partition: number; lag: number }[]> } | undefined;
  return () => {
    if (!last || Date.now() - last.at > maxAgeMs) {
      const read = { at: Date.now(), value: inspector.consumerLag(groupId, topic) };
      read.value.catch(() => {
        if (last === read) last = undefined;
      });
      last = read;
    }
    return last.value;
  };
}

/** Deletes the topics `which` picks among those the cluster has; returns their names. */
export async function deleteTopicsWhere(admin: Admin, which: (topic: string) => boolean): Promise<string[]> {
  const topics = (await admin.listTopics()).filter(which);
  if (topics.length > 0) await admin.deleteTopics({ topics, timeout: 30_000 });
  return topics;
}

/**
 * Per partition: messages of `topic` the group has not committed (a partition never
 * committed counts from its low mark). A topic not created yet (the gateway creates the
 * usage topic when it first needs it) holds nothing to be behind on: no partitions.
 */
export async function consumerLag(admin: Admin, groupId: string, topic: string): Promise<{ partition: number; lag: number }[]> {
  if (!(await topicExists(admin, topic))) return [];
  const [ends, [committed]] = await Promise.all([admin.fetchTopicOffsets(topic), admin.fetchOffsets({ groupId, topics: [topic] })]);
  return ends.map((end) => {
    const at = Number(committed?.partitions.find((partition) => partition.partition === end.partition)?.offset ?? -1);
    return { partition: end.partition, lag: Math.max(0, Number(end.high) - Math.max(at, Number(end.low))) };
  });
}

/**
 * Whether the cluster has `topic`, from its metadata: an unknown topic is answered at
 * once there, where reading its offsets retries before it fails (seconds, and an
 * unavailable Kafka to whoever asked).
 */
async function topicExists(admin: Admin, topic: string): Promise<boolean> {
  try {
    await admin.fetchTopicMetadata({ topics: [topic] });
    return true;
  } catch (error) {
    if ((error as { type?: string }).type === 'UNKNOWN_TOPIC_OR_PARTITION') return false;
    throw error;
  }
}

/**
 * Kafka's murmur2 of a key, as the Java client's default partitioner computes it, in
 * 32-bit integer arithmetic (Math.imul, as Java's int). kafkajs's own builds 64-bit Long
 * objects for every multiplication; through createPartitioner this one replaces it.
 */
export function murmur2(key: Buffer | string): number {
  const data = Buffer.isBuffer(key) ? key : Buffer.from(key);
  const length = data.length;
  const M = 0x5bd1e995;
  let h = 0x9747b28c ^ length;
  const whole = length - (length % 4);
  for (let i = 0; i < whole; i += 4) {
    let k = data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24);
    k = Math.imul(k, M);
    k ^= k >>> 24;
    k = Math.imul(k, M);
    h = Math.imul(h, M) ^ k;
  }
  switch (length % 4) {
    case 3:
      h ^= data[whole + 2]! << 16;
    // falls through
    case 2:
      h ^= data[whole + 1]! << 8;
    // falls through
    case 1:
      h ^= data[whole]!;
      h = Math.imul(h, M);
  }
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}

/** The partition of a keyed message among `partitions`, as Java's default partitioner chooses it. */
export function keyPartition(key: Buffer | string, partitions: number): number {
  return (murmur2(key) & 0x7fffffff) % partitions;
}

/**
 * Kafka's default partitioning: a keyed message by the murmur2 of its key (keyPartition),
 * a message naming its partition there, a keyless one by kafkajs's default (round robin
 * among the partitions with a leader). The partition chosen is written onto the message,
 * so sendAcknowledged can check that each one was answered for (a message keeps its
 * partition across kafkajs's retries).
 */
export const recordingPartitioner: ICustomPartitioner = () => {
  const keyless = Partitioners.DefaultPartitioner();
  return (args) => {
    const { message, partitionMetadata } = args;
    const partition =
      message.partition !== null && message.partition !== undefined
        ? message.partition
        : message.key !== null && message.key !== undefined
          ? keyPartition(message.key, partitionMetadata.length)
          : keyless(args);
    message.partition = partition;
    return partition;
  };
};

export class IncompleteSendError extends Error {}

/**
 * producer.send, and then a check that the broker answered for every partition the
 * messages went to. kafkajs 2.2.4 can resolve a send without having produced to a
 * partition: when a partition's leader dies, its retry re-plans the partition onto the
 * new leader, but skips that broker if it already answered for other partitions of the
 * same send, and resolves. Found by the three-broker test (86 of 100 messages written,
 * every send resolved). A partition missing from the answer throws here, so the caller
 * treats the records as not acknowledged (the gateway answers 503; the client retries
 * with the same idempotency key). Use with createDurableProducer, whose partitioner
 * records each message's partition.
 */
export async function sendAcknowledged(producer: Producer, record: ProducerRecord): Promise<RecordMetadata[]> {
  const answered = await producer.send(record);
  const ok = new Set(answered.filter((entry) => entry.topicName === record.topic && entry.errorCode === 0).map((entry) => entry.partition));
  const missing = [...new Set(record.messages.map((message) => message.partition))].filter(
    (partition) => partition === undefined || !ok.has(partition),
  );
  if (missing.length > 0) {
    throw new IncompleteSendError(`the broker did not answer for partition(s) ${missing.join(', ')} of ${record.topic}; not acknowledged`);
  }
  return answered;
}

/**
 * Whether the brokers answer a metadata request (not merely an open port), with the
 * given security: undefined when they do, else the error the request ended in.
 */
export async function kafkaRefusal(brokers: readonly string[], security: KafkaSecurity = {}, timeoutMs = 2000): Promise<Error | undefined> {
  const admin = new Kafka({
    brokers: [...brokers],
    logLevel: logLevel.NOTHING,
    connectionTimeout: Math.min(timeoutMs, 3000),
    requestTimeout: timeoutMs,
    retry: { retries: 0 },
    ...(security.ssl ? { ssl: security.ssl } : {}),
    ...(security.sasl ? { sasl: security.sasl } : {}),
  }).admin();
  try {
    await admin.connect();
    await admin.fetchTopicMetadata({ topics: [] });
    return undefined;
  } catch (error) {
    return error as Error;
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** A topic's settings, by name (`names`: only these; all when absent). */
export async function topicSettings(kafka: Kafka, topic: string, names?: string[]): Promise<Record<string, string>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const described = await admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, ...(names ? { configNames: names } : {}) }],
      includeSynonyms: false,
    });
    return Object.fromEntries((described.resources[0]?.configEntries ?? []).map((entry) => [entry.configName, entry.configValue]));
  } finally {
    await admin.disconnect();
  }
}

/**
 * Changes some of a topic's settings. AlterConfigs replaces a topic's whole dynamic
 * configuration, so the settings it already has (max.message.bytes) are sent along unchanged.
 */
export async function setTopicSettings(kafka: Kafka, topic: string, settings: Record<string, string>): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const described = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }],
    });
    const kept = (described.resources[0]?.configEntries ?? [])
      .filter((entry) => !entry.isDefault && !(entry.configName in settings))
      .map((entry) => ({ name: entry.configName, value: entry.configValue }));
    await admin.alterConfigs({
      validateOnly: false,
      resources: [
        {
          type: ConfigResourceTypes.TOPIC,
          name: topic,
          configEntries: [...kept, ...Object.entries(settings).map(([name, value]) => ({ name, value }))],
        },
      ],
    });
  } finally {
    await admin.disconnect();
  }
}

/** An ACL in the project's words: what a principal may do on a topic, a consumer group or the cluster. */
export interface AclGrant {
  /** `User:<name>`. */
  principal: string;
  resource: 'topic' | 'group' | 'cluster';
  /** The resource's name (`kafka-cluster` for the cluster), or a prefix of names when `prefixed`. */
  name: string;
  prefixed?: boolean;
  operations: readonly ('read' | 'write' | 'create' | 'describe' | 'alter' | 'delete')[];
}

/** Creates the ACLs (an ACL that exists already is left as it is): the caller needs ALTER on the cluster (a super user). */
export async function grantAcls(kafka: Kafka, grants: readonly AclGrant[]): Promise<void> {
  const resourceTypes = { topic: AclResourceTypes.TOPIC, group: AclResourceTypes.GROUP, cluster: AclResourceTypes.CLUSTER };
  const operations = {
    read: AclOperationTypes.READ,
    write: AclOperationTypes.WRITE,
    create: AclOperationTypes.CREATE,
    describe: AclOperationTypes.DESCRIBE,
    alter: AclOperationTypes.ALTER,
    delete: AclOperationTypes.DELETE,
  };
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createAcls({
      acl: grants.flatMap((grant) =>
        grant.operations.map((operation) => ({
          principal: grant.principal,
          host: '*',
          operation: operations[operation],
          permissionType: AclPermissionTypes.ALLOW,
          resourceType: resourceTypes[grant.resource],
          resourceName: grant.name,
          resourcePatternType: grant.prefixed ? ResourcePatternTypes.PREFIXED : ResourcePatternTypes.LITERAL,
        })),
      ),
    });
  } finally {
    await admin.disconnect();
  }
}
