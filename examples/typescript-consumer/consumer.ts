// Reads the usage topic through the schema registry and prints token sums per model:
// the way a data engineer reads the topic from Node (docs/topic-contract.md). A
// consumer group of its own; each value decoded by the schema id it carries (the
// registry's wire format) and validated against that schema. It also reads the erasure
// topic (`<topic>.erasures`, when it exists): the records of an erased user received at
// or before the erasure are taken out of the sums, whichever topic's message comes first.
//
//   npx tsx consumer.ts --brokers 127.0.0.1:19092 \
//     --registry http://127.0.0.1:18081/apis/ccompat/v7 \
//     --topic telemetry.usage.v1 --group my-analysis --idle-seconds 5
//
// Stops after --idle-seconds without a new message (or at --max-messages) and prints
// one JSON object: {"<provider>/<model>": {"records", "input", "output", "cachedInput", "reasoning"}}.
import { parseArgs, promisify } from 'node:util';
import fs from 'node:fs';
import https from 'node:https';
import zlib from 'node:zlib';
import kafkajs from 'kafkajs';
import snappy from 'snappy';
import { compressFrame, decompressFrame } from 'lz4-napi';
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { Ajv } from 'ajv';
import addFormatsPlugin from 'ajv-formats';

const { Kafka, logLevel, CompressionCodecs, CompressionTypes } = kafkajs;

// kafkajs reads gzip batches only. A topic's batches may be snappy, lz4 or zstd (the
// producer's choice, or the broker's `compression.type`): give it those codecs.
// snappy: raw blocks (librdkafka) or snappy-java's xerial framing (Java producers).
const XERIAL = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]);
async function unsnappy(buffer: Buffer): Promise<Buffer> {
  if (!buffer.subarray(0, 8).equals(XERIAL)) return (await snappy.uncompress(buffer)) as Buffer;
  const blocks: Buffer[] = [];
  for (let at = 16; at + 4 <= buffer.length;) {
    const length = buffer.readInt32BE(at);
    blocks.push((await snappy.uncompress(buffer.subarray(at + 4, at + 4 + length))) as Buffer);
    at += 4 + length;
  }
  return Buffer.concat(blocks);
}
type ZlibCall = (buffer: Buffer, callback: (error: Error | null, result: Buffer) => void) => void;
const zstd = zlib as unknown as { zstdCompress: ZlibCall; zstdDecompress: ZlibCall }; // Node 22.15+
CompressionCodecs[CompressionTypes.Snappy] = () => ({
  compress: async (encoder: { buffer: Buffer }) => snappy.compress(encoder.buffer),
  decompress: unsnappy,
});
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  compress: async (encoder: { buffer: Buffer }) => compressFrame(encoder.buffer),
  decompress: (buffer: Buffer) => decompressFrame(buffer),
});
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  compress: async (encoder: { buffer: Buffer }) => promisify(zstd.zstdCompress)(encoder.buffer),
  decompress: (buffer: Buffer) => promisify(zstd.zstdDecompress)(buffer),
});

interface QueuedRecord {
  meta: { eventKey: string; apiKeyId: string; environment: string; receivedAt: string };
  record: {
    user: { id: string };
    request: { provider: string; modelId: string; status: string };
    tokens?: { input: number; output: number; cachedInput?: number; reasoning?: number };
  };
}

const { values: options } = parseArgs({
  options: {
    brokers: { type: 'string', default: '127.0.0.1:19092' },
    registry: { type: 'string', default: 'http://127.0.0.1:18081/apis/ccompat/v7' },
    topic: { type: 'string', default: 'telemetry.usage.v1' },
    group: { type: 'string', default: 'typescript-consumer-example' },
    'idle-seconds': { type: 'string', default: '5' },
    'max-messages': { type: 'string', default: '0' },
  },
});

const idleMs = Number(options['idle-seconds']) * 1000;
const maxMessages = Number(options['max-messages']);
// The client validates each value with the schema it was written with. The schemas use
// `format: date-time` (ajv-formats) and schema v1 has a keyword of its own, which a
// reader may ignore (strict: false): every rule it stood for is checked at the gateway.
const addFormats = addFormatsPlugin as unknown as (ajv: Ajv) => Ajv;
const jsonOptions = {
  get ajvInstance() {
    return addFormats(new Ajv({ strict: false, allErrors: true }));
  },
};
// TLS and credentials from the variables the project's services read (docs/production.md):
// KAFKA_SECURITY_PROTOCOL (SSL, SASL_SSL), KAFKA_SASL_MECHANISM (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512), KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD, KAFKA_TLS_CA_FILE,
// KAFKA_TLS_CERT_FILE and KAFKA_TLS_KEY_FILE (mTLS); SCHEMA_REGISTRY_USERNAME,
// SCHEMA_REGISTRY_PASSWORD, SCHEMA_REGISTRY_CA_FILE.
const env = process.env;
const protocol = (env.KAFKA_SECURITY_PROTOCOL ?? 'PLAINTEXT').toUpperCase();
const fileOf = (file: string | undefined) => (file ? fs.readFileSync(file) : undefined);
const ssl =
  protocol === 'SSL' || protocol === 'SASL_SSL'
    ? {
        ca: env.KAFKA_TLS_CA_FILE ? [fileOf(env.KAFKA_TLS_CA_FILE)!] : undefined,
        cert: fileOf(env.KAFKA_TLS_CERT_FILE),
        key: fileOf(env.KAFKA_TLS_KEY_FILE),
      }
    : undefined;
const mechanism = (env.KAFKA_SASL_MECHANISM ?? '').toLowerCase();
const sasl = protocol.startsWith('SASL_')
  ? ({ mechanism, username: env.KAFKA_SASL_USERNAME ?? '', password: env.KAFKA_SASL_PASSWORD ?? '' } as {
      mechanism: 'plain';
      username: string;
      password: string;
    })
  : undefined;
const registry = new SchemaRegistry(
  {
    host: options.registry,
    ...(env.SCHEMA_REGISTRY_USERNAME
      ? { auth: { username: env.SCHEMA_REGISTRY_USERNAME, password: env.SCHEMA_REGISTRY_PASSWORD ?? '' } }
      : {}),
    ...(env.SCHEMA_REGISTRY_CA_FILE ? { agent: new https.Agent({ ca: fileOf(env.SCHEMA_REGISTRY_CA_FILE) }) } : {}),
  },
  { [SchemaType.JSON]: jsonOptions } as never,
);
const kafka = new Kafka({
  clientId: 'typescript-consumer-example',
  brokers: options.brokers.split(','),
  logLevel: logLevel.WARN,
  ssl,
  sasl,
});
const consumer = kafka.consumer({ groupId: options.group });

interface Held {
  subject: string;
  receivedMs: number;
  model: string;
  tokens: { input: number; output: number; cachedInput: number; reasoning: number };
}
interface ErasureAnnouncement {
  environment: string;
  userId: string;
  erasedAt: string;
}
/** What was read, by event key (a record read twice is held once); erasures by `<environment>:<userId>`. */
const held = new Map<string, Held>();
const erasedAt = new Map<string, number>();
const erasureTopic = `${options.topic}.erasures`;
let read = 0;
let lastMessage = Date.now();
let stop: () => void = () => undefined;
const stopped = new Promise<void>((resolve) => (stop = resolve));

const admin = kafka.admin();
await admin.connect();
const topics = [options.topic, ...((await admin.listTopics()).includes(erasureTopic) ? [erasureTopic] : [])];
await admin.disconnect();
await consumer.connect();
await consumer.subscribe({ topics, fromBeginning: true });
await consumer.run({
  eachMessage: async ({ topic, message }) => {
    lastMessage = Date.now();
    if (message.value === null) return;
    // decode() reads the schema id from the value, fetches that schema once and validates with it.
    const value = await registry.decode(message.value);
    if (topic === erasureTopic) {
      const erasure = value as ErasureAnnouncement;
      const subject = `${erasure.environment}:${erasure.userId}`;
      const at = Math.max(Date.parse(erasure.erasedAt), erasedAt.get(subject) ?? -Infinity);
      erasedAt.set(subject, at);
      for (const [eventKey, entry] of held) if (entry.subject === subject && entry.receivedMs <= at) held.delete(eventKey);
    } else {
      const { meta, record } = value as QueuedRecord;
      const subject = `${meta.environment}:${record.user.id}`;
      const receivedMs = Date.parse(meta.receivedAt);
      if (receivedMs > (erasedAt.get(subject) ?? -Infinity)) {
        held.set(meta.eventKey, {
          subject,
          receivedMs,
          model: `${record.request.provider}/${record.request.modelId}`,
          tokens: {
            input: record.tokens?.input ?? 0,
            output: record.tokens?.output ?? 0,
            cachedInput: record.tokens?.cachedInput ?? 0,
            reasoning: record.tokens?.reasoning ?? 0,
          },
        });
      }
    }
    if (maxMessages > 0 && ++read >= maxMessages) stop();
  },
});

const idle = setInterval(() => {
  if (Date.now() - lastMessage >= idleMs) stop();
}, 200);
await stopped;
clearInterval(idle);
await consumer.disconnect();
const sums = new Map<string, { records: number; input: number; output: number; cachedInput: number; reasoning: number }>();
for (const { model, tokens } of held.values()) {
  const entry = sums.get(model) ?? { records: 0, input: 0, output: 0, cachedInput: 0, reasoning: 0 };
  entry.records += 1;
  entry.input += tokens.input;
  entry.output += tokens.output;
  entry.cachedInput += tokens.cachedInput;
  entry.reasoning += tokens.reasoning;
  sums.set(model, entry);
}
console.log(JSON.stringify(Object.fromEntries([...sums.entries()].sort(([a], [b]) => a.localeCompare(b)))));
