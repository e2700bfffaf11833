// Values as ClickHouse reads them, in one place for every service: string literals
// (18.16 has no query parameters) and DateTime text. Both must work on 18.16 and on
// current releases.

/** A ClickHouse string literal: quotes and backslashes escaped. */
export function sqlString(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/** 'YYYY-MM-DD hh:mm:ss' in UTC, the DateTime text every ClickHouse version parses. */
export function formatDateTime(epochMs: number): string {
  // The rows of a load unit share a few seconds: the last ones formatted are kept.
  const second = Math.floor(epochMs / 1000);
  const known = recentDateTimes.get(second);
  if (known !== undefined) return known;
  const text = new Date(second * 1000).toISOString().slice(0, 19).replace('T', ' ');
  if (recentDateTimes.size >= 4096) recentDateTimes.clear();
  recentDateTimes.set(second, text);
  return text;
}

const recentDateTimes = new Map<number, string>();
