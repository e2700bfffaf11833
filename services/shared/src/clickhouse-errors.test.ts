import { describe, expect, it } from 'vitest';
import { parseError } from '@clickhouse/client';
import { clickhouseErrorCode, clickhouseErrorMessage, isDataError } from './clickhouse-errors.js';

// Error texts as the two server generations write them: the 18.16 ones captured from
// the local stack's server, the current one in the layout current servers write (the
// layout @clickhouse/client's parser is built for). 18.16's stay plain Errors after
// the client's parsing (no `(TYPE)` suffix), current ones become ClickHouseError with
// `code` set.
const v18Surrogate =
  'Code: 25, e.displayText() = DB::Exception: Cannot parse escape sequence: missing second part of surrogate pair: (while read the value of key s), e.what() = DB::Exception\n';
const v18Unsigned =
  "Code: 72, e.displayText() = DB::Exception: Unsigned type must not contain '-' symbol: (while read the value of key n): (at row 1)\n, e.what() = DB::Exception\n";
const v18NoTable = "Code: 60, e.displayText() = DB::Exception: Table default.t_probe doesn't exist., e.what() = DB::Exception\n";
const current =
  "Code: 27. DB::Exception: Cannot parse input: expected '\"' before: 'x}': (while reading the value of key s): (at row 1)\n: While executing ParallelParsingBlockInputFormat. (CANNOT_PARSE_INPUT_ASSERTION_FAILED) (version 24.8.4.13 (official build))\n";

describe('ClickHouse error classification', () => {
  it('reads the code from 18.16 text, which the client leaves unparsed', () => {
    expect((parseError(v18Surrogate) as { code?: string }).code).toBeUndefined();
    expect(clickhouseErrorCode(new Error(v18Surrogate))).toBe(25);
    expect(clickhouseErrorCode(new Error(v18Unsigned))).toBe(72);
    expect(isDataError(new Error(v18Surrogate))).toBe(true);
    expect(isDataError(new Error(v18Unsigned))).toBe(true);
    expect(isDataError(new Error(v18NoTable))).toBe(false); // 60 UNKNOWN_TABLE: retried
    expect(clickhouseErrorMessage(new Error(v18Surrogate))).toBe(
      'DB::Exception: Cannot parse escape sequence: missing second part of surrogate pair: (while read the value of key s)',
    );
  });

  it('reads current ClickHouse errors the way the client parses them, and from the text', () => {
    // The client's own parser (run on every failed response body), on a current server's text.
    const parsed = parseError(current);
    expect((parsed as { code?: string }).code).toBe('27');
    expect(clickhouseErrorCode(parsed)).toBe(27);
    expect(isDataError(parsed)).toBe(true);
    expect(clickhouseErrorCode(new Error(current))).toBe(27);
  });

  it('leaves transport failures and other errors to the retry loop', () => {
    expect(clickhouseErrorCode(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:18123'), { code: 'ECONNREFUSED' }))).toBe(undefined);
    expect(isDataError(new Error('Timeout error.'))).toBe(false);
    expect(isDataError(new Error('Code: 241. DB::Exception: Memory limit exceeded. (MEMORY_LIMIT_EXCEEDED)'))).toBe(false);
    expect(isDataError(undefined)).toBe(false);
  });
});
