import { describe, expect, it } from 'vitest';
import { ROW_BLOCK_BYTES, RowBinaryEncoder, RowBinaryError, type RowSchema } from './row-binary.js';

interface Row {
  text: string;
  maybe: string | null;
  small: number;
  mid: number;
  big: number;
  bigOrNull: number | null;
  real: number;
  realOrNull: number | null;
  day: string;
  at: string;
  list: string[];
}

const SCHEMA = {
  text: 'String',
  maybe: 'Nullable(String)',
  small: 'UInt8',
  mid: 'UInt32',
  big: 'UInt64',
  bigOrNull: 'Nullable(UInt64)',
  real: 'Float64',
  realOrNull: 'Nullable(Float64)',
  day: 'Date',
  at: 'DateTime',
  list: 'Array(String)',
} as const satisfies RowSchema<Row>;

const row = (overrides: Partial<Row> = {}): Row => ({
  text: 'héllo',
  maybe: null,
  small: 7,
  mid: 70_000,
  big: 2 ** 40 + 5,
  bigOrNull: 3,
  real: 1.5,
  realOrNull: Infinity,
  day: '1970-01-03',
  at: '1970-01-01 00:01:40',
  list: ['a', ''],
  ...overrides,
});

describe('RowBinaryEncoder', () => {
  it('writes each column in the schema order, in ClickHouse RowBinary', () => {
    const bytes = new RowBinaryEncoder<Row>(SCHEMA).encode(row());
    const expected = Buffer.concat([
      Buffer.from([6]), // 'héllo' is 6 bytes of UTF-8
      Buffer.from('héllo', 'utf8'),
      Buffer.from([1]), // maybe: NULL
      Buffer.from([7]),
      Buffer.from([0x70, 0x11, 0x01, 0x00]), // 70,000 little-endian
      Buffer.from([5, 0, 0, 0, 0, 1, 0, 0]), // 2^40 + 5
      Buffer.from([0, 3, 0, 0, 0, 0, 0, 0, 0]), // bigOrNull: a value, 3
      Buffer.from([0, 0, 0, 0, 0, 0, 0xf8, 0x3f]), // 1.5
      Buffer.from([1]), // realOrNull: Infinity is NULL, as JSON writes it
      Buffer.from([2, 0]), // day 2
      Buffer.from([100, 0, 0, 0]), // second 100
      Buffer.from([2, 1, 0x61, 0]), // ['a', '']
    ]);
    expect(bytes.toString('hex')).toBe(expected.toString('hex'));
  });

  it('writes string lengths as LEB128 varints and grows past its scratch buffer', () => {
    const long = 'x'.repeat(200_000);
    const bytes = new RowBinaryEncoder<Row>(SCHEMA).encode(row({ text: long }));
    // 200,000 = 0x30d40: 0xc0 0x9a 0x0c
    expect([...bytes.subarray(0, 3)]).toEqual([0xc0, 0x9a, 0x0c]);
    expect(bytes.subarray(3, 3 + long.length).toString('utf8')).toBe(long);
  });

  it('writes a string of any length and width as its measured length then its UTF-8, whichever way it is written', () => {
    // A string is written before it is measured up to DIRECT_TEXT_BYTES of room (its
    // length's varint as wide as three bytes per unit would need, the text moved back
    // when fewer bytes do), measured first past it: the bytes are the same either way.
    const reference = (text: string) => {
      const utf8 = Buffer.from(text, 'utf8');
      const varint: number[] = [];
      for (let rest = utf8.length; ; rest = Math.floor(rest / 0x80)) {
        if (rest < 0x80) {
          varint.push(rest);
          break;
        }
        varint.push((rest % 0x80) | 0x80);
      }
      return Buffer.concat([Buffer.from(varint), utf8]);
    };
    const encoder = new RowBinaryEncoder<{ text: string; maybe: string | null }>({ text: 'String', maybe: 'Nullable(String)' });
    const texts = [
      'x'.repeat(42),
      'x'.repeat(43), // 43 bytes: a one-byte length where three bytes a unit would need two
      'x'.repeat(127),
      'x'.repeat(128),
      'é'.repeat(64), // 128 bytes: a two-byte length
      '東'.repeat(43),
      '🚀'.repeat(40),
      'lone: \ud800'.repeat(20),
      'x'.repeat(5_462), // 16,386 of room: a three-byte varint for a two-byte length
      '東'.repeat(5_462), // 16,386 bytes: three bytes of length either way
      'x'.repeat(21_845), // 65,535 of room: written first
      'x'.repeat(21_846), // past it: measured first
      '東'.repeat(30_000),
    ];
    for (const text of texts) {
      const bytes = encoder.encode({ text, maybe: text });
      const one = reference(text);
      expect(bytes.equals(Buffer.concat([one, Buffer.from([0]), one]))).toBe(true);
    }
  });

  it("writes a short string that lands within a few bytes of its scratch buffer's end", () => {
    // The first text takes the scratch buffer to 131,073 bytes (its 131,063 units and a
    // three-byte length), leaving seven: room for each short text written after it, not
    // for a varint's own ten. Each short text must come through whole at any width.
    const encoder = new RowBinaryEncoder<{ first: string; second: string }>({ first: 'String', second: 'String' });
    const first = 'x'.repeat(131_063);
    for (const second of ['✓', 'é', 'x', '', '✓✓']) {
      const bytes = encoder.encode({ first, second });
      const tail = Buffer.from(second, 'utf8');
      expect(bytes.length).toBe(3 + first.length + 1 + tail.length);
      expect(bytes.subarray(3 + first.length).equals(Buffer.concat([Buffer.from([tail.length]), tail]))).toBe(true);
    }
  });

  it('refuses, naming the column, a value its column cannot hold; a later row is whole', () => {
    const encoder = new RowBinaryEncoder<Row>(SCHEMA);
    const refused: [Partial<Row>, string][] = [
      [{ big: -1 }, 'big'],
      [{ big: 1.5 }, 'big'],
      [{ big: 2 ** 64 }, 'big'],
      [{ small: 256 }, 'small'],
      [{ bigOrNull: -3 }, 'bigOrNull'],
      [{ text: null as unknown as string }, 'text'],
      [{ at: '2026-13-01 00:00:00' }, 'at'],
      [{ at: '2026-02-30 00:00:00' }, 'at'],
      [{ at: '1969-12-31 23:59:59' }, 'at'],
      [{ day: '2026-11-26T00:00:00' }, 'day'],
      [{ list: 'a' as unknown as string[] }, 'list'],
    ];
    for (const [overrides, column] of refused) {
      expect(() => encoder.encode(row(overrides)), JSON.stringify(overrides)).toThrow(RowBinaryError);
      expect(() => encoder.encode(row(overrides))).toThrow(`column ${column}`);
    }
    expect(encoder.encode(row())).toEqual(new RowBinaryEncoder<Row>(SCHEMA).encode(row()));
  });

  it('keeps rows encoded one after the other in memory, each unchanged by the rows after it', () => {
    const encoder = new RowBinaryEncoder<Row>(SCHEMA);
    // Each row's bytes as first written, copied out of another encoder's block at once
    // (an encoder per row would allocate a block per row: gigabytes for this test).
    const reference = new RowBinaryEncoder<Row>(SCHEMA);
    const rowAt = (index: number) => row({ text: `row ${index}`, big: index });
    const expected = Array.from({ length: 20_000 }, (_, index) => Buffer.from(reference.encode(rowAt(index))));
    const encoded = expected.map((_, index) => encoder.encode(rowAt(index)));
    const changed = encoded.flatMap((bytes, index) => (bytes.equals(expected[index]!) ? [] : [index]));
    expect(changed).toEqual([]);
    let adjacent = 0;
    for (const [index, bytes] of encoded.entries()) {
      const before = encoded[index - 1];
      if (before && before.buffer === bytes.buffer && before.byteOffset + before.length === bytes.byteOffset) adjacent++;
    }
    // A block holds ROW_BLOCK_BYTES: only a row that starts a new block lies apart from the one before.
    const blocks = new Set(encoded.map((bytes) => bytes.buffer)).size;
    expect(blocks).toBeGreaterThan(1);
    expect(blocks).toBeLessThanOrEqual(Math.ceil(encoded.reduce((sum, bytes) => sum + bytes.length, 0) / (ROW_BLOCK_BYTES * 0.9)));
    expect(adjacent).toBe(encoded.length - blocks);
  });

  it('gives a row much larger than most its own buffer, and goes on in its block after it', () => {
    const encoder = new RowBinaryEncoder<Row>(SCHEMA);
    const small = encoder.encode(row());
    const large = encoder.encode(row({ text: 'x'.repeat(ROW_BLOCK_BYTES / 2) }));
    const next = encoder.encode(row());
    expect(large.buffer).not.toBe(small.buffer);
    expect(large.byteLength).toBe(large.buffer.byteLength);
    expect(next.buffer).toBe(small.buffer);
    expect(next.byteOffset).toBe(small.byteOffset + small.length);
  });

  it('names its columns for the INSERT', () => {
    expect(new RowBinaryEncoder<Row>(SCHEMA).columnList).toBe('(text, maybe, small, mid, big, bigOrNull, real, realOrNull, day, at, list)');
  });
});

describe('RowBinaryEncoder dates', () => {
  it('reads every day of 1970 to 2105 and the seconds of a day as Date.parse does', () => {
    const encoder = new RowBinaryEncoder<Row>(SCHEMA);
    const wrong: string[] = [];
    for (let day = 0; day < 49_674; day += 1) {
      const ms = day * 86_400_000 + ((day * 7919) % 86_400) * 1000;
      const text = new Date(ms).toISOString();
      const bytes = encoder.encode(row({ day: text.slice(0, 10), at: `${text.slice(0, 10)} ${text.slice(11, 19)}` }));
      const listStart = bytes.length - 4;
      if (bytes.readUInt16LE(listStart - 6) !== day || bytes.readUInt32LE(listStart - 4) !== ms / 1000) wrong.push(text);
    }
    expect(wrong).toEqual([]);
  });
});
