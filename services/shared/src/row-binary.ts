// ClickHouse's RowBinary format, written for the column types the ingester's tables
// use, the same on 18.16 and current releases: each row is its columns' values one
// after the other, little-endian, no names and no separators. A string is its UTF-8
// length as an unsigned LEB128 varint, then its bytes; Nullable(T) is a byte (1 null,
// 0 a value) then T; Date is days since 1970-01-01 (UInt16); DateTime seconds since
// 1970-01-01 UTC (UInt32: no time zone is involved, unlike the text formats, which
// read a DateTime in the server's zone); Array(T) is its length as a varint, then its
// elements. The INSERT names the columns (`INSERT INTO t (a, b) FORMAT RowBinary`), so
// the table's own column order does not matter.
//
// A value the column cannot hold (a negative or fractional number in an unsigned
// column, a DateTime text that is not one) throws a RowBinaryError naming the column:
// the row is never written in part, so the rows around it stay aligned. Text is
// written as UTF-8 (a lone surrogate, which the ingester replaces before, would become
// U+FFFD); a non-finite number in a Nullable(Float64) is NULL, as JSON writes it.

export type ColumnType =
  | 'String'
  | 'Nullable(String)'
  | 'UInt8'
  | 'UInt32'
  | 'UInt64'
  | 'Nullable(UInt64)'
  | 'Float64'
  | 'Nullable(Float64)'
  | 'Date'
  | 'DateTime'
  | 'Array(String)';

/** The columns of a table's rows, in the order they are written (and named in the INSERT). */
export type RowSchema<Row> = { readonly [Column in keyof Row]: ColumnType };

export class RowBinaryError extends Error {
  constructor(
    readonly column: string,
    detail: string,
  ) {
    super(`column ${column}: ${detail}`);
    this.name = 'RowBinaryError';
  }
}

const TWO_TO_32 = 2 ** 32;
const TWO_TO_64 = 2 ** 64;
const MS_PER_DAY = 86_400_000;

/** The size of the blocks an encoder keeps its rows in. */
export const ROW_BLOCK_BYTES = 256 * 1024;

/** A row larger than this gets a buffer of its own instead of a place in a block. */
const OWN_BUFFER_BYTES = ROW_BLOCK_BYTES / 8;

/** UTF-8 takes at most 3 bytes for each UTF-16 code unit of a string (a surrogate pair's 4 for its two; a lone one 3). */
export const MAX_UTF8_BYTES_PER_CODE_UNIT = 3;

/** A string whose UTF-8 may take up to this many bytes is written before it is measured (RowBinaryEncoder's `string`). */
const DIRECT_TEXT_BYTES = 64 * 1024;

/** The bytes of `value`'s unsigned LEB128 varint. */
function varintBytes(value: number): number {
  let bytes = 1;
  for (let rest = value; rest >= 0x80; rest = Math.floor(rest / 0x80)) bytes++;
  return bytes;
}

/**
 * Encodes rows of one schema. The encoder writes a row into one scratch buffer, grown
 * as a row needs, then copies it to the end of its current block (ROW_BLOCK_BYTES, a
 * new one when the row does not fit) and returns it as a view of the block: rows
 * encoded one after the other lie one after the other in memory, so an insert of them
 * all sends the block as it is instead of copying the rows again (the ingester's
 * `bodyPieces`). A block is never written again where a row lies, and is freed with
 * its last row.
 */
export class RowBinaryEncoder<Row extends object> {
  private readonly columns: readonly (readonly [string, ColumnType])[];
  private buffer = Buffer.allocUnsafe(64 * 1024);
  private position = 0;
  private block = Buffer.allocUnsafeSlow(0);
  private blockUsed = 0;

  constructor(schema: RowSchema<Row>) {
    this.columns = Object.entries(schema) as [string, ColumnType][];
  }

  /** The column list for the INSERT: `(a, b, c)`. */
  get columnList(): string {
    return `(${this.columns.map(([name]) => name).join(', ')})`;
  }

  /** One row's bytes; throws RowBinaryError, having written nothing, when a value does not fit its column. */
  encode(row: Row): Buffer {
    this.position = 0;
    const values = row as Record<string, unknown>;
    for (const [name, type] of this.columns) this.write(name, type, values[name]);
    return this.keep(this.position);
  }

  /** The scratch buffer's first `length` bytes, copied to the end of the current block (or a buffer of their own). */
  private keep(length: number): Buffer {
    if (length > OWN_BUFFER_BYTES) return Buffer.from(this.buffer.subarray(0, length));
    if (this.blockUsed + length > this.block.length) {
      this.block = Buffer.allocUnsafeSlow(ROW_BLOCK_BYTES);
      this.blockUsed = 0;
    }
    const start = this.blockUsed;
    this.buffer.copy(this.block, start, 0, length);
    this.blockUsed += length;
    return this.block.subarray(start, this.blockUsed);
  }

  private write(name: string, type: ColumnType, value: unknown): void {
    switch (type) {
      case 'String':
        return this.string(name, value);
      case 'Nullable(String)':
        if (this.isNull(value)) return;
        return this.string(name, value);
      case 'UInt8':
        return this.unsigned(name, value, 1, 0xff);
      case 'UInt32':
        return this.unsigned(name, value, 4, 0xffff_ffff);
      case 'UInt64':
        return this.uint64(name, value);
      case 'Nullable(UInt64)':
        if (this.isNull(value)) return;
        return this.uint64(name, value);
      case 'Float64':
        return this.float64(name, value);
      case 'Nullable(Float64)':
        if (this.isNull(typeof value === 'number' && !Number.isFinite(value) ? null : value)) return;
        return this.float64(name, value);
      case 'Date':
        return this.unsigned(name, daysOf(name, value), 2, 0xffff);
      case 'DateTime':
        return this.unsigned(name, secondsOf(name, value), 4, 0xffff_ffff);
      case 'Array(String)': {
        if (!Array.isArray(value)) throw new RowBinaryError(name, `expected an array of strings, got ${typeof value}`);
        this.varint(value.length);
        for (const element of value) this.string(name, element);
        return;
      }
    }
  }

  /** Writes the null marker: true (and the 1 written) when the value is null or undefined. */
  private isNull(value: unknown): boolean {
    this.ensure(1);
    const isNull = value === null || value === undefined;
    this.buffer[this.position++] = isNull ? 1 : 0;
    return isNull;
  }

  private string(name: string, value: unknown): void {
    if (typeof value !== 'string') throw new RowBinaryError(name, `expected a string, got ${value === null ? 'null' : typeof value}`);
    // A string of up to 42 units fits a one-byte length, written after the text (no
    // separate pass to measure it). Its own branch: the general one below costs short
    // strings (most of a row's) about 7 ns more each (bench/analysis.md).
    if (value.length <= 42) {
      this.ensure(1 + value.length * MAX_UTF8_BYTES_PER_CODE_UNIT);
      const written = this.buffer.write(value, this.position + 1, 'utf8');
      this.buffer[this.position] = written;
      this.position += 1 + written;
      return;
    }
    // A longer one is written first and measured after, as above: its length's varint
    // gets room for the most the text can take, and the text moves back when its
    // length fits fewer bytes (a copy of a few kilobytes, where Buffer.byteLength walks
    // the whole text once more: 1 µs for 2 KB of ASCII, 4 beyond Latin-1). Past
    // DIRECT_TEXT_BYTES it is measured first, so a long text reserves what it needs only.
    const most = value.length * MAX_UTF8_BYTES_PER_CODE_UNIT;
    if (most <= DIRECT_TEXT_BYTES) {
      const room = varintBytes(most);
      this.ensure(room + most);
      const start = this.position + room;
      const written = this.buffer.write(value, start, 'utf8');
      this.varintInRoom(written); // within the room ensured above: the buffer, and the text in it, stay
      if (this.position < start) this.buffer.copyWithin(this.position, start, start + written);
      this.position += written;
      return;
    }
    const length = Buffer.byteLength(value, 'utf8');
    this.ensure(length + 10);
    this.varint(length);
    this.position += this.buffer.write(value, this.position, length, 'utf8');
  }

  private varint(value: number): void {
    this.ensure(10);
    this.varintInRoom(value);
  }

  /** A varint written where room for it is already ensured (growing the buffer would lose what lies past the position). */
  private varintInRoom(value: number): void {
    let rest = value;
    while (rest >= 0x80) {
      this.buffer[this.position++] = (rest % 0x80) | 0x80;
      rest = Math.floor(rest / 0x80);
    }
    this.buffer[this.position++] = rest;
  }

  private unsigned(name: string, value: unknown, bytes: 1 | 2 | 4, max: number): void {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > max) {
      throw new RowBinaryError(name, `expected an integer from 0 to ${max}, got ${String(value)}`);
    }
    this.ensure(bytes);
    this.position = this.buffer.writeUIntLE(value, this.position, bytes);
  }

  private uint64(name: string, value: unknown): void {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value >= TWO_TO_64) {
      throw new RowBinaryError(name, `expected an integer from 0 to 2^64-1, got ${String(value)}`);
    }
    this.ensure(8);
    // Exact for every integer a double holds: the remainder and the quotient by 2^32 are.
    this.buffer.writeUInt32LE(value % TWO_TO_32, this.position);
    this.buffer.writeUInt32LE(Math.floor(value / TWO_TO_32), this.position + 4);
    this.position += 8;
  }

  private float64(name: string, value: unknown): void {
    if (typeof value !== 'number') throw new RowBinaryError(name, `expected a number, got ${value === null ? 'null' : typeof value}`);
    this.ensure(8);
    this.position = this.buffer.writeDoubleLE(value, this.position);
  }

  private ensure(bytes: number): void {
    if (this.position + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.position + bytes));
    this.buffer.copy(grown, 0, 0, this.position);
    this.buffer = grown;
  }
}

/** 'YYYY-MM-DD hh:mm:ss' (UTC, as formatDateTime writes it) or epoch milliseconds, to epoch seconds. */
function secondsOf(name: string, value: unknown): number {
  const ms = typeof value === 'number' ? value : typeof value === 'string' ? utcMs(value, 19) : NaN;
  if (!Number.isFinite(ms)) throw new RowBinaryError(name, `expected 'YYYY-MM-DD hh:mm:ss', got ${String(value)}`);
  return Math.floor(ms / 1000);
}

/** 'YYYY-MM-DD' (UTC) to days since 1970-01-01. */
function daysOf(name: string, value: unknown): number {
  const ms = typeof value === 'string' ? utcMs(value, 10) : NaN;
  if (!Number.isFinite(ms)) throw new RowBinaryError(name, `expected 'YYYY-MM-DD', got ${String(value)}`);
  return Math.floor(ms / MS_PER_DAY);
}

/** The UTC instant of a date (`length` 10) or date-time (19) text; NaN when it is not one. */
function utcMs(text: string, length: 10 | 19): number {
  if (text.length !== length || text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45) return NaN; // '-'
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return NaN;
  let seconds = 0;
  if (length === 19) {
    if (text.charCodeAt(10) !== 32 || text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58) return NaN; // ' ', ':'
    const hour = digits(text, 11, 2);
    const minute = digits(text, 14, 2);
    const second = digits(text, 17, 2);
    if (hour > 23 || minute > 59 || second > 59) return NaN;
    seconds = hour * 3600 + minute * 60 + second;
  }
  return (daysFromCivil(year, month, day) * 86_400 + seconds) * 1000;
}

/** The number written in `count` ASCII digits from `start`; NaN when one is not a digit. */
function digits(text: string, start: number, count: number): number {
  let value = 0;
  for (let index = start; index < start + count; index++) {
    const digit = text.charCodeAt(index) - 48;
    if (digit < 0 || digit > 9) return NaN;
    value = value * 10 + digit;
  }
  return value;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}
