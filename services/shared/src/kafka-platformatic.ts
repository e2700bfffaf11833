// The Kafka seam's producing side on @platformatic/kafka (pure TypeScript, no native
// build): a RecordSender as the project uses one, idempotent with acks from every
// in-sync replica, partitioning keyed records as the Java client (and openKafkajsSender)
// does. The gateway's producer by default (KAFKA_PRODUCER_CLIENT): it takes about half
// of kafkajs's CPU per record produced (bench/analysis.md, "Kafka clients").
import { Producer, compressionsAlgorithms, type SASLOptions } from '@platformatic/kafka';
import { snappyBlock } from './kafka-codecs.js';
import type { KafkaSecurity, KafkaSettings, OutgoingRecord, RecordSender, SenderOptions } from './kafka.js';

// snappy, the gateway's codec, as kafka-codecs.ts compresses it: the client's own
// WebAssembly build (less CPU than the native `snappy` package here), and the native
// package for a batch past the bound that keeps the WebAssembly memory small. Raw blocks
// either way: what every client reads. Its table is typed read-only; the entry is a plain
// object the producer reads at every batch.
(compressionsAlgorithms.snappy as { compressSync: (data: Buffer | { buffer: Buffer }) => Buffer }).compressSync = (data) =>
  snappyBlock(Buffer.isBuffer(data) ? data : data.buffer);

/**
 * The partition of a record as @platformatic/kafka asks it (the client takes the answer
 * modulo the topic's partitions): a keyed record's murmur2 as the Java client's default
 * partitioner computes it (kafka.ts's murmur2, the same bits), a keyless one in turn.
 */
export function platformaticPartitioner(murmur2: (key: Buffer) => number): (message: unknown, key: Buffer | undefined) => number {
  let next = 0;
  return (_message, key) => (Buffer.isBuffer(key) ? murmur2(key) & 0x7fffffff : (next = (next + 1) & 0x7fffffff));
}

/** kafkajs's names of the user-and-password mechanisms, and @platformatic/kafka's. */
const USER_PASSWORD_MECHANISMS = { plain: 'PLAIN', 'scram-sha-256': 'SCRAM-SHA-256', 'scram-sha-512': 'SCRAM-SHA-512' } as const;

/** The project's Kafka security in @platformatic/kafka's terms (TLS options, SASL with providers). */
export function platformaticSecurity(security: KafkaSecurity | undefined): { tls?: object; sasl?: SASLOptions } {
  const out: { tls?: object; sasl?: SASLOptions } = {};
  if (security?.ssl) out.tls = security.ssl === true ? {} : security.ssl;
  const sasl = security?.sasl;
  if (!sasl) return out;
  if (sasl.mechanism === 'oauthbearer') {
    // A fresh token at every authentication (a file a sidecar refreshes, a command, AWS's signer).
    const provider = sasl.oauthBearerProvider;
    out.sasl = { mechanism: 'OAUTHBEARER', token: async () => (await provider()).value };
    return out;
  }
  const mechanism = USER_PASSWORD_MECHANISMS[sasl.mechanism as keyof typeof USER_PASSWORD_MECHANISMS];
  if (!mechanism) throw new Error(`the SASL mechanism ${sasl.mechanism} has no @platformatic/kafka equivalent here`);
  const { username, password } = sasl as { username: string; password: string };
  out.sasl = { mechanism, username, password };
  return out;
}

/**
 * Header names and the values every record repeats (content type, schema id) as bytes,
 * made once: the client writes headers as given, so each string would otherwise become
 * a new Buffer per record. Bounded: a value seen more than `limit` times over is not kept.
 */
class HeaderBytes {
  private readonly known = new Map<string, Buffer>();
  constructor(private readonly limit = 256) {}

  of(text: string, keep: boolean): Buffer {
    const found = this.known.get(text);
    if (found) return found;
    const bytes = Buffer.from(text);
    if (keep && this.known.size < this.limit) this.known.set(text, bytes);
    return bytes;
  }
}

/** A record's headers as the client writes them (bytes), undefined values left out; the request id is the one value unique per record. */
function headerMap(headers: Record<string, string | undefined> | undefined, bytes: HeaderBytes): Map<Buffer, Buffer> | undefined {
  if (!headers) return undefined;
  const map = new Map<Buffer, Buffer>();
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    map.set(bytes.of(name, true), bytes.of(value, name !== 'x-request-id'));
  }
  return map;
}

/**
 * A connected RecordSender on @platformatic/kafka's idempotent producer. `send` resolves
 * once the brokers acknowledged every record (acks -1) and throws otherwise; the caller
 * then closes it and opens another (RecordSender). `murmur2` is kafka.ts's, passed in so
 * this module needs nothing of kafkajs.
 */
export async function openPlatformaticSender(
  settings: KafkaSettings,
  options: SenderOptions & { murmur2: (key: Buffer) => number },
): Promise<RecordSender> {
  const producer = new Producer({
    clientId: settings.clientId,
    bootstrapBrokers: [...settings.brokers],
    ...platformaticSecurity(settings.security),
    idempotent: true,
    acks: -1,
    // The client retries an idempotent producer without end unless told a number above 1.
    retries: Math.max(2, options.retries),
    retryDelay: 100,
    connectTimeout: 3000,
    timeout: Math.min(10_000, options.maxRetryTimeMs),
    autocreateTopics: false,
    partitioner: platformaticPartitioner(options.murmur2),
    ...(options.compression && options.compression !== 'none' ? { compression: options.compression } : {}),
  });
  try {
    // Connects, and takes a producer id, now: a start fails here when Kafka refuses, as with kafkajs.
    await producer.initIdempotentProducer({});
  } catch (error) {
    await producer.close(true).catch(() => undefined);
    throw error;
  }
  const bytes = new HeaderBytes();
  return {
    async send(topic, records) {
      const messages = new Array<{ topic: string; key: Buffer | undefined; value: Buffer | undefined; headers?: Map<Buffer, Buffer> }>(
        records.length,
      );
      for (let i = 0; i < records.length; i++) {
        const record: OutgoingRecord = records[i]!;
        const headers = headerMap(record.headers, bytes);
        messages[i] = {
          topic,
          key: record.key === null ? undefined : Buffer.isBuffer(record.key) ? record.key : Buffer.from(record.key),
          value: record.value ?? undefined,
          ...(headers ? { headers } : {}),
        };
      }
      const result = await producer.send({ messages });
      // Every partition written to must be in the answer (what sendAcknowledged checks of kafkajs).
      if (!result.offsets || result.offsets.length === 0) {
        throw new Error(`the brokers answered the produce to ${topic} without offsets; not acknowledged`);
      }
    },
    close: () => producer.close(true),
  };
}
