// The bench's keys in the local Redis: every section's services write theirs under a
// prefix starting `bench-` and holding the run's id (`runId`: the run's start in base 36,
// then 4 hex digits), the dedupe marks among them, kept for 600 s each. Left there, they
// pile up across sections and runs (millions at the end-to-end ladder's rates), and Redis,
// which logs every write to its append-only file, rewrites that file as it grows: a child
// process whose CPU the report counts in "the rest". The run deletes each section's keys
// when the section ends, and at its start those of runs made more than two hours before.
import type { Redis as RedisNode } from 'ioredis';
import { EARLIEST_MADE_MS, madeLongAgo } from '../lib/stale-databases.js';

/** The run id a bench key's prefix holds, and when that run started; undefined for any other key. */
export function benchRunOf(key: string): { runId: string; startedMs: number } | undefined {
  const match = /^bench-(?:[^:]*?-)?([0-9a-z]{8})([0-9a-f]{4})[:-]/.exec(key);
  if (!match) return undefined;
  const startedMs = Number.parseInt(match[1]!, 36);
  // A plausible start (as test databases' names are judged): any other key is not the bench's.
  if (!(startedMs > EARLIEST_MADE_MS)) return undefined;
  return { runId: `${match[1]}${match[2]}`, startedMs };
}

/** Whether `key` belongs to a run other than `runId` that started more than `maxAgeMs` before `nowMs` (as test databases are judged). */
export function leftOverByEarlierRun(key: string, runId: string, nowMs: number, maxAgeMs: number): boolean {
  const run = benchRunOf(key);
  return run !== undefined && run.runId !== runId && madeLongAgo(run.runId.slice(0, 8), nowMs, maxAgeMs);
}

/** Deletes the bench's keys that `select` picks (a scan of every `bench-` key); returns how many. */
export async function deleteBenchKeys(redis: RedisNode, select: (key: string) => boolean): Promise<number> {
  let deleted = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', 'bench-*', 'COUNT', 5000);
    cursor = next;
    const picked = keys.filter(select);
    if (picked.length > 0) deleted += await redis.unlink(...picked);
  } while (cursor !== '0');
  return deleted;
}
