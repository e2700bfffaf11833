// The ClickHouse databases the integration tests leave behind (most test files do not
// drop theirs; an interrupted run leaves the others too), named by uniqueName (test/helpers/stack.ts):
// a prefix, the time of their making in base 36 and 8 hex digits. ClickHouse 18.16 loads
// every table's metadata before it answers at start, so thousands of leftover tables slow
// every start of the local stack, and a server holding them spends CPU on them whatever is
// inserted (each table's merge selection), which the benchmark counts as ClickHouse's.
// The integration setup drops, on the local stack only, those made more than a day ago (a
// run still going is younger than that); the benchmark those made more than two hours ago.

import { createClient } from '@clickhouse/client';

const TEST_DATABASE = /^[a-z][a-z0-9_]*_([0-9a-z]{6,10})_[0-9a-f]{8}$/;

/** A day: no integration run lasts that long. */
export const STALE_AFTER_MS = 86_400_000;

/** No name of ours was made before this (2020): an earlier time read from a name says the name is not ours. */
export const EARLIEST_MADE_MS = Date.UTC(2020, 0, 1);

/**
 * Whether a name's time of making in base 36 (`made`) is plausible (after 2020, not after
 * `nowMs`: any other name is not ours) and more than `maxAgeMs` before `nowMs`.
 */
export function madeLongAgo(made: string, nowMs: number, maxAgeMs: number): boolean {
  const madeMs = Number.parseInt(made, 36);
  return madeMs > EARLIEST_MADE_MS && madeMs <= nowMs && nowMs - madeMs > maxAgeMs;
}

/** The names among `names` that uniqueName made more than `maxAgeMs` before `nowMs`. */
export function staleTestDatabases(names: readonly string[], nowMs: number, maxAgeMs = STALE_AFTER_MS): string[] {
  return names.filter((name) => {
    const made = TEST_DATABASE.exec(name)?.[1];
    return made !== undefined && madeLongAgo(made, nowMs, maxAgeMs);
  });
}

/** Drops the stale test databases of the ClickHouse at `url` (HTTP); returns their names. */
export async function dropStaleTestDatabases(url: string, nowMs = Date.now(), maxAgeMs = STALE_AFTER_MS): Promise<string[]> {
  const clickhouse = createClient({ url });
  try {
    const rows = await (
      await clickhouse.query({ query: 'SELECT name FROM system.databases', format: 'JSONEachRow' })
    ).json<{ name: string }>();
    const stale = staleTestDatabases(
      rows.map((row) => row.name),
      nowMs,
      maxAgeMs,
    );
    for (const name of stale) await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${name}` });
    return stale;
  } finally {
    await clickhouse.close();
  }
}
