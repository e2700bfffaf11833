import { describe, expect, it } from 'vitest';
import { DEFAULT_RECORD_BOUNDS, checkPlausible, checkRecordBounds, exceedsJsonDepth, isSafeIdentifier, parseTimestamp } from './bounds.js';

describe('parseTimestamp', () => {
  it.each([
    ['2026-11-22T10:00:00Z', Date.UTC(2026, 10, 22, 10)],
    ['2026-11-22T10:00:00.123456789Z', Date.UTC(2026, 10, 22, 10, 0, 0, 123)],
    ['2026-11-22t10:00:00.5z', Date.UTC(2026, 10, 22, 10, 0, 0, 500)],
    ['2026-11-22T10:00:00+01:00', Date.UTC(2026, 10, 22, 9)],
    ['2026-11-22T10:00:00-05:30', Date.UTC(2026, 10, 22, 15, 30)],
    ['2024-02-29T00:00:00Z', Date.UTC(2024, 1, 29)],
    ['1969-12-31T23:59:59Z', -1000],
  ])('reads %s', (text, expected) => {
    expect(parseTimestamp(text)).toBe(expected);
  });

  it('reads years below 100 as themselves (Date.UTC would make 0050 into 1950)', () => {
    expect(new Date(parseTimestamp('0050-01-01T00:00:00Z')!).toISOString()).toBe('0050-01-01T00:00:00.000Z');
  });

  it('agrees with Date on instants spread over years 0000 to 9999, in every zone offset form', () => {
    let seed = 7;
    const next = (n: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) % n;
    const earliest = Date.UTC(0, 0, 1) - 1900 * 365.2425 * 86_400_000; // about 0000-01-01
    const latest = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
    for (let i = 0; i < 5000; i++) {
      const at = Math.floor(earliest + ((latest - earliest) * next(1_000_000)) / 1_000_000) + next(1000);
      const iso = new Date(at).toISOString();
      if (iso.startsWith('-') || iso.startsWith('+')) continue;
      expect(parseTimestamp(iso)).toBe(at);
      const offset = next(24 * 60) * (next(2) === 0 ? 1 : -1);
      const local = new Date(at + offset * 60_000).toISOString().slice(0, 23);
      if (local.startsWith('-') || local.startsWith('+')) continue;
      const zone = `${offset < 0 ? '-' : '+'}${String(Math.floor(Math.abs(offset) / 60)).padStart(2, '0')}:${String(Math.abs(offset) % 60).padStart(2, '0')}`;
      expect(parseTimestamp(`${local}${zone}`)).toBe(at);
    }
  });

  it.each([
    '2026-06-30T23:59:60Z', // leap second: RFC 3339 allows it, no store here holds it
    '2026-11-22T10:00:00+01', // offset without minutes
    '2026-11-22T10:00:00+0100',
    '2026-11-22T10:00:00', // no zone
    '2026-02-30T10:00:00Z',
    '2025-02-29T10:00:00Z',
    '2026-11-22T24:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-11-22T10:00:00+24:00',
    '2026-11-22',
    ' 2026-11-22T10:00:00Z',
    '',
    '2026-11-22T10:00:00.Z', // a dot without digits
    '2026-11-22T10:00:00.1234567890Z', // more than nine fraction digits
    '2026-11-22T10:00:00Zx',
    '2026-11-22T10:00:00+01:00x',
    '2026-11-22T10:00:00+01:0x',
    '2026/11/22T10:00:00Z',
    '2026-11-22T10-00-00Z',
    '２０２６-11-22T10:00:00Z', // full-width digits
    '2026-11-22T1a:00:00Z',
    '+2026-11-22T10:00:00Z',
  ])('refuses %s', (text) => {
    expect(parseTimestamp(text)).toBeNull();
  });
});

describe('exceedsJsonDepth', () => {
  it('counts objects and arrays, not brackets inside strings', () => {
    expect(exceedsJsonDepth('{"a":[{"b":1}]}', 3)).toBe(false);
    expect(exceedsJsonDepth('{"a":[{"b":[]}]}', 3)).toBe(true);
    expect(exceedsJsonDepth('{"a":"[[[[[[[[\\"[[[["}', 1)).toBe(false);
    expect(exceedsJsonDepth('['.repeat(33) + ']'.repeat(33), 32)).toBe(true);
    expect(exceedsJsonDepth('['.repeat(32) + ']'.repeat(32), 32)).toBe(false);
    // Escaped quotes and backslash runs before a quote: only an even run ends the string.
    expect(exceedsJsonDepth(String.raw`["a\\",[[]]]`, 2)).toBe(true); // two backslashes: the quote ends the string
    expect(exceedsJsonDepth(String.raw`["a\\\"[[[",[]]`, 2)).toBe(false); // three: the quote is escaped
    expect(exceedsJsonDepth(String.raw`["\\\\",[[]]]`, 2)).toBe(true); // four
  });

  it('reads a megabyte of brackets in one pass', () => {
    const hostile = '['.repeat(1 << 20);
    const started = performance.now();
    expect(exceedsJsonDepth(hostile, 32)).toBe(true);
    const plain = JSON.stringify({ prompt: 'x'.repeat(1 << 20) });
    expect(exceedsJsonDepth(plain, 32)).toBe(false);
    console.log(`depth scan: hostile and 1 MiB plain body in ${(performance.now() - started).toFixed(2)} ms`);
  });
});

const record = (overrides: Record<string, unknown> = {}) => ({
  request: { modelId: 'gpt-4o', provider: 'openai', status: 'success' },
  user: { id: 'u1', type: 'external' },
  tokens: { input: 1, output: 1 },
  timing: { startTime: '2026-11-22T10:00:00Z', firstTokenTime: '2026-11-22T10:00:01Z', lastTokenTime: '2026-11-22T10:00:02Z' },
  io: { prompt: 'hi', response: 'ho' },
  ...overrides,
});
const now = Date.parse('2026-11-22T12:00:00Z');
const check = (value: Record<string, unknown>) => checkRecordBounds(value, DEFAULT_RECORD_BOUNDS, now);

describe('checkRecordBounds', () => {
  it('accepts an ordinary record, and any well-formed text in prompts', () => {
    expect(check(record())).toEqual([]);
    expect(check(record({ io: { prompt: 'line\nnext\ttab \u202E and 🦜', response: '' } }))).toEqual([]);
  });

  it('refuses timestamps outside the window, naming the field', () => {
    const timing = { startTime: '1999-12-31T23:59:59Z', firstTokenTime: '2026-11-22T10:00:01Z', lastTokenTime: '2026-11-23T12:00:01Z' };
    expect(check(record({ timing }))).toEqual([
      { path: '/timing/startTime', message: 'must not be before 2000-01-01T00:00:00.000Z' },
      { path: '/timing/lastTokenTime', message: "must not be more than 24 h after the server's clock" },
    ]);
    // Out of order inside the window is accepted (and flagged at enrichment).
    const backwards = { startTime: '2026-11-22T10:00:05Z', firstTokenTime: '2026-11-22T10:00:01Z', lastTokenTime: '2026-11-22T10:00:00Z' };
    expect(check(record({ timing: backwards }))).toEqual([]);
  });

  it('refuses lone surrogates anywhere, control and bidi characters in identifiers and context keys', () => {
    expect(check(record({ user: { id: 'u\ud800', type: 'external' } }))).toEqual([
      { path: '/user/id', message: 'must be well-formed Unicode (no lone surrogates)' },
    ]);
    expect(check(record({ context: { deep: [{ note: 'x\udc00' }] } }))).toEqual([
      { path: '/context/deep/0/note', message: 'must be well-formed Unicode (no lone surrogates)' },
    ]);
    expect(check(record({ request: { modelId: 'gpt\u202E4o', provider: 'open\u0000ai', status: 'success' } }))).toEqual([
      { path: '/request/modelId', message: 'must not contain control characters or bidirectional overrides' },
      { path: '/request/provider', message: 'must not contain control characters or bidirectional overrides' },
    ]);
    expect(check(record({ context: { nested: { 'a\u2066b': 1 } } }))).toEqual([
      { path: '/context/nested/a\u2066b', message: 'key must not contain control characters or bidirectional overrides' },
    ]);
    // Control characters in context values are data, not names.
    expect(check(record({ context: { note: 'tab\there' } }))).toEqual([]);
  });

  it('refuses token detail larger than its whole: cache reads and writes are part of input, reasoning of output', () => {
    expect(check(record({ tokens: { input: 100, output: 10, cachedInput: 60, cacheWrite: 40, reasoning: 10 } }))).toEqual([]);
    expect(check(record({ tokens: { input: 100, output: 10, cachedInput: 60, cacheWrite: 41, reasoning: 11 } }))).toEqual([
      { path: '/tokens/input', message: 'must include cachedInput and cacheWrite (their sum must not exceed input)' },
      { path: '/tokens/output', message: 'must include reasoning (reasoning must not exceed output)' },
    ]);
  });

  it('bounds arrays inside context', () => {
    expect(check(record({ context: { list: Array.from({ length: 256 }, (_, i) => i) } }))).toEqual([]);
    expect(check(record({ context: { list: Array.from({ length: 257 }, (_, i) => i) } }))).toEqual([
      { path: '/context/list', message: 'must have at most 256 items' },
    ]);
  });
});

describe('isSafeIdentifier', () => {
  it('refuses control characters, bidi overrides and isolates, lone surrogates', () => {
    expect(isSafeIdentifier('checkout-service ✓')).toBe(true);
    for (const bad of ['a\u0007', 'a\u0085', 'a\u202Eb', 'a\u2069', 'a\ud800', 'a\n']) expect(isSafeIdentifier(bad)).toBe(false);
  });
});

describe('checkPlausible', () => {
  const bounds = { maxTokens: 100, maxCallMs: 3_600_000 };
  const start = '2026-11-22T10:00:00.000Z';
  const after = (ms: number) => new Date(Date.parse(start) + ms).toISOString();

  it('accepts every value at its bound, total at twice the token bound', () => {
    expect(
      checkPlausible(
        {
          tokens: { input: 100, output: 100, total: 200, cachedInput: 50, cacheWrite: 50, reasoning: 100 },
          timing: { startTime: start, firstTokenTime: after(3_600_000), lastTokenTime: after(3_600_000), latencyMs: 3_600_000 },
        },
        bounds,
      ),
    ).toEqual([]);
  });

  it('names each value one past its bound', () => {
    const errors = checkPlausible(
      {
        tokens: { input: 101, output: 101, total: 201, cachedInput: 101, cacheWrite: 101, reasoning: 101 },
        timing: { startTime: start, firstTokenTime: after(3_600_001), lastTokenTime: after(3_600_001), latencyMs: 3_600_001 },
      },
      bounds,
    );
    expect(errors).toEqual([
      { path: '/tokens/input', message: 'must be at most 100' },
      { path: '/tokens/output', message: 'must be at most 100' },
      { path: '/tokens/total', message: 'must be at most 200' },
      { path: '/tokens/cachedInput', message: 'must be at most 100' },
      { path: '/tokens/cacheWrite', message: 'must be at most 100' },
      { path: '/tokens/reasoning', message: 'must be at most 100' },
      { path: '/timing/latencyMs', message: 'must be at most 3,600,000 (1 h)' },
      { path: '/timing/firstTokenTime', message: 'must be at most 1 h after timing.startTime' },
      { path: '/timing/lastTokenTime', message: 'must be at most 1 h after timing.startTime' },
    ]);
  });

  it('is part of checkRecordBounds, with the defaults of 100,000,000 tokens and 48 h', () => {
    expect(DEFAULT_RECORD_BOUNDS).toMatchObject({ maxTokens: 100_000_000, maxCallMs: 48 * 3_600_000 });
    const record = { tokens: { input: 100_000_001, output: 1 }, timing: { startTime: start, latencyMs: 48 * 3_600_000 + 1 } };
    expect(checkRecordBounds(record, DEFAULT_RECORD_BOUNDS, Date.parse(start)).map((error) => error.path)).toEqual([
      '/tokens/input',
      '/timing/latencyMs',
    ]);
  });
});
