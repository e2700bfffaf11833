import { describe, expect, it } from 'vitest';
import { weekEndS, weekStartS, weeksWithin } from './weeks.js';

const s = (iso: string) => Date.parse(iso) / 1000;
const iso = (seconds: number) => new Date(seconds * 1000).toISOString().slice(0, 10);

describe('the weeks of the per-user rollup', () => {
  it('cut each month at its 8th, 15th and 22nd days, the last week running to its end', () => {
    expect(iso(weekStartS(s('2026-02-01T00:00:00Z')))).toBe('2026-02-01');
    expect(iso(weekStartS(s('2026-02-07T23:59:59Z')))).toBe('2026-02-01');
    expect(iso(weekStartS(s('2026-02-08T00:00:00Z')))).toBe('2026-02-08');
    expect(iso(weekStartS(s('2026-02-21T12:00:00Z')))).toBe('2026-02-15');
    expect(iso(weekStartS(s('2026-02-28T12:00:00Z')))).toBe('2026-02-22');
    expect(iso(weekStartS(s('2026-12-31T23:59:59Z')))).toBe('2026-12-22');
    expect(iso(weekEndS(s('2026-02-22T00:00:00Z')))).toBe('2026-03-01');
    expect(iso(weekEndS(s('2024-02-22T00:00:00Z')))).toBe('2024-03-01');
    expect(iso(weekEndS(s('2026-12-22T00:00:00Z')))).toBe('2027-01-01');
    expect(iso(weekEndS(s('2026-12-15T00:00:00Z')))).toBe('2026-12-22');
  });

  it('follow one another without a gap, every day in exactly one, none across two months', () => {
    let week = weekStartS(s('2023-12-01T00:00:00Z'));
    for (let day = s('2023-12-01T00:00:00Z'); day < s('2025-03-01T00:00:00Z'); day += 86_400) {
      if (day >= weekEndS(week)) week = weekEndS(week);
      expect(weekStartS(day)).toBe(week);
      expect(new Date(week * 1000).getUTCMonth()).toBe(new Date((weekEndS(week) - 1) * 1000).getUTCMonth());
      const length = (weekEndS(week) - week) / 86_400;
      expect(length >= 7 && length <= 10).toBe(true);
    }
  });

  it('lie wholly within a range: a 30-day range holds three or four', () => {
    expect(weeksWithin(s('2026-11-07T00:00:00Z'), s('2026-12-07T00:00:00Z')).map(iso)).toEqual(['2026-11-08', '2026-11-15', '2026-11-22']);
    expect(weeksWithin(s('2026-11-08T00:00:00Z'), s('2026-12-08T00:00:00Z')).map(iso)).toEqual([
      '2026-11-08',
      '2026-11-15',
      '2026-11-22',
      '2026-12-01',
    ]);
    expect(weeksWithin(s('2026-11-08T00:00:00Z'), s('2026-11-15T00:00:00Z')).map(iso)).toEqual(['2026-11-08']);
    expect(weeksWithin(s('2026-11-08T00:00:01Z'), s('2026-11-22T00:00:00Z')).map(iso)).toEqual(['2026-11-15']);
    expect(weeksWithin(s('2026-11-09T00:00:00Z'), s('2026-11-14T00:00:00Z'))).toEqual([]);
  });
});
