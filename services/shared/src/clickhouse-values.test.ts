import { describe, expect, it } from 'vitest';
import { formatDateTime, sqlString } from './clickhouse-values.js';

describe('sqlString', () => {
  it.each([
    ['plain', "'plain'"],
    ["it's", "'it\\'s'"],
    ['back\\slash', "'back\\\\slash'"],
    ["\\'", "'\\\\\\''"],
    ['', "''"],
  ])('%j becomes %s', (value, literal) => {
    expect(sqlString(value)).toBe(literal);
  });
});

describe('formatDateTime', () => {
  it('writes UTC seconds, dropping milliseconds, the same on a second call', () => {
    const at = Date.UTC(2026, 10, 23, 18, 5, 9, 999);
    expect(formatDateTime(at)).toBe('2026-11-23 18:05:09');
    expect(formatDateTime(at - 999)).toBe('2026-11-23 18:05:09');
    expect(formatDateTime(0)).toBe('1970-01-01 00:00:00');
  });
});
