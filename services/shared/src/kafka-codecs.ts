// Every compression codec Kafka has, for every Kafka client of the project: kafkajs
// reads and writes gzip only, and answers any other batch with "not implemented", which
// stopped all loading at the first batch a Java, librdkafka or Go producer (or a
// broker with `compression.type` set) compressed otherwise. The codecs here; kafka.ts
// (the one file that imports the client) registers them once, when it is loaded:
// - snappy through the WebAssembly build @platformatic/kafka ships (`@platformatic/wasm-utils`:
//   a third of the native `snappy` package's CPU measured alone, a fifth less of a
//   kafkajs reader's CPU per record; bench/analysis.md), and through `snappy` (napi-rs)
//   for a block past WASM_SNAPPY_MAX_BYTES; raw blocks as librdkafka writes them and the
//   xerial framing of Java's snappy-java;
// - lz4 through `lz4-napi`: the LZ4 frame format Kafka uses since 0.10 (KIP-57);
// - zstd through Node's own zlib (Node 22.15 and later).
import zlib from 'node:zlib';
import { promisify } from 'node:util';
import { snappyCompress, snappyDecompress as wasmSnappyDecompress } from '@platformatic/wasm-utils';
import snappy from 'snappy';
import { compressFrame, decompressFrame } from 'lz4-napi';

interface Codec {
  compress(encoder: { buffer: Buffer }): Promise<Buffer>;
  decompress(buffer: Buffer): Promise<Buffer>;
}

/** snappy-java's stream header: magic, then version and compatible version (int32 each). */
const XERIAL_MAGIC = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]);
const XERIAL_HEADER_BYTES = 16;

/** Whether a snappy payload is in snappy-java's framing (Java producers) rather than one raw block. */
export function isXerial(buffer: Buffer): boolean {
  return buffer.length >= XERIAL_HEADER_BYTES && buffer.subarray(0, XERIAL_MAGIC.length).equals(XERIAL_MAGIC);
}

/**
 * The largest block the WebAssembly build compresses, or (by what the block says)
 * decompresses to. Its memory grows to the largest input and output it has held and
 * never shrinks: the gateway's largest batch (4 MiB) fits, and a larger one goes to the
 * native package, whose output is an ordinary Buffer freed with it.
 */
export const WASM_SNAPPY_MAX_BYTES = 8 * 1024 * 1024;

/** The length a raw snappy block says it decompresses to (its leading varint, at most 32 bits); undefined when that is cut short. */
export function snappyClaimedLength(block: Buffer): number | undefined {
  let length = 0;
  for (let at = 0; at < 5 && at < block.length; at++) {
    const byte = block[at]!;
    length += (byte & 0x7f) * 2 ** (7 * at);
    if (byte < 0x80) return length;
  }
  return undefined;
}

/** One raw snappy block decompressed; throws on a corrupt one. */
function uncompressBlock(block: Buffer): Buffer {
  const claimed = snappyClaimedLength(block);
  if (claimed === undefined || claimed > WASM_SNAPPY_MAX_BYTES) return snappy.uncompressSync(block) as Buffer;
  try {
    return wasmSnappyDecompress(block);
  } catch {
    // The WebAssembly build stops at a corrupt block without saying why ("unreachable").
    throw new Error(`snappy: corrupt input (a block of ${block.length} bytes that says it holds ${claimed})`);
  }
}

/** Raw snappy of `buffer` (one block, as librdkafka writes it), through the WebAssembly build within its bound. */
export function snappyBlock(buffer: Buffer): Buffer {
  return buffer.length > WASM_SNAPPY_MAX_BYTES ? snappy.compressSync(buffer) : snappyCompress(buffer);
}

async function snappyDecompress(buffer: Buffer): Promise<Buffer> {
  if (!isXerial(buffer)) return uncompressBlock(buffer);
  // After the header: blocks, each a big-endian int32 length and that many bytes of raw snappy.
  const blocks: Buffer[] = [];
  for (let at = XERIAL_HEADER_BYTES; at < buffer.length;) {
    if (at + 4 > buffer.length) throw new Error('snappy (xerial): truncated block length');
    const length = buffer.readInt32BE(at);
    at += 4;
    if (length < 0 || at + length > buffer.length) throw new Error('snappy (xerial): block past the end of the payload');
    blocks.push(uncompressBlock(buffer.subarray(at, at + length)));
    at += length;
  }
  return Buffer.concat(blocks);
}

type ZlibCall = (buffer: Buffer, callback: (error: Error | null, result: Buffer) => void) => void;
// The project's Node typings predate zstd in zlib.
const zstd = zlib as unknown as { zstdCompress?: ZlibCall; zstdDecompress?: ZlibCall };
const zstdCompress = zstd.zstdCompress ? promisify(zstd.zstdCompress) : undefined;
const zstdDecompress = zstd.zstdDecompress ? promisify(zstd.zstdDecompress) : undefined;
const noZstd = () => Promise.reject(new Error(`zstd needs Node.js 22.15 or later (this is ${process.version})`));

/** Where a run of decompressed bytes came from: the compressed bytes, and the codec that decompressed them. */
interface Origin {
  start: number;
  end: number;
  compressed: Buffer;
  decompress: (buffer: Buffer) => Promise<Buffer>;
}

/** By the memory a decompression's output lies in (several outputs can share one: Node's pool for small buffers). */
const origins = new WeakMap<ArrayBufferLike, Origin[]>();

/** `decompress`, remembering where each output came from for recoverable(); forgotten with the output. */
function remembering(decompress: (buffer: Buffer) => Promise<Buffer>): (buffer: Buffer) => Promise<Buffer> {
  return async (compressed) => {
    const output = await decompress(compressed);
    const origin = { start: output.byteOffset, end: output.byteOffset + output.length, compressed, decompress };
    const known = origins.get(output.buffer);
    if (known) known.push(origin);
    else origins.set(output.buffer, [origin]);
    return output;
  };
}

/**
 * snappy runs in the calling thread: the native package's asynchronous calls hand each
 * batch to the thread pool and back, and held 60–160 MB more RSS in the services under
 * load for no less CPU per record (bench/analysis.md). A batch of 1 MB takes about 1.3 ms
 * to compress and 0.8 ms to decompress in the WebAssembly build.
 */
export const codecs: Record<'snappy' | 'lz4' | 'zstd', Codec> = {
  snappy: {
    compress: async (encoder) => snappyBlock(encoder.buffer),
    decompress: remembering(snappyDecompress),
  },
  lz4: {
    compress: async (encoder) => compressFrame(encoder.buffer),
    decompress: remembering(async (buffer) => decompressFrame(buffer)),
  },
  zstd: {
    compress: async (encoder) => (zstdCompress ? zstdCompress(encoder.buffer) : noZstd()),
    decompress: remembering(async (buffer) => (zstdDecompress ? zstdDecompress(buffer) : noZstd())),
  },
};

/**
 * A way to have `slice` (a record's key or value, a part of a record batch these codecs
 * decompressed) again later from the compressed batch, without holding the decompressed
 * one: a reader that keeps a record long after its batch (the ingester, until its load
 * unit is in) then holds about a third of the bytes for snappy, and decompresses again
 * only when it needs the record (a dead letter at load time). Undefined when the slice
 * did not come from these codecs (an uncompressed or gzip batch): keep it as it is.
 */
export function recoverable(slice: Buffer): Recover | undefined {
  const { byteOffset, length } = slice;
  const origin = origins.get(slice.buffer)?.find((candidate) => byteOffset >= candidate.start && byteOffset + length <= candidate.end);
  if (!origin) return undefined;
  return reader(origin.compressed, origin.decompress, byteOffset - origin.start, byteOffset - origin.start + length);
}

/**
 * The reader of bytes `from`–`to` of what `compressed` decompresses to. Made apart from
 * recoverable(): a closure there would share its scope, and so hold the slice and with
 * it the whole decompressed batch (what it is for not to hold).
 */
function reader(compressed: Buffer, decompress: Origin['decompress'], from: number, to: number): Recover {
  return async (memo) => {
    let output = memo?.get(compressed);
    if (!output) {
      output = decompress(compressed);
      memo?.set(compressed, output);
    }
    return (await output).subarray(from, to);
  };
}

/**
 * Reads a slice again (recoverable()). Slices of one batch read together share its
 * decompression through `memo` (by compressed batch), which the caller drops after.
 */
export type Recover = (memo?: Map<Buffer, Promise<Buffer>>) => Promise<Buffer>;
