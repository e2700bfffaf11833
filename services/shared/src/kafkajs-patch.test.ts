// The project patches kafkajs's hot paths for speed (patches/kafkajs+2.2.4.patch,
// applied by `npm install`; docs/development.md, "Dependency patches"): record
// encoding (no zero-filled buffers, exact-size records and batches, varints in place,
// native CRC-32C, one copy to frame a request) and record decoding (timestamps and
// offsets in Number arithmetic, headers gathered in one loop). The partitioner is not patched: the
// project's own (murmur2 in 32-bit arithmetic, kafka.ts) goes in through kafkajs's
// createPartitioner. These tests hold both to what they replace: the wire format
// (kafkajs's decoder reads it back, the CRC equals kafkajs's JavaScript one) and Java's
// partitioning (Kafka's own murmur2 test vectors, and kafkajs's unpatched murmur2); and
// a connection's request queue, which no longer re-arms a 1 ms timer with nothing waiting.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { murmur2, recordingPartitioner } from './kafka.js';

const require = createRequire(import.meta.url);
const crc32C = require('kafkajs/src/protocol/recordBatch/crc32C') as (buffer: Buffer) => number;
const jsCrc32C = require('kafkajs/src/protocol/recordBatch/crc32C/crc32C') as (buffer: Buffer) => number;
const Record = require('kafkajs/src/protocol/recordBatch/record/v0') as (record: object) => { buffer: Buffer };
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0') as {
  RecordBatch: (batch: object) => Promise<{ buffer: Buffer }>;
};
const decodeRecordBatch = require('kafkajs/src/protocol/recordBatch/v0/decoder') as (decoder: object) => Promise<{
  records: { key: Buffer; value: Buffer; headers: Record<string, Buffer> }[];
}>;
const Decoder = require('kafkajs/src/protocol/decoder') as new (buffer: Buffer) => object;
const Encoder = require('kafkajs/src/protocol/encoder') as new () => {
  writeVarLong(value: number | string): unknown;
  writeVarInt(value: number): unknown;
  writeUVarInt(value: number): unknown;
  buffer: Buffer;
};
const decodeRecord = require('kafkajs/src/protocol/recordBatch/record/v0/decoder') as (decoder: object, context: object) => object;
const KafkaLong = require('kafkajs/src/utils/long') as { fromValue(value: unknown): { add(value: unknown): { toString(): string } } };
const HeaderDecoder = require('kafkajs/src/protocol/recordBatch/header/v0/decoder') as (decoder: object) => { key: string; value: Buffer };
const kafkajsMurmur2 = require('kafkajs/src/producer/partitioners/default/murmur2') as (key: string | Buffer) => number;
const createRequest = require('kafkajs/src/protocol/request') as (request: object) => Promise<{ buffer: Buffer }>;

const unsigned = (value: number) => value >>> 0;

describe('the patched kafkajs (record encoding, default partitioner)', () => {
  it('is patched (the CRC-32C is the native one)', () => {
    expect(fs.readFileSync(require.resolve('kafkajs/src/protocol/recordBatch/crc32C'), 'utf8')).toContain("require('@node-rs/crc32')");
  });

  it('computes the same CRC-32C as kafkajs in JavaScript', () => {
    for (const size of [0, 1, 7, 64, 1000, 4096, 100_000]) {
      const buffer = randomBytes(size);
      expect(crc32C(buffer), `${size} bytes`).toBe(unsigned(jsCrc32C(buffer)));
      // kafkajs passes views into larger buffers.
      const view = Buffer.concat([randomBytes(3), buffer, randomBytes(5)]).subarray(3, 3 + size);
      expect(crc32C(view), `a view of ${size} bytes`).toBe(unsigned(jsCrc32C(buffer)));
    }
  });

  it('encodes each record into a buffer of exactly its size', () => {
    for (const valueBytes of [0, 100, 3000, 5000, 70_000]) {
      const record = Record({ key: 'key-1', value: randomBytes(valueBytes), headers: { 'x-request-id': 'r-1' }, offsetDelta: 3 });
      expect(record.buffer.length).toBe((record as unknown as { buf: Buffer }).buf.length);
    }
  });

  it('writes varints and varlongs as the unpatched encoder did', () => {
    // The unpatched writeUVarInt: an array of bytes, then a Buffer of it.
    const uvarint = (value: number) => {
      const bytes: number[] = [];
      while ((value & 0xffffff80) !== 0) {
        bytes.push((value & 0x7f) | 0x80);
        value >>>= 7;
      }
      bytes.push(value & 0x7f);
      return Buffer.from(bytes);
    };
    const zigzag = (value: number) => (value << 1) ^ (value >> 31);
    const int32s = [0, 1, -1, 63, 64, -64, -65, 127, 128, 300, -300, 16_383, 16_384, 2 ** 20, 2 ** 30, -(2 ** 30), 2 ** 31 - 1, -(2 ** 31)];
    for (const value of int32s) {
      const varint = new Encoder();
      varint.writeVarInt(value);
      expect([...varint.buffer], `varint ${value}`).toEqual([...uvarint(zigzag(value))]);
      // A varlong in the int32 range takes the varint path; it must match the Long path.
      const varlong = new Encoder();
      varlong.writeVarLong(value);
      const viaLong = new Encoder();
      viaLong.writeVarLong(String(value));
      expect([...varlong.buffer], `varlong ${value}`).toEqual([...viaLong.buffer]);
    }
    for (const value of [0, 1, 127, 128, 2 ** 31, 2 ** 32 - 1]) {
      const unsigned = new Encoder();
      unsigned.writeUVarInt(value);
      expect([...unsigned.buffer], `uvarint ${value}`).toEqual([...uvarint(value)]);
    }
  });

  it('frames a request as size, header and payload in one buffer', async () => {
    const payload = new Encoder();
    payload.writeVarInt(300);
    for (const clientId of ['gateway-1', null]) {
      const framed = (
        await createRequest({ correlationId: 7, clientId, request: { apiKey: 0, apiVersion: 7, encode: async () => payload } })
      ).buffer;
      const clientIdBytes = clientId === null ? 0 : Buffer.byteLength(clientId);
      expect(framed.readInt32BE(0)).toBe(framed.length - 4);
      expect([framed.readInt16BE(4), framed.readInt16BE(6), framed.readInt32BE(8), framed.readInt16BE(12)]).toEqual([
        0,
        7,
        7,
        clientId === null ? -1 : clientIdBytes,
      ]);
      expect(framed.subarray(14, 14 + clientIdBytes).toString()).toBe(clientId ?? '');
      expect(framed.subarray(14 + clientIdBytes).equals(payload.buffer)).toBe(true);
    }
  });

  it('writes record batches that decode to what was sent, with a valid CRC', async () => {
    const messages = Array.from({ length: 200 }, (_, index) => ({
      key: `api-key:${index}`,
      value: randomBytes(1 + ((index * 997) % 6000)),
      headers: { 'content-type': 'application/json; framing=schema-registry', 'x-request-id': `request-${index}` },
    }));
    const records = messages.map((message, offsetDelta) => Record({ ...message, offsetDelta, timestampDelta: offsetDelta }));
    const batch = (await RecordBatch({ records, lastOffsetDelta: records.length - 1 })).buffer;

    // FirstOffset (8), Length (4), PartitionLeaderEpoch (4), Magic (1), CRC (4), then the body the CRC covers.
    expect(batch.readInt32BE(8)).toBe(batch.length - 12);
    expect(batch.readUInt32BE(17)).toBe(unsigned(jsCrc32C(batch.subarray(21))));
    const decoded = await decodeRecordBatch(new Decoder(batch));
    expect(decoded.records).toHaveLength(messages.length);
    decoded.records.forEach((record, index) => {
      const sent = messages[index]!;
      expect(record.key.toString()).toBe(sent.key);
      expect(record.value.equals(sent.value)).toBe(true);
      expect(record.headers['x-request-id']!.toString()).toBe(sent.headers['x-request-id']);
      expect(record.headers['content-type']!.toString()).toBe(sent.headers['content-type']);
    });
  });

  it("hashes keys as Java's murmur2 (Kafka's own test vectors), in 32-bit arithmetic", () => {
    const javaVectors: [string | Buffer, number][] = [
      ['21', -973932308],
      ['foobar', -790332482],
      ['a-little-bit-long-string', -985981536],
      ['a-little-bit-longer-string', -1486304829],
      ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
      [Buffer.from('abc'), 479470107],
    ];
    for (const [key, hash] of javaVectors) expect(murmur2(key), String(key)).toBe(hash);
    // And against a BigInt rendering of the same steps (64-bit products, kept to 32 bits).
    const reference = (data: Buffer) => {
      const M = 0x5bd1e995n;
      const int = (value: bigint) => BigInt.asIntN(32, value);
      const ushr = (value: bigint, bits: bigint) => BigInt.asUintN(32, value) >> bits;
      let h = int(0x9747b28cn ^ BigInt(data.length));
      const whole = data.length - (data.length % 4);
      for (let i = 0; i < whole; i += 4) {
        let k = int(BigInt(data.readUInt32LE(i)) * M);
        k = int(k ^ ushr(k, 24n));
        k = int(k * M);
        h = int(int(h * M) ^ k);
      }
      const rest = data.length % 4;
      if (rest >= 3) h = int(h ^ (BigInt(data[whole + 2]!) << 16n));
      if (rest >= 2) h = int(h ^ (BigInt(data[whole + 1]!) << 8n));
      if (rest >= 1) h = int(int(h ^ BigInt(data[whole]!)) * M);
      h = int(h ^ ushr(h, 13n));
      h = int(h * M);
      return Number(int(h ^ ushr(h, 15n)));
    };
    for (let index = 0; index < 2000; index++) {
      const key = index % 2 === 0 ? randomBytes(index % 67) : Buffer.from(`api-key:${index}:é東${'x'.repeat(index % 7)}`);
      expect(murmur2(key), key.toString('hex')).toBe(reference(key));
    }
    // And kafkajs's own (unpatched: 64-bit Longs) agrees.
    for (const key of ['21', 'foobar', 'api-key:7:é東', Buffer.from('abc')]) expect(murmur2(key)).toBe(kafkajsMurmur2(key));
  });

  it('partitions keyed messages by the hash, and keyless ones among the partitions with a leader', () => {
    const partitionMetadata = [0, 1, 2, 3, 4, 5].map((partitionId) => ({ partitionId, leader: partitionId === 2 ? -1 : 1 }));
    const choose = recordingPartitioner() as unknown as (args: { topic: string; partitionMetadata: object[]; message: object }) => number;
    const keyed = { key: 'foobar' as string, partition: undefined as number | undefined };
    expect(choose({ topic: 't', partitionMetadata, message: keyed })).toBe((-790332482 & 0x7fffffff) % 6);
    // The partition chosen is written onto the message (sendAcknowledged checks each was answered for).
    expect(keyed.partition).toBe((-790332482 & 0x7fffffff) % 6);
    expect(choose({ topic: 't', partitionMetadata, message: { key: 'x', partition: 4 } })).toBe(4);
    const keyless = new Set(Array.from({ length: 50 }, () => choose({ topic: 't', partitionMetadata, message: { value: 'v' } })));
    expect([...keyless].sort()).toEqual([0, 1, 3, 4, 5]);
  });
});

describe("the patched kafkajs (a connection's request queue)", () => {
  const RequestQueue = require('kafkajs/src/network/requestQueue') as new (options: object) => {
    pending: unknown[];
    throttleCheckTimeoutId: ReturnType<typeof setTimeout> | null;
    checkPendingRequests(): void;
    scheduleCheckPendingRequests(): void;
    throttledUntil: number;
  };
  const logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };
  const queue = () =>
    new RequestQueue({ maxInFlightRequests: 1, requestTimeout: 1000, enforceRequestTimeout: true, clientId: 't', broker: 'b', logger });

  it('arms no timer when no request waits (kafkajs armed a 1 ms one after every answer, again and again)', () => {
    const idle = queue();
    idle.checkPendingRequests();
    expect(idle.throttleCheckTimeoutId).toBeNull();
    idle.throttledUntil = Date.now() + 60_000;
    idle.scheduleCheckPendingRequests();
    expect(idle.throttleCheckTimeoutId).toBeNull();
  });

  it('still checks later for a request that waits', () => {
    const waiting = queue();
    waiting.throttledUntil = Date.now() + 60_000;
    waiting.pending.push({});
    waiting.scheduleCheckPendingRequests();
    expect(waiting.throttleCheckTimeoutId).not.toBeNull();
    clearTimeout(waiting.throttleCheckTimeoutId!);
  });
});

describe('the patched kafkajs (grouping a send by partition)', () => {
  const path = require.resolve('kafkajs/src/producer/groupMessagesPerPartition');
  const group = require(path) as (options: {
    topic: string;
    partitionMetadata: { partitionId: number }[];
    messages: { key: string }[];
    partitioner: (options: { message: { key: string } }) => number;
  }) => Record<number, { key: string }[]>;

  it('appends in place (kafkajs copied the partition list for every message: quadratic in a send)', () => {
    expect(fs.readFileSync(path, 'utf8')).not.toContain('[...current, message]');
  });

  it('keeps each partition in the order of the send', () => {
    const messages = Array.from({ length: 1000 }, (_, i) => ({ key: `k${i}` }));
    const grouped = group({
      topic: 't',
      partitionMetadata: [{ partitionId: 0 }, { partitionId: 1 }, { partitionId: 2 }],
      messages,
      partitioner: ({ message }) => Number(message.key.slice(1)) % 3,
    });
    expect(Object.keys(grouped)).toEqual(['0', '1', '2']);
    for (const partition of [0, 1, 2]) expect(grouped[partition]).toEqual(messages.filter((_, i) => i % 3 === partition));
    expect(group({ topic: 't', partitionMetadata: [], messages, partitioner: () => 0 })).toEqual({});
  });
});

/** A kafkajs decoder as these tests read it. */
interface RecordReader {
  readInt8(): number;
  readVarLong(): unknown;
  readVarInt(): number;
  readVarIntBytes(): Buffer | null;
  readVarIntArray<T>(reader: (decoder: RecordReader) => T): T[];
}

/** kafkajs 2.2.4's record decoder as it was before the patch: the patched one must return what this returns. */
function decodeRecordAsBefore(decoder: RecordReader, context: Record<string, unknown>): object {
  const { firstOffset, firstTimestamp, magicByte, isControlBatch = false, timestampType, maxTimestamp } = context;
  const attributes = decoder.readInt8();
  const timestampDelta = decoder.readVarLong();
  const logAppendTime = 1; // kafkajs's TimestampTypes.LOG_APPEND_TIME
  const timestamp =
    timestampType === logAppendTime && maxTimestamp ? maxTimestamp : KafkaLong.fromValue(firstTimestamp).add(timestampDelta).toString();
  const offsetDelta = decoder.readVarInt();
  const offset = KafkaLong.fromValue(firstOffset).add(offsetDelta).toString();
  const key = decoder.readVarIntBytes();
  const value = decoder.readVarIntBytes();
  const headers = decoder.readVarIntArray(HeaderDecoder as (decoder: RecordReader) => { key: string; value: Buffer }).reduce(
    (obj: Record<string, unknown>, { key, value }) => ({
      ...obj,
      [key]: obj[key] === undefined ? value : Array.isArray(obj[key]) ? (obj[key] as unknown[]).concat([value]) : [obj[key], value],
    }),
    {},
  );
  return { magicByte, attributes, timestamp, offset, key, value, headers, isControlRecord: isControlBatch, batchContext: context };
}

describe('the patched kafkajs (record decoding)', () => {
  it('is patched (a record takes its timestamp and offset in Number arithmetic where it can)', () => {
    expect(fs.readFileSync(require.resolve('kafkajs/src/protocol/recordBatch/record/v0/decoder'), 'utf8')).toContain('otm patch');
  });

  it('reads every record as the unpatched decoder did: deltas of every size and sign, firsts past 2^53, headers repeated or named as Object.prototype names', () => {
    const deltas = [
      0,
      1,
      -1,
      63,
      -64,
      8191,
      -8193,
      2 ** 27 - 1,
      -(2 ** 27),
      2 ** 28,
      -(2 ** 28) - 1,
      2 ** 31,
      -(2 ** 35),
      2 ** 40,
      -(2 ** 52),
    ];
    const firsts = ['0', '-1', '1764000000000', '9007199254740990', '9007199254740993', '-9007199254740993', '9223372036854775000'];
    const headerSets: Record<string, unknown>[] = [
      {},
      { 'content-type': Buffer.from('application/json'), 'x-request-id': Buffer.from('r-1') },
      { 'x-dup': [Buffer.from('a'), Buffer.from('b'), Buffer.from('c')] },
      { constructor: Buffer.from('c'), toString: Buffer.from('t') },
      JSON.parse('{"__proto__": "p", "x": "y"}') as Record<string, unknown>,
    ];
    let checked = 0;
    for (const [d, timestampDelta] of deltas.entries()) {
      for (const first of firsts) {
        for (const timestampType of [0, 1]) {
          const headers = headerSets[d % headerSets.length]!;
          const record = Record({
            key: d % 4 === 3 ? null : `key-${d}`,
            value: d % 5 === 4 ? null : randomBytes(d * 37),
            headers,
            offsetDelta: (d * 7919) % 70_000,
            timestampDelta,
          });
          const context = {
            firstOffset: first,
            firstTimestamp: first,
            magicByte: 2,
            timestampType,
            maxTimestamp: '1764000000999',
            isControlBatch: false,
          };
          const body = () =>
            new Decoder((new Decoder(record.buffer) as unknown as RecordReader).readVarIntBytes()!) as unknown as RecordReader;
          // Node's own deep equality: vitest's compares a `constructor` member as the object's type.
          expect(
            isDeepStrictEqual(decodeRecord(body(), context), decodeRecordAsBefore(body(), context)),
            `delta ${timestampDelta}, first ${first}`,
          ).toBe(true);
          checked++;
        }
      }
    }
    expect(checked).toBe(deltas.length * firsts.length * 2);
  });
});
