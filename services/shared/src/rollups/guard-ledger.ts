// The erasure fence's second home (fence.ts keeps it in Redis): the same tombstones,
// fenced intervals and insert leases, kept in ClickHouse's `rollup_guards` (migration
// 0013), so an ingester that cannot reach Redis goes on loading (docs/ingester.md,
// "When Redis is down") without loading an erased user's records or counting a record
// twice in rollup rows being rebuilt.
//
// Every job writes its tombstone or fence to both places, then waits for the leases of
// both. An ingester that loads without Redis takes its lease here, then reads the
// tombstones and the fence here, loads, and ends its lease: each side writes before it
// reads, so whichever comes second sees what the first wrote (one server answers a
// select with every insert it acknowledged before). Rows are versions: the newest of
// an id says whether a lease ended or a fence was lifted (read with argMax, never
// FINAL: a condition ClickHouse moves before the merge of versions would keep a lifted
// fence). A subject is kept as a SHA-256 of environment and user id, never the id.
import { createHash, randomUUID } from 'node:crypto';
import type { ClickHouseClient } from '../clickhouse.js';
import { sqlString } from '../clickhouse-values.js';
import { markDays, readDayWatermarkMs } from './day-levels.js';
import { FENCE_MS, LEASE_MS, subjectKey, type FenceInterval, type FenceLedger, type InsertCheck, type Subject } from './fence.js';

export const GUARDS_TABLE = 'rollup_guards';

/** Subjects per tombstone query: 1,000 digests are about 70 KB of SQL. */
const TOMBSTONES_PER_QUERY = 1000;

type GuardKind = 'tombstone' | 'fence' | 'lease';

interface GuardRow {
  kind: GuardKind;
  id: string;
  erased_at_ms: number;
  fence_kind: string;
  from_ms: number;
  to_ms: number;
  expires_ms: number;
  ended: 0 | 1;
  version: number;
}

/** The id of a subject's tombstone: a digest, so the table holds no user id. */
export const subjectDigest = (subject: Subject) => createHash('sha256').update(subjectKey(subject)).digest('hex');

const fenceId = (interval: FenceInterval) => `${interval.kind}:${interval.fromMs}:${interval.toMs}:${interval.owner ?? ''}`;

const row = (kind: GuardKind, id: string, fields: Partial<GuardRow>): GuardRow => ({
  kind,
  id,
  erased_at_ms: 0,
  fence_kind: '',
  from_ms: 0,
  to_ms: 0,
  expires_ms: 0,
  ended: 0,
  // Versions order the rows of one id; the wall clock in µs, so an end written after a begin is newer.
  version: Math.round((performance.timeOrigin + performance.now()) * 1000),
  ...fields,
});

export class GuardLedger implements FenceLedger {
  constructor(
    private readonly clickhouse: ClickHouseClient,
    /** How long a lease holds at most (a crashed ingester's ends then). */
    private readonly leaseMs = LEASE_MS,
  ) {}

  private async write(rows: readonly GuardRow[]): Promise<void> {
    if (rows.length > 0) await this.clickhouse.insert({ table: GUARDS_TABLE, values: rows as GuardRow[], format: 'JSONEachRow' });
  }

  private async read<T>(query: string): Promise<T[]> {
    const result = await this.clickhouse.query({ query, format: 'JSONEachRow' });
    return result.json<T>();
  }

  /** Before an insert attempt: a lease, then the unit's tombstones and the fence (as RollupFence.beginInsert). */
  async beginInsert(subjects: readonly Subject[]): Promise<InsertCheck> {
    const lease = randomUUID();
    await this.write([row('lease', lease, { expires_ms: Date.now() + this.leaseMs })]);
    const bySubject = new Map(subjects.map((subject) => [subjectDigest(subject), subject]));
    const [tombstones, fenced, dayWatermarkMs] = await Promise.all([
      this.tombstones([...bySubject.keys()]),
      this.fenced(),
      readDayWatermarkMs(this.clickhouse),
    ]);
    const erasedAt = new Map<string, number>();
    for (const { id, erasedAtMs } of tombstones) {
      const subject = bySubject.get(id);
      if (subject) erasedAt.set(subjectKey(subject), erasedAtMs);
    }
    return { lease, dayWatermarkMs, erasedAt, fenced };
  }

  /** Marks days handed to the day rollups' job (day-levels.ts): they live in ClickHouse only. */
  async markDays(instantsMs: Iterable<number>): Promise<void> {
    await markDays(this.clickhouse, instantsMs);
  }

  async endInsert(lease: string): Promise<void> {
    // An end row outlives its lease's begin row (retention deletes by expiry).
    await this.write([row('lease', lease, { ended: 1, expires_ms: Date.now() + this.leaseMs })]);
  }

  async erase(subject: Subject, atMs: number, tombstoneSeconds: number): Promise<void> {
    await this.write([row('tombstone', subjectDigest(subject), { erased_at_ms: atMs, expires_ms: atMs + tombstoneSeconds * 1000 })]);
  }

  async copyTombstones(tombstones: readonly { subject: Subject; atMs: number; expiresMs: number }[]): Promise<number> {
    const byId = new Map(tombstones.map((tombstone) => [subjectDigest(tombstone.subject), tombstone]));
    const held = new Set((await this.tombstones([...byId.keys()])).map((tombstone) => tombstone.id));
    const missing = [...byId].filter(([id]) => !held.has(id));
    await this.write(missing.map(([id, { atMs, expiresMs }]) => row('tombstone', id, { erased_at_ms: atMs, expires_ms: expiresMs })));
    return missing.length;
  }

  /** Intervals as RollupFence.fence() holds them (with their owner), for 15 minutes at most. */
  async fence(held: readonly FenceInterval[]): Promise<void> {
    const expires = Date.now() + FENCE_MS;
    await this.write(
      held.map((interval) =>
        row('fence', fenceId(interval), { fence_kind: interval.kind, from_ms: interval.fromMs, to_ms: interval.toMs, expires_ms: expires }),
      ),
    );
  }

  async liftFence(held: readonly FenceInterval[]): Promise<void> {
    const expires = Date.now() + FENCE_MS;
    await this.write(held.map((interval) => row('fence', fenceId(interval), { ended: 1, expires_ms: expires })));
  }

  /** The leases open now (not ended, not expired). */
  async openLeases(): Promise<string[]> {
    const rows = await this.read<{ id: string }>(
      `SELECT id FROM ${GUARDS_TABLE} WHERE kind = 'lease'
       GROUP BY id HAVING argMax(ended, version) = 0 AND max(expires_ms) > ${Date.now()}`,
    );
    return rows.map((lease) => lease.id);
  }

  /** Waits until every lease open now has ended or expired. */
  async waitForInsertsInFlight(pollMs = 50): Promise<void> {
    let open = new Set(await this.openLeases());
    while (open.size > 0) {
      await new Promise((resolve) => setTimeout(resolve, pollMs));
      const still = new Set(await this.openLeases());
      open = new Set([...open].filter((lease) => still.has(lease)));
    }
  }

  /** The live tombstones of `ids`, asked a thousand at a time (a query stays far below ClickHouse's 256 KiB limit). */
  private async tombstones(ids: readonly string[]): Promise<{ id: string; erasedAtMs: number }[]> {
    const chunks: string[][] = [];
    for (let start = 0; start < ids.length; start += TOMBSTONES_PER_QUERY) chunks.push(ids.slice(start, start + TOMBSTONES_PER_QUERY));
    const now = Date.now();
    const found = await Promise.all(
      chunks.map((chunk) =>
        this.read<{ id: string; erased_at_ms: string | number }>(
          `SELECT id, max(erased_at_ms) AS erased_at_ms FROM ${GUARDS_TABLE}
           WHERE kind = 'tombstone' AND id IN (${chunk.map(sqlString).join(',')})
           GROUP BY id HAVING max(expires_ms) > ${now}`,
        ),
      ),
    );
    return found.flat().map((tombstone) => ({ id: tombstone.id, erasedAtMs: Number(tombstone.erased_at_ms) }));
  }

  private async fenced(): Promise<FenceInterval[]> {
    const rows = await this.read<{ fence_kind: string; from_ms: string | number; to_ms: string | number; id: string }>(
      `SELECT id, argMax(fence_kind, version) AS fence_kind, argMax(from_ms, version) AS from_ms, argMax(to_ms, version) AS to_ms
       FROM ${GUARDS_TABLE} WHERE kind = 'fence'
       GROUP BY id HAVING argMax(ended, version) = 0 AND max(expires_ms) > ${Date.now()}`,
    );
    // A lifted fence's newest row has no kind or interval; an open one's has both.
    return rows
      .filter((fence) => fence.fence_kind === 'errors' || fence.fence_kind === 'all')
      .map((fence) => ({ kind: fence.fence_kind as FenceInterval['kind'], fromMs: Number(fence.from_ms), toMs: Number(fence.to_ms) }));
  }
}
