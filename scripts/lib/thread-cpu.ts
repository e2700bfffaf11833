// A process's CPU time by what its threads do, from /proc/<pid>/task: for the benchmark's
// end-to-end steps, where a service's CPU per record alone does not say whether it went
// to the service's own code or to its collector, and ClickHouse's whether to the inserts
// or to the merges that follow them.

import fs from 'node:fs';

/** What a thread of a Node service does: its main thread; V8's helper threads (the collector's parallel and concurrent work, compilation); libuv's pool (zlib, crypto, DNS); anything else. */
export type NodeThreadKind = 'main' | 'v8' | 'pool' | 'other';
/** What a ClickHouse thread does: the background pools (merges, mutations); the rest (inserts, queries, everything else). */
export type ClickHouseThreadKind = 'merges' | 'queries';

/**
 * The kind of a thread by its name (`comm`, at most 15 characters). Node names V8's
 * workers "V8Worker" (older releases "V8 DefaultWorke") and libuv's "libuv-worker";
 * ClickHouse 18.16 names its merge pool "BackgrProcPool", current releases "MergeMutate",
 * "BgSchPool", "BgMBSchPool" and the like.
 */
export function nodeThreadKind(comm: string, isMain: boolean): NodeThreadKind {
  if (isMain) return 'main';
  if (/^V8( |Worker|DefaultWorke)/.test(comm)) return 'v8';
  if (comm.startsWith('libuv-worker')) return 'pool';
  return 'other';
}

export function clickhouseThreadKind(comm: string): ClickHouseThreadKind {
  return /^(BackgrProcPool|BackgrMoveProcP|MergeMutate|MergeTreeBackgr|Bg\w*(Pool|Exec)|Merge)/.test(comm) ? 'merges' : 'queries';
}

/**
 * CPU seconds (user and system) of `pid`'s threads, summed by `kind`. The time of threads
 * that have ended is in the process's total and in no thread's: it is added to `rest`.
 * Empty when the process is gone.
 */
export function threadCpuSeconds<Kind extends string>(
  pid: number | undefined,
  kind: (comm: string, isMain: boolean) => Kind,
  rest: Kind,
): Partial<Record<Kind, number>> {
  if (!pid) return {};
  const seconds: Partial<Record<Kind, number>> = {};
  let listed = 0;
  try {
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      let comm: string;
      let cpu: number;
      try {
        comm = fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
        cpu = statCpuSeconds(fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'));
      } catch {
        continue; // the thread ended meanwhile
      }
      const which = kind(comm, tid === String(pid));
      seconds[which] = (seconds[which] ?? 0) + cpu;
      listed += cpu;
    }
    const total = statCpuSeconds(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
    seconds[rest] = (seconds[rest] ?? 0) + Math.max(0, total - listed);
  } catch {
    return {};
  }
  return seconds;
}

/** utime + stime of a /proc stat line, in seconds (clock ticks of 100 Hz). */
export function statCpuSeconds(stat: string): number {
  // The name (field 2) may hold spaces and parentheses: the fields after it start past the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * The seconds each kind spent between two readings, per record, in µs; never below 0
 * (the ended threads' share is a difference of totals read a moment apart).
 */
export function perRecordUs<Kind extends string>(
  before: Partial<Record<Kind, number>>,
  after: Partial<Record<Kind, number>>,
  records: number,
): Partial<Record<Kind, number>> {
  const result: Partial<Record<Kind, number>> = {};
  for (const kind of Object.keys(after) as Kind[]) {
    result[kind] = Math.max(0, (((after[kind] ?? 0) - (before[kind] ?? 0)) * 1e6) / Math.max(1, records));
  }
  return result;
}
