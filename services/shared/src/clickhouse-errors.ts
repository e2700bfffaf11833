// What a ClickHouse failure is, read from the error itself rather than from the
// client's parsing: @clickhouse/client only fills `code` when the text ends in a
// `(TYPE)` suffix, which ClickHouse 18.16 never writes. Both versions put `Code: NNN`
// at the start of the text, so the code is read from there when `code` is missing.
// A data error means "this data can never load": the batch is split to find the rows
// at fault; anything else (a refused connection, a timeout, a 5xx without a data code)
// is retried with backoff and loses nothing.

/**
 * ClickHouse error codes that mean the rows are wrong (src/Common/ErrorCodes.cpp):
 * parse failures of text, numbers, dates, escapes and arrays, binary rows cut short,
 * type mismatches, values out of range, unknown fields, NULL into a plain column.
 */
export const DATA_ERROR_CODES: ReadonlyMap<number, string> = new Map([
  [6, 'CANNOT_PARSE_TEXT'],
  [25, 'CANNOT_PARSE_ESCAPE_SEQUENCE'],
  [26, 'CANNOT_PARSE_QUOTED_STRING'],
  [27, 'CANNOT_PARSE_INPUT_ASSERTION_FAILED'],
  [32, 'ATTEMPT_TO_READ_AFTER_EOF'],
  [33, 'CANNOT_READ_ALL_DATA'],
  [38, 'CANNOT_PARSE_DATE'],
  [41, 'CANNOT_PARSE_DATETIME'],
  [53, 'TYPE_MISMATCH'],
  [69, 'ARGUMENT_OUT_OF_BOUND'],
  [70, 'CANNOT_CONVERT_TYPE'],
  [72, 'CANNOT_PARSE_NUMBER'],
  [117, 'INCORRECT_DATA'],
  [130, 'CANNOT_READ_ARRAY_FROM_TEXT'],
  [131, 'TOO_LARGE_STRING_SIZE'],
  [135, 'ZERO_ARRAY_OR_TUPLE_INDEX'],
  [321, 'VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE'],
  [349, 'CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN'],
  [407, 'DECIMAL_OVERFLOW'],
  [691, 'UNKNOWN_ELEMENT_OF_ENUM'],
]);

/** `Code: 25, e.displayText() = …` (18.16) and `Code: 27. DB::Exception: …` (current). */
const CODE_IN_TEXT = /^\s*Code:\s*(\d+)[.,]/;

/** ClickHouse's UNKNOWN_TABLE: a table whose migration has not run yet. */
export const UNKNOWN_TABLE = 60;

/** The ClickHouse error code of a failure, or undefined when it did not come from ClickHouse. */
export function clickhouseErrorCode(error: unknown): number | undefined {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && /^\d+$/.test(code)) return Number(code);
  if (typeof code === 'number' && Number.isInteger(code)) return code;
  const match = typeof message === 'string' ? CODE_IN_TEXT.exec(message) : null;
  return match ? Number(match[1]) : undefined;
}

/** True when ClickHouse refused the data itself: retrying the same rows cannot help. */
export function isDataError(error: unknown): boolean {
  const code = clickhouseErrorCode(error);
  return code !== undefined && DATA_ERROR_CODES.has(code);
}

/** The message of a ClickHouse error, without 18.16's `e.displayText() =` wrapping, bounded. */
export function clickhouseErrorMessage(error: unknown): string {
  const text = String((error as { message?: unknown })?.message ?? error);
  return text
    .replace(/^\s*Code:\s*\d+[.,]\s*(e\.displayText\(\) = )?/, '')
    .replace(/,\s*e\.what\(\) = DB::Exception\s*$/, '')
    .trim()
    .slice(0, 500);
}
