// The codecs registered into kafkajs: each compresses and decompresses through kafkajs's
// own codec table, and snappy reads both the raw blocks librdkafka writes and the
// xerial framing of Java's snappy-java (built here by hand, block by block).
import { createRequire } from 'node:module';
import snappy from 'snappy';
import { describe, expect, it } from 'vitest';
import { codecs, isXerial } from './kafka-codecs.js';
import { COMPRESSION_TYPES, registerKafkaCodecs } from './kafka.js';

const { lookupCodec } = createRequire(import.meta.url)('kafkajs/src/protocol/message/compression') as {
  lookupCodec(type: number): { compress(encoder: { buffer: Buffer }): Promise<Buffer>; decompress(buffer: Buffer): Promise<Buffer> };
};

const text = Buffer.from(JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ prompt: `prompt ${i} `.repeat(20), i }))));

describe('Kafka codecs', () => {
  registerKafkaCodecs();

  it.each(['gzip', 'snappy', 'lz4', 'zstd'] as const)('%s: kafkajs compresses and decompresses through it', async (name) => {
    const codec = lookupCodec(COMPRESSION_TYPES[name]);
    const compressed = await codec.compress({ buffer: text });
    expect(compressed.length).toBeLessThan(text.length / 4);
    expect((await codec.decompress(compressed)).equals(text)).toBe(true);
  });

  it("snappy reads snappy-java's xerial framing: header, then length-prefixed raw blocks", async () => {
    const halves = [text.subarray(0, 1000), text.subarray(1000)];
    const header = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00, 0, 0, 0, 1, 0, 0, 0, 1]);
    const blocks = halves.map((half) => {
      const block = snappy.compressSync(half);
      const length = Buffer.alloc(4);
      length.writeInt32BE(block.length);
      return Buffer.concat([length, block]);
    });
    const framed = Buffer.concat([header, ...blocks]);
    expect(isXerial(framed)).toBe(true);
    expect(isXerial(snappy.compressSync(text))).toBe(false);
    expect((await codecs.snappy.decompress(framed)).equals(text)).toBe(true);
    await expect(codecs.snappy.decompress(framed.subarray(0, framed.length - 10))).rejects.toThrow(/past the end/);
  });

  it('a corrupt payload rejects (never hangs or returns garbage)', async () => {
    for (const name of ['snappy', 'lz4', 'zstd'] as const) {
      await expect(lookupCodec(COMPRESSION_TYPES[name]).decompress(Buffer.from('not compressed at all'))).rejects.toThrow();
    }
  });
});
