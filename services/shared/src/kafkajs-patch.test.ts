// The project patches kafkajs's record encoding for speed (patches/kafkajs+2.2.4.patch,
// applied by `npm install`): buffers without zero-filling, each record encoded into a
// buffer of its exact size, CRC-32C computed natively. These tests hold the patched
// encoder to the wire format: the batch's CRC equals kafkajs's own JavaScript CRC-32C
// of the same bytes, and kafkajs's decoder reads back every key, value and header.
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

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
const createRequest = require('kafkajs/src/protocol/request') as (request: object) => Promise<{ buffer: Buffer }>;

const unsigned = (value: number) => value >>> 0;

describe('the patched kafkajs record encoding', () => {
  it('is patched (the CRC-32C is the native one)', () => {
    expect(require('node:fs').readFileSync(require.resolve('kafkajs/src/protocol/recordBatch/crc32C'), 'utf8')).toContain(
      "require('@node-rs/crc32')",
    );
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
});
