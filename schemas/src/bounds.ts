// Bounds on what is stored (decisions.md, "Bounds on what is stored"): the checks a
// JSON Schema validator cannot make, shared by the gateway (which refuses a record
// that breaks them) and the ingester (which must never trust that they were made).
// A timestamp is read by one function everywhere, so the gateway can never accept a
// text the ingester cannot turn into an instant.

export interface FieldError {
  path: string;
  message: string;
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * Epoch milliseconds of an RFC 3339 date-time (`T`, `t` or a space between date and
 * time, seconds, an optional fraction of 1 to 9 digits, `Z`, `z` or `±hh:mm`), or null when the text does not denote
 * a real instant: a leap second (23:59:60: RFC 3339 allows it, no store here holds
 * it), 30 February, an offset written `+01` or `+0100`, hour 24. Fractions finer
 * than a millisecond are truncated.
 */
export function parseTimestamp(text: string): number | null {
  // Read by character codes, not a regular expression: several timestamps per record
  // on the gateway's and the ingester's hot paths, and no match array to allocate.
  const length = text.length;
  if (length < 20) return null;
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  const t = text.charCodeAt(10);
  if (
    year < 0 ||
    month < 0 ||
    day < 0 ||
    hour < 0 ||
    minute < 0 ||
    second < 0 ||
    text.charCodeAt(4) !== DASH ||
    text.charCodeAt(7) !== DASH ||
    (t !== UPPER_T && t !== LOWER_T && t !== SPACE) ||
    text.charCodeAt(13) !== COLON ||
    text.charCodeAt(16) !== COLON
  ) {
    return null;
  }
  let at = 19;
  let millis = 0;
  if (text.charCodeAt(at) === DOT) {
    let count = 0;
    at++;
    while (at < length && isDigit(text.charCodeAt(at))) {
      if (count < 3) millis = millis * 10 + (text.charCodeAt(at) - ZERO);
      count++;
      at++;
    }
    if (count === 0 || count > 9) return null;
    for (let pad = count; pad < 3; pad++) millis *= 10;
  }
  let offsetMinutes = 0;
  const zone = text.charCodeAt(at);
  if (zone === UPPER_Z || zone === LOWER_Z) {
    if (at + 1 !== length) return null;
  } else if (zone === PLUS || zone === DASH) {
    if (at + 6 !== length || text.charCodeAt(at + 3) !== COLON) return null;
    const offsetHours = digits(text, at + 1, 2);
    const offsetMins = digits(text, at + 4, 2);
    if (offsetHours < 0 || offsetMins < 0 || offsetHours > 23 || offsetMins > 59) return null;
    offsetMinutes = (zone === DASH ? -1 : 1) * (offsetHours * 60 + offsetMins);
  } else {
    return null;
  }
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (day > (month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!)) return null;
  const seconds = daysFromCivil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offsetMinutes * 60;
  return seconds * 1000 + millis;
}

const ZERO = 0x30;
/** `-`: the date's separator and the sign of a negative offset. */
const DASH = 0x2d;
const COLON = 0x3a;
const DOT = 0x2e;
const SPACE = 0x20;
const PLUS = 0x2b;
const UPPER_T = 0x54;
const LOWER_T = 0x74;
const UPPER_Z = 0x5a;
const LOWER_Z = 0x7a;

function isDigit(code: number): boolean {
  return code >= ZERO && code <= ZERO + 9;
}

/** The decimal number of `count` ASCII digits at `from`, or -1 when one is not a digit. */
function digits(text: string, from: number, count: number): number {
  let value = 0;
  for (let i = from; i < from + count; i++) {
    const code = text.charCodeAt(i);
    if (!isDigit(code)) return -1;
    value = value * 10 + (code - ZERO);
  }
  return value;
}

/**
 * Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
 * days_from_civil): plain arithmetic, no Date object per timestamp (the ingester and
 * the gateway read several per record).
 */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

/** C0 and C1 controls and the bidirectional overrides and isolates. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNSAFE_IN_IDENTIFIER = /[\u0000-\u001F\u007F-\u009F\u202A-\u202E\u2066-\u2069]/;

/** True when a text may name something: no control characters, no bidi overrides, well-formed. */
export function isSafeIdentifier(text: string): boolean {
  return text.isWellFormed() && !UNSAFE_IN_IDENTIFIER.test(text);
}

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether a JSON text nests objects and arrays deeper than `maxDepth`, read before
 * it is parsed: a megabyte of `[[[[` costs one pass over the text, not a parse.
 * Brackets inside strings do not count. Malformed text is left to the parser.
 */
export function exceedsJsonDepth(text: string, maxDepth: number): boolean {
  let depth = 0;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code === QUOTE) {
      // Most of a record's text is inside strings (prompts, responses): jump to the
      // closing quote, one not preceded by an odd run of backslashes.
      for (;;) {
        const quote = text.indexOf('"', index + 1);
        if (quote === -1) return false; // unterminated: the parser refuses it
        let backslashes = 0;
        while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++;
        index = quote;
        if (backslashes % 2 === 0) break;
      }
    } else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      if (++depth > maxDepth) return true;
    } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

/**
 * What one real call can plausibly report (docs/limits.md, "Plausible values"): the
 * gateway refuses a record beyond them, the ingester stores a direct producer's record
 * beyond them with the value nulled and named in its anomalies. One bad value in a sum
 * is unrecoverable for its reader.
 */
export interface PlausibleBounds {
  /** Each token count (input, output and their detail; `total` at most twice it: input and output at their most). */
  maxTokens: number;
  /** `timing.latencyMs`, and the span from `startTime` to the first and to the last token, ms. */
  maxCallMs: number;
  /** Derived output tokens per second (the ingester's; a record is never refused for it). */
  maxOutputTokensPerSec: number;
}

export const DEFAULT_PLAUSIBLE_BOUNDS: PlausibleBounds = {
  maxTokens: 100_000_000,
  maxCallMs: 48 * 3_600_000,
  maxOutputTokensPerSec: 100_000,
};

export interface RecordBounds extends Omit<PlausibleBounds, 'maxOutputTokensPerSec'> {
  /** Earliest timestamp accepted, epoch ms. */
  earliestMs: number;
  /** How far after `now` a timestamp may lie, ms. */
  maxFutureMs: number;
  /** Items in one array inside `context`. */
  maxContextArrayItems: number;
}

export const DEFAULT_RECORD_BOUNDS: RecordBounds = {
  earliestMs: Date.parse('2000-01-01T00:00:00Z'),
  maxFutureMs: 24 * 3600 * 1000,
  maxContextArrayItems: 256,
  maxTokens: DEFAULT_PLAUSIBLE_BOUNDS.maxTokens,
  maxCallMs: DEFAULT_PLAUSIBLE_BOUNDS.maxCallMs,
};

/** The token fields, in the order they are checked. */
export const TOKEN_FIELDS = ['input', 'output', 'total', 'cachedInput', 'cacheWrite', 'reasoning'] as const;

/** The bound of one token field: `total` may hold input and output at their most. */
export function tokenBound(field: (typeof TOKEN_FIELDS)[number], maxTokens: number): number {
  return field === 'total' ? 2 * maxTokens : maxTokens;
}

/** `N` as people read it in a message: 100,000,000; 48 h. */
const grouped = (value: number) => value.toLocaleString('en-US');
const hours = (ms: number) => (ms % 3_600_000 === 0 ? `${ms / 3_600_000} h` : `${grouped(ms)} ms`);

/**
 * Token counts and call durations beyond what one call can be: each named by its path.
 * Expects a schema-valid record (numbers where the schema says so).
 */
export function checkPlausible(
  record: { tokens?: Partial<Record<(typeof TOKEN_FIELDS)[number], number>>; timing?: Record<string, unknown> },
  bounds: Pick<PlausibleBounds, 'maxTokens' | 'maxCallMs'>,
  fromStart = true,
): FieldError[] {
  const errors: FieldError[] = [];
  const tokens = record.tokens;
  if (tokens) {
    for (const field of TOKEN_FIELDS) {
      const value = tokens[field];
      const max = tokenBound(field, bounds.maxTokens);
      if (typeof value === 'number' && value > max) errors.push({ path: `/tokens/${field}`, message: `must be at most ${grouped(max)}` });
    }
  }
  const timing = record.timing;
  if (timing) {
    const latency = timing.latencyMs;
    if (typeof latency === 'number' && latency > bounds.maxCallMs) {
      errors.push({ path: '/timing/latencyMs', message: `must be at most ${grouped(bounds.maxCallMs)} (${hours(bounds.maxCallMs)})` });
    }
    const start = fromStart && typeof timing.startTime === 'string' ? parseTimestamp(timing.startTime) : null;
    if (start !== null) {
      for (const field of ['firstTokenTime', 'lastTokenTime'] as const) {
        const text = timing[field];
        const at = typeof text === 'string' ? parseTimestamp(text) : null;
        if (at !== null && at - start > bounds.maxCallMs) {
          errors.push({ path: `/timing/${field}`, message: `must be at most ${hours(bounds.maxCallMs)} after timing.startTime` });
        }
      }
    }
  }
  return errors;
}

const TIMING_FIELDS = ['startTime', 'firstTokenTime', 'lastTokenTime'] as const;
const IDENTIFIERS: [string, string][] = [
  ['request', 'modelId'],
  ['request', 'provider'],
  ['user', 'id'],
];

/**
 * The checks a schema-valid record must also pass before it is accepted: timestamps
 * in the window, every string well-formed Unicode, identifiers free of control and
 * bidi characters, arrays in `context` bounded. Returns every problem found (empty
 * when the record may be stored). Expects a record that passed the schema.
 */
export function checkRecordBounds(record: Record<string, unknown>, bounds: RecordBounds, now = Date.now()): FieldError[] {
  const errors: FieldError[] = [];
  const timing = record.timing as Record<string, unknown> | undefined;
  if (timing) {
    for (const field of TIMING_FIELDS) {
      const text = timing[field];
      if (typeof text !== 'string') continue;
      const at = parseTimestamp(text);
      const path = `/timing/${field}`;
      if (at === null) errors.push({ path, message: 'must be a real instant (no leap second; offset Z or ±hh:mm)' });
      else if (at < bounds.earliestMs) errors.push({ path, message: `must not be before ${new Date(bounds.earliestMs).toISOString()}` });
      else if (at > now + bounds.maxFutureMs) {
        errors.push({ path, message: `must not be more than ${bounds.maxFutureMs / 3_600_000} h after the server's clock` });
      }
    }
  }
  errors.push(...checkTokenDetail(record.tokens as TokenCounts | undefined));
  // A start already refused is not measured from again.
  const startRefused = errors.some((error) => error.path === '/timing/startTime');
  errors.push(...checkPlausible(record as Parameters<typeof checkPlausible>[0], bounds, !startRefused));
  for (const [parent, field] of IDENTIFIERS) {
    const value = (record[parent] as Record<string, unknown> | undefined)?.[field];
    if (typeof value === 'string' && value.isWellFormed() && UNSAFE_IN_IDENTIFIER.test(value)) {
      errors.push({ path: `/${parent}/${field}`, message: 'must not contain control characters or bidirectional overrides' });
    }
  }
  walkStrings(record, bounds, errors);
  return errors;
}

interface TokenCounts {
  input?: number;
  output?: number;
  cachedInput?: number;
  cacheWrite?: number;
  reasoning?: number;
}

/**
 * Token detail is part of the totals (docs/tokens.md): cache reads and writes are
 * counted inside `input`, reasoning inside `output`. A record whose parts exceed
 * their whole cannot be priced; a rule across fields, so no schema keyword says it.
 */
export function checkTokenDetail(tokens: TokenCounts | undefined): FieldError[] {
  if (!tokens || typeof tokens.input !== 'number' || typeof tokens.output !== 'number') return [];
  const errors: FieldError[] = [];
  if ((tokens.cachedInput ?? 0) + (tokens.cacheWrite ?? 0) > tokens.input) {
    errors.push({ path: '/tokens/input', message: 'must include cachedInput and cacheWrite (their sum must not exceed input)' });
  }
  if ((tokens.reasoning ?? 0) > tokens.output) {
    errors.push({ path: '/tokens/output', message: 'must include reasoning (reasoning must not exceed output)' });
  }
  return errors;
}

/**
 * Every string and key well-formed; inside context, key names safe and arrays bounded.
 * Walked once per accepted record: it allocates nothing while the record is sound (the
 * path is kept as segments and written out only for an error).
 */
function walkStrings(record: unknown, bounds: RecordBounds, errors: FieldError[]): void {
  const segments: (string | number)[] = [];
  const pointer = (last?: string) =>
    segments.map((segment) => `/${typeof segment === 'number' ? segment : escapePointer(segment)}`).join('') +
    (last === undefined ? '' : `/${escapePointer(last)}`);
  const walk = (node: unknown, inContext: boolean): void => {
    if (typeof node === 'string') {
      if (!node.isWellFormed()) errors.push({ path: pointer() || '/', message: 'must be well-formed Unicode (no lone surrogates)' });
      return;
    }
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      if (inContext && node.length > bounds.maxContextArrayItems) {
        errors.push({ path: pointer(), message: `must have at most ${bounds.maxContextArrayItems} items` });
        return;
      }
      for (let index = 0; index < node.length; index++) {
        segments.push(index);
        walk(node[index], inContext);
        segments.pop();
      }
      return;
    }
    const object = node as Record<string, unknown>;
    for (const key in object) {
      if (!Object.hasOwn(object, key)) continue;
      if (!key.isWellFormed()) errors.push({ path: pointer(key), message: 'key must be well-formed Unicode (no lone surrogates)' });
      else if (inContext && UNSAFE_IN_IDENTIFIER.test(key)) {
        errors.push({ path: pointer(key), message: 'key must not contain control characters or bidirectional overrides' });
      }
      const entersContext = segments.length === 0 && key === 'context';
      segments.push(key);
      walk(object[key], inContext || entersContext);
      segments.pop();
    }
  };
  walk(record, false);
}

function escapePointer(key: string): string {
  const segment = key.isWellFormed() ? key : key.toWellFormed();
  if (!segment.includes('~') && !segment.includes('/')) return segment;
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}
