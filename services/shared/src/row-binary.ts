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

/**
 * Encodes rows of one schema. The encoder writes into one scratch buffer, grown as a
 * row needs, and returns each row as its own Buffer (a copy of the bytes written).
 */
export class RowBinaryEncoder<Row extends object> {
  private readonly columns: readonly (readonly [string, ColumnType])[];
  private buffer = Buffer.allocUnsafe(64 * 1024);
  private position = 0;

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
    return Buffer.from(this.buffer.subarray(0, this.position));
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
    const length = Buffer.byteLength(value, 'utf8');
    this.ensure(length + 10);
    this.varint(length);
    this.position += this.buffer.write(value, this.position, length, 'utf8');
  }

  private varint(value: number): void {
    this.ensure(10);
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

const DATE_TIME_TEXT = /^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2})?$/;

/** The UTC instant of a date (`length` 10) or date-time (19) text; NaN when it is not one. */
function utcMs(text: string, length: 10 | 19): number {
  const known = recentInstants.get(text);
  if (known !== undefined) return known;
  if (text.length !== length || !DATE_TIME_TEXT.test(text)) return NaN;
  const ms = Date.parse(`${text.slice(0, 10)}T${length === 19 ? text.slice(11) : '00:00:00'}Z`);
  // Written back, the instant must give the same text: 2026-02-30 or 24:00:00 are not instants.
  if (!Number.isFinite(ms) || new Date(ms).toISOString().slice(0, length).replace('T', ' ') !== text) return NaN;
  // The rows of a load unit share a few seconds and days: the last ones read are kept.
  if (recentInstants.size >= 4096) recentInstants.clear();
  recentInstants.set(text, ms);
  return ms;
}

const recentInstants = new Map<string, number>();
