// The codecs registered into kafkajs: each compresses and decompresses through kafkajs's
// own codec table, and snappy reads both the raw blocks librdkafka writes and the
// xerial framing of Java's snappy-java (built here by hand, block by block).
import { createRequire } from 'node:module';
import v8 from 'node:v8';
import vm from 'node:vm';
import snappy from 'snappy';
import { describe, expect, it } from 'vitest';
import { WASM_SNAPPY_MAX_BYTES, codecs, isXerial, recoverable, snappyBlock, snappyClaimedLength, type Recover } from './kafka-codecs.js';
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

  it.each(['snappy', 'lz4', 'zstd'] as const)(
    '%s: a slice of what it decompressed is read again from the compressed bytes alone',
    async (name) => {
      const codec = lookupCodec(COMPRESSION_TYPES[name]);
      const compressed = await codec.compress({ buffer: text });
      const decompressed = await codec.decompress(compressed);
      const slice = decompressed.subarray(1234, 4321);
      const recover = recoverable(slice);
      expect(recover).toBeDefined();
      const again = await recover!();
      expect(again.equals(text.subarray(1234, 4321))).toBe(true);
      // Another decompression, not the batch held: nothing of it keeps the first alive.
      expect(again.buffer).not.toBe(decompressed.buffer);
      // Slices of one batch read together share one decompression.
      const memo = new Map<Buffer, Promise<Buffer>>();
      const [first, second] = await Promise.all([recover!(memo), recoverable(decompressed.subarray(0, 10))!(memo)]);
      expect(first.buffer).toBe(second.buffer);
      expect(memo.size).toBe(1);
    },
  );

  it('what reads a slice again holds nothing of the decompressed batch (which would stay alive as long as it)', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const compressed = await codecs.snappy.compress({ buffer: text });
    let recover: Recover | undefined;
    const batch = await (async () => {
      const decompressed = await codecs.snappy.decompress(compressed);
      recover = recoverable(decompressed.subarray(5, 50));
      return new WeakRef(decompressed.buffer);
    })();
    await new Promise((resolve) => setTimeout(resolve, 0));
    gc();
    expect(batch.deref()).toBeUndefined();
    expect((await recover!()).equals(text.subarray(5, 50))).toBe(true);
  });

  it('a slice that no codec here decompressed (an uncompressed or gzip batch) is not recoverable: kept as it is', async () => {
    expect(recoverable(Buffer.from(text).subarray(10, 20))).toBeUndefined();
    const gzip = lookupCodec(COMPRESSION_TYPES.gzip);
    expect(recoverable(await gzip.decompress(await gzip.compress({ buffer: text })))).toBeUndefined();
  });

  it("a slice of a small xerial batch (its output in Node's shared pool beside others) is read again from its own batch", async () => {
    const framed = (part: Buffer) => {
      const block = snappy.compressSync(part);
      const length = Buffer.alloc(4);
      length.writeInt32BE(block.length);
      return Buffer.concat([Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00, 0, 0, 0, 1, 0, 0, 0, 1]), length, block]);
    };
    const one = await codecs.snappy.decompress(framed(Buffer.from('first small batch')));
    const two = await codecs.snappy.decompress(framed(Buffer.from('second small batch')));
    expect((await recoverable(one.subarray(6))!()).toString()).toBe('small batch');
    expect((await recoverable(two.subarray(0, 6))!()).toString()).toBe('second');
  });

  it('snappy: the WebAssembly build and the native package write the same raw blocks and read each other', async () => {
    expect(snappyBlock(text).equals(snappy.compressSync(text))).toBe(true);
    expect((await codecs.snappy.decompress(snappy.compressSync(text))).equals(text)).toBe(true);
    expect((snappy.uncompressSync(snappyBlock(text)) as Buffer).equals(text)).toBe(true);
  });

  it("snappy: a block's own length is read from its leading varint", () => {
    expect(snappyClaimedLength(snappy.compressSync(text))).toBe(text.length);
    expect(snappyClaimedLength(snappy.compressSync(Buffer.alloc(0)))).toBe(0);
    expect(snappyClaimedLength(Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]))).toBe(2 ** 32 - 1);
    expect(snappyClaimedLength(Buffer.from([0x80, 0x80]))).toBeUndefined();
    expect(snappyClaimedLength(Buffer.alloc(0))).toBeUndefined();
  });

  it('snappy: a batch past the WebAssembly bound is compressed and decompressed by the native package, the same bytes', async () => {
    const large = Buffer.alloc(WASM_SNAPPY_MAX_BYTES + 1024);
    for (let at = 0; at < large.length; at += text.length) text.copy(large, at);
    const compressed = snappyBlock(large);
    expect(compressed.equals(snappy.compressSync(large))).toBe(true);
    expect(snappyClaimedLength(compressed)).toBeGreaterThan(WASM_SNAPPY_MAX_BYTES);
    expect((await codecs.snappy.decompress(compressed)).equals(large)).toBe(true);
  });

  it('snappy: a corrupt block rejects with what it is, on either side of the bound, and the next batch still decodes', async () => {
    const varint = (n: number) => {
      const bytes: number[] = [];
      for (; n >= 0x80; n = Math.floor(n / 128)) bytes.push((n & 0x7f) | 0x80);
      return Buffer.from([...bytes, n]);
    };
    for (const claimed of [100, WASM_SNAPPY_MAX_BYTES, WASM_SNAPPY_MAX_BYTES + 1, 2 ** 31]) {
      const corrupt = Buffer.concat([varint(claimed), Buffer.from([0x00, 0x41]), Buffer.alloc(100, 0x07)]);
      await expect(codecs.snappy.decompress(corrupt)).rejects.toThrow(/snappy: corrupt input/);
    }
    expect((await codecs.snappy.decompress(snappyBlock(text))).equals(text)).toBe(true);
  });

  it('a corrupt payload rejects (never hangs or returns garbage)', async () => {
    for (const name of ['snappy', 'lz4', 'zstd'] as const) {
      await expect(lookupCodec(COMPRESSION_TYPES[name]).decompress(Buffer.from('not compressed at all'))).rejects.toThrow();
    }
  });
});
