// The project's SQL on a current ClickHouse as well as on 18.16: chDB (ClickHouse 26.x in
// process, test/helpers/chdb.ts) runs the same code as the 18.16 server of the test
// stack, on the same records: the migrations (through migrate()), the load step, every
// rollup view, each analytics API shape, the rollup recount after an insert whose views
// did not all run, re-costing, retention, the backfill, a user's erasure and the
// freshness canary's row and look-up. The answers must be equal (latency
// percentiles of small groups aside: the two releases' t-digests differ there).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import { createClickHouse } from '@otm/shared/clickhouse';
import { RollupFence } from '@otm/shared/rollups/fence';
import { GuardLedger } from '@otm/shared/rollups/guard-ledger';
import { migrate } from '@otm/shared/migrate';
import { createRedis } from '@otm/shared/redis';
import { recountRollups, rollupTotals } from '@otm/shared/rollups/repair';
import { backfillRollups } from '@otm/shared/rollups/backfill';
import { AuditLog } from '@otm/shared/audit';
import { createLogger } from '@otm/shared/logger';
import { ErasureJobs } from '@otm/shared/rollups/erasure';
import { JOB_BUILT_DAY_ROLLUPS, USAGE_ROLLUP_TABLES, aggregateViews } from '@otm/shared/rollups/views';
import { markDays } from '@otm/shared/rollups/day-levels';
import type { UsageRecord } from '@otm/schemas';
import {
  errorAnalytics,
  latencyAnalytics,
  parseAnalyticsQuery,
  usageAnalytics,
  type AnalyticsStore,
  type RawQuery,
} from '../services/admin/src/analytics.js';
import { enrich } from '../services/ingester/src/enrich-step.js';
import { encodeRow } from '../services/ingester/src/encode-step.js';
import type { EncodedRow } from '../services/ingester/src/rows.js';
import { existingEventKeys, storedSince } from '../services/ingester/src/key-lookup.js';
import { insertLines, loadIsolatingBadRows } from '../services/ingester/src/load-step.js';
import { probeArrived, probeRow } from '../services/ingester/src/canary.js';
import { PriceTable } from '../services/ingester/src/prices.js';
import { recost } from '@otm/shared/rollups/recost';
import { applyRetention } from '@otm/shared/rollups/retention';
import { queuedRecords, sampleUsageRecords, seededRandom } from './fixtures/sample-records.js';
import { ChdbSession } from './helpers/chdb.js';
import { testNames, testStack } from './helpers/stack.js';
import { buildEveryDay } from './helpers/day-levels.js';

const n = testNames('current_ch');
const stack = testStack();
const settings = { url: stack.CLICKHOUSE_URL, username: 'default', password: '' };
const old = {
  server: createClickHouse({ ...settings, database: '' }, { database: null }),
  db: createClickHouse({ ...settings, database: n.database }),
};
let chdb: ChdbSession | undefined;
let current: { server: ClickHouseClient; db: ClickHouseClient };
const redis = createRedis(stack.REDIS_URL, { name: 'current-clickhouse-test' });
const HOUR_MS = 3_600_000;
const now = Math.floor(Date.now() / HOUR_MS) * HOUR_MS + 30 * 60_000;

beforeAll(async () => {
  chdb = await ChdbSession.start();
  if (chdb) current = { server: chdb.client(null), db: chdb.client(n.database) };
  await redis.connect();
}, 300_000);
const later = `${n.database}_b`;
afterAll(async () => {
  await old.server.command({ query: `DROP DATABASE IF EXISTS ${n.database}` }).catch(() => undefined);
  await old.server.command({ query: `DROP DATABASE IF EXISTS ${later}` }).catch(() => undefined);
  await Promise.all([old.server.close(), old.db.close(), redis.quit(), chdb?.stop()]);
});

/** 900 records over the 3 days before `now`, some of them errors (without timing: at their receipt, a minute before `now`), 40 users; their event keys start with `prefix`. */
function rows(prefix = 'cc'): EncodedRow[] {
  const random = seededRandom(7);
  const sample = sampleUsageRecords(900, { seed: 7, users: 40, errorShare: 0.08 });
  sample.forEach((record: UsageRecord, index) => {
    const at = now - 3 * 24 * HOUR_MS + Math.floor((index / sample.length) * 3 * 24 * HOUR_MS) + Math.floor(random() * 60_000);
    if (record.timing) {
      const shift = at - Date.parse(record.timing.startTime);
      for (const field of ['startTime', 'firstTokenTime', 'lastTokenTime'] as const) {
        const value = record.timing[field];
        if (value) record.timing[field] = new Date(Date.parse(value) + shift).toISOString();
      }
    }
  });
  const prices = PriceTable.load();
  return queuedRecords(sample, { eventKey: (index) => `${prefix}-${index}`, receivedAtMs: now - 60_000 }).map((record) =>
    encodeRow(enrich(record, prices, now)),
  );
}

/** Each rollup's groups with the records they count, in one canonical order. */
async function rollupGroups(client: ClickHouseClient): Promise<Record<string, string[]>> {
  // The day rollups as their job builds them (migration 0014): its SQL on both releases too.
  await buildEveryDay(client);
  const found: Record<string, string[]> = {};
  for (const view of aggregateViews()) {
    const columns = view.groups.map((group) => `toString(${group.name})`).join(", '|', ");
    const result = await client.query({
      query: `SELECT concat(${columns}) AS g, toUInt64(${view.count.merge}(${view.count.column})) AS n FROM ${view.table} GROUP BY ${view.groups.map((group) => group.name).join(', ')} ORDER BY g`,
      format: 'JSONEachRow',
      clickhouse_settings: { output_format_json_quote_64bit_integers: 0 },
    });
    found[view.table] = (await result.json<{ g: string; n: number }>()).map((row) => `${row.g}: ${row.n}`);
  }
  return found;
}

const store = (clickhouse: ClickHouseClient): AnalyticsStore => ({
  clickhouse,
  limits: { timeoutMs: 30_000, maxRowsToRead: 0 },
  backfilled: async () => new Set(['0008', '0009', '0010'] as const),
});

/** The API shapes the dashboard and the documentation use. */
const shapes: { kind: 'usage' | 'latency' | 'errors'; raw: RawQuery }[] = [
  ...(['24h', '72h'] as const).flatMap((since) => [
    { kind: 'usage' as const, raw: { since, bucket: 'hour' as const, groupBy: 'provider,model' } },
    { kind: 'usage' as const, raw: { since, bucket: 'none' as const, groupBy: 'environment' } },
    { kind: 'usage' as const, raw: { since, bucket: 'day' as const, groupBy: 'keyId' } },
    { kind: 'usage' as const, raw: { since, bucket: 'none' as const, groupBy: 'userId,userType', orderBy: 'costUsd' as const, limit: 10 } },
    {
      kind: 'usage' as const,
      raw: { since, bucket: 'none' as const, groupBy: 'userId,userType', orderBy: 'totalTokens' as const, limit: 20 },
    },
    { kind: 'usage' as const, raw: { since, bucket: 'hour' as const, groupBy: 'model', userId: 'user-3' } },
    { kind: 'latency' as const, raw: { since, bucket: 'hour' as const, groupBy: 'provider,model' } },
    { kind: 'latency' as const, raw: { since, bucket: 'none' as const, groupBy: 'environment,model' } },
    { kind: 'errors' as const, raw: { since, bucket: 'none' as const, groupBy: 'errorCode' } },
    { kind: 'errors' as const, raw: { since, bucket: 'hour' as const, groupBy: 'provider,model' } },
  ]),
  { kind: 'usage', raw: { since: '90m', bucket: 'minute', groupBy: 'model' } },
];
const runners = { usage: usageAnalytics, latency: latencyAnalytics, errors: errorAnalytics };
const dimensionsOf = {
  usage: ['environment', 'provider', 'model', 'userType', 'userId', 'keyId'],
  latency: ['environment', 'provider', 'model', 'userType', 'userId', 'keyId'],
  errors: ['environment', 'provider', 'model', 'errorCode', 'errorMessage'],
};

/** Records a latency percentile needs for the two releases to agree within 5 %. */
const PERCENTILE_MIN_REQUESTS = 30;

/**
 * Equal: sums of floats to 1e-9 of their size; latency percentiles within 5 % for groups
 * of at least PERCENTILE_MIN_REQUESTS records. Below that the releases' t-digests answer
 * differently (a median of two values: the mean of both on 18.16, one of them on 26.x);
 * those differences are returned apart, to be shown, not failed on.
 */
function compareAnswers(kind: string, older: Record<string, unknown>[], newer: Record<string, unknown>[]) {
  const differences: string[] = [];
  const smallGroups: string[] = [];
  if (older.length !== newer.length)
    return { differences: [`${kind}: ${older.length} rows on 18.16, ${newer.length} on the current release`], smallGroups };
  older.forEach((row, index) => {
    const other = newer[index]!;
    for (const [key, value] of Object.entries(row)) {
      const that = other[key];
      const percentile = /P\d+Ms$|PerSec$/.test(key);
      if (typeof value === 'number' && typeof that === 'number') {
        const tolerance = percentile ? 0.05 : 1e-9;
        if (Math.abs(value - that) <= tolerance * Math.max(1, Math.abs(value))) continue;
        const text = `${kind} row ${index} (${String(row.requests)} requests) ${key}: ${value} vs ${that}`;
        if (percentile && Number(row.requests) < PERCENTILE_MIN_REQUESTS) smallGroups.push(text);
        else differences.push(text);
      } else if (JSON.stringify(value) !== JSON.stringify(that)) {
        differences.push(`${kind} row ${index} ${key}: ${JSON.stringify(value)} vs ${JSON.stringify(that)}`);
      }
    }
  });
  return { differences, smallGroups };
}

describe('the same SQL on ClickHouse 18.16 and on a current release (chDB)', () => {
  it('migrates, loads and counts the same records the same way in every rollup', async (context) => {
    if (!chdb) return context.skip('no python3 on the PATH: chDB cannot run');
    expect(await migrate(old.server, old.db, n.database)).toEqual(await migrate(current.server, current.db, n.database));
    const version = await current.server.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' });
    expect((await version.json<{ v: string }>())[0]!.v).toMatch(/^2[6-9]\./);

    const records = rows();
    for (const client of [old.db, current.db]) {
      const result = await loadIsolatingBadRows(client, records, (row) => row);
      expect(result.refused).toEqual([]);
      expect(result.loaded).toHaveLength(records.length);
    }
    // The look-up before an insert finds what is stored the same way (its keys sent as one literal split by ClickHouse).
    const keys = [...records.slice(0, 50).map((row) => row.eventKey), 'never-stored', "o'brien"];
    for (const client of [old.db, current.db]) {
      expect(await existingEventKeys(client, 'usage_events', keys, storedSince([Date.now()], 86_400))).toEqual(new Set(keys.slice(0, 50)));
    }
    const older = await rollupGroups(old.db);
    expect(Object.values(older).every((groups) => groups.length > 0)).toBe(true);
    expect(await rollupGroups(current.db)).toEqual(older);

    // The freshness canary: its row as the consumer writes it, its look-up as the canary asks.
    const [probe] = queuedRecords(sampleUsageRecords(1, { seed: 9 }), { eventKey: () => 'probe-cc', receivedAtMs: now });
    probe!.meta.idempotencyKey = 'probe-cc-1';
    for (const client of [old.db, current.db]) {
      await insertLines(client, 'canary_probes', [probeRow(probe!)]);
      expect(await probeArrived(client, 'probe-cc-1')).toBe(true);
      expect(await probeArrived(client, 'probe-cc-2')).toBe(false);
    }
  }, 300_000);

  it('answers every analytics API shape the same', async (context) => {
    if (!chdb) return context.skip('no python3 on the PATH: chDB cannot run');
    const differences: string[] = [];
    const smallGroups: string[] = [];
    let percentilesCompared = 0;
    for (const { kind, raw } of shapes) {
      const query = parseAnalyticsQuery(raw, dimensionsOf[kind], now);
      const older = await runners[kind](store(old.db), query);
      const newer = await runners[kind](store(current.db), query);
      expect(older.length, `${kind} ${JSON.stringify(raw)}`).toBeGreaterThan(0);
      const compared = compareAnswers(`${kind} ${JSON.stringify(raw)}`, older, newer);
      differences.push(...compared.differences);
      smallGroups.push(...compared.smallGroups);
      if (kind === 'latency') percentilesCompared += older.filter((row) => Number(row.requests) >= PERCENTILE_MIN_REQUESTS).length;
      if (kind === 'latency') {
        // These shapes are answered from the histograms (whole hours): the same buckets on
        // both releases, so the same percentiles in every group, however small.
        const percentiles = (rows: Record<string, unknown>[]) =>
          rows.map((row) => Object.entries(row).filter(([key]) => /P\d+Ms$/.test(key)));
        expect(percentiles(newer), `${kind} ${JSON.stringify(raw)}`).toEqual(percentiles(older));
      }
    }
    console.log(
      `latency percentiles of groups under ${PERCENTILE_MIN_REQUESTS} records that differ between the releases: ${smallGroups.length} (e.g. ${smallGroups.slice(0, 3).join('; ')})`,
    );
    // Groups large enough were compared, and every other figure of every answer.
    expect(percentilesCompared).toBeGreaterThan(10);
    expect(differences).toEqual([]);
  }, 300_000);

  it('recounts the rollups of an insert whose views did not all run, the same way', async (context) => {
    if (!chdb) return context.skip('no python3 on the PATH: chDB cannot run');
    // The same records again under new keys: a second insert, into the same groups.
    const records = rows('cc-again');
    const jobBuilt = new Set<string>(JOB_BUILT_DAY_ROLLUPS.map(({ view }) => view));
    const missed = [
      ...aggregateViews()
        .filter(({ view }) => !jobBuilt.has(view))
        .filter((_, index) => index % 3 === 0)
        .map((view) => view.view),
      'usage_events_by_user_mv',
    ];
    const outcomes = [];
    for (const client of [old.db, current.db]) {
      // As the ingester does: the days built already are marked before the insert.
      await markDays(
        client,
        records.map((row) => row.eventMs),
      );
      for (const view of missed) await client.command({ query: `DETACH TABLE ${view}` });
      try {
        await loadIsolatingBadRows(client, records, (row) => row);
      } finally {
        for (const view of missed) await client.command({ query: `ATTACH TABLE ${view}` });
      }
      outcomes.push(
        await recountRollups(
          client,
          new RollupFence(redis, `${n.keyPrefix}${outcomes.length}:`, null),
          records.map((row) => row.eventKey),
        ),
      );
    }
    expect(outcomes[1]).toEqual(outcomes[0]);
    expect(outcomes[0]!.copied).toBe(records.length);
    expect(outcomes[0]!.tables.filter((table) => table.appended > 0).length).toBe(missed.length - 1);
    expect(await rollupGroups(current.db)).toEqual(await rollupGroups(old.db));
  }, 300_000);

  it('re-costs a range and applies retention the same way', async (context) => {
    if (!chdb) return context.skip('no python3 on the PATH: chDB cannot run');
    const pairs = await (
      await old.db.query({
        query: 'SELECT DISTINCT provider, model_id FROM usage_events ORDER BY provider, model_id',
        format: 'JSONEachRow',
      })
    ).json<{ provider: string; model_id: string }>();
    const prices: Record<string, Record<string, { input: number; output: number }>> = {};
    pairs.forEach(({ provider, model_id }, index) => {
      prices[provider] = { ...prices[provider], [model_id]: { input: 1 + index, output: 3 + index } };
    });
    const table = new PriceTable('test-current-clickhouse', prices);
    const range = { fromMs: now - 30 * HOUR_MS, toMs: now - 6 * HOUR_MS };
    /** Cost in usage_events and in every usage rollup, to a millionth of a dollar. */
    const costs = async (client: ClickHouseClient) => {
      await buildEveryDay(client);
      const found: Record<string, string> = {};
      for (const name of ['usage_events', ...USAGE_ROLLUP_TABLES]) {
        const sum =
          name === 'usage_events'
            ? 'sum(ifNull(cost_usd, 0))'
            : name === 'usage_rollup_user_by_day'
              ? 'sum(cost_usd)'
              : 'sumMerge(cost_usd)';
        const result = await client.query({ query: `SELECT toString(round(${sum}, 6)) AS c FROM ${name}`, format: 'JSONEachRow' });
        found[name] = (await result.json<{ c: string }>())[0]!.c;
      }
      return found;
    };
    const outcomes = [];
    for (const [index, client] of [old.db, current.db].entries()) {
      outcomes.push(await recost(client, new RollupFence(redis, `${n.keyPrefix}recost${index}:`, new GuardLedger(client)), table, range));
    }
    expect(outcomes[1]).toEqual(outcomes[0]);
    expect(outcomes[0]!.rows).toBeGreaterThan(100);
    const costed = await costs(old.db);
    expect(new Set(Object.values(costed)).size, JSON.stringify(costed)).toBe(1);
    expect(await costs(current.db)).toEqual(costed);
    expect(await rollupGroups(current.db)).toEqual(await rollupGroups(old.db));

    // Retention a year and a half from now: every monthly partition has expired, on both.
    const policy = { eventsDays: 30, ioDays: 7, rollupsDays: 90, canaryDays: 7, eventKeysDays: 10 };
    const later = now + 540 * 24 * HOUR_MS;
    const dryRuns = [await applyRetention(old.db, policy, later, true), await applyRetention(current.db, policy, later, true)];
    expect(dryRuns[0]!.dropped.length).toBeGreaterThan(0);
    expect(dryRuns[1]).toEqual(dryRuns[0]);
    const runs = [await applyRetention(old.db, policy, later, false), await applyRetention(current.db, policy, later, false)];
    expect(runs[1]).toEqual(runs[0]);
    for (const client of [old.db, current.db]) {
      const result = await client.query({ query: 'SELECT count() AS n FROM usage_events', format: 'JSONEachRow' });
      expect(Number((await result.json<{ n: string }>())[0]!.n)).toBe(0);
    }
  }, 300_000);
});

describe("the erasure fence's copy in ClickHouse on 18.16 and on a current release (chDB)", () => {
  it('reads tombstones, fenced intervals and open leases the same way, and retention forgets what expired', async (context) => {
    if (!chdb) return context.skip('no python3 on the PATH: chDB cannot run');
    const answers = [];
    for (const client of [old.db, current.db]) {
      await client.command({ query: 'TRUNCATE TABLE IF EXISTS rollup_guards' });
      const ledger = new GuardLedger(client, 60_000);
      const erased = { environment: 'prod', userId: "o'brien" };
      await ledger.erase(erased, now - 1000, 3600);
      const held = [{ kind: 'errors' as const, fromMs: now - HOUR_MS, toMs: now, owner: 'job-1' }];
      await ledger.fence(held);
      // 5,000 subjects: their digests alone are past ClickHouse's 256 KiB query limit, so they are asked in parts.
      const others = Array.from({ length: 5000 }, (_, index) => ({ environment: 'prod', userId: `user-${index}` }));
      const check = await ledger.beginInsert([...others.slice(0, 4000), erased, ...others.slice(4000)]);
      const open = await ledger.openLeases();
      await ledger.endInsert(check.lease);
      const afterEnd = await ledger.openLeases();
      await ledger.waitForInsertsInFlight();
      await ledger.liftFence(held);
      const lifted = await ledger.beginInsert([erased]);
      await ledger.endInsert(lifted.lease);
      const tables = (await client.query({ query: 'SELECT count() AS n FROM rollup_guards', format: 'JSONEachRow' })).json<{ n: string }>();
      const before = Number((await tables)[0]!.n);
      // A day later the leases and the lifted fence have expired; the tombstone (an hour) too.
      await applyRetention(client, { eventsDays: 0, ioDays: 0, rollupsDays: 0, canaryDays: 0, eventKeysDays: 0 }, now + 86_400_000);
      const remaining = await (
        await client.query({ query: 'SELECT count() AS n FROM rollup_guards', format: 'JSONEachRow' })
      ).json<{ n: string }>();
      answers.push({
        erasedAt: [...check.erasedAt.entries()],
        fenced: check.fenced,
        leaseOpen: open.includes(check.lease),
        afterEnd: afterEnd.includes(check.lease),
        fencedAfterLift: lifted.fenced,
        erasedAfterLift: [...lifted.erasedAt.values()],
        rows: before,
        remaining: Number(remaining[0]!.n),
      });
    }
    expect(answers[0]).toEqual({
      erasedAt: [["prod\u0000o'brien", now - 1000]],
      fenced: [{ kind: 'errors', fromMs: now - HOUR_MS, toMs: now }],
      leaseOpen: true,
      afterEnd: false,
      fencedAfterLift: [],
      erasedAfterLift: [now - 1000],
      rows: 7,
      remaining: 0,
    });
    expect(answers[1]).toEqual(answers[0]);
  }, 120_000);
});

describe('the rollup jobs on ClickHouse 18.16 and on a current release (chDB)', () => {
  it('backfills the rollups of records stored before migration 0008, then erases a user, the same way', async (context) => {
    if (!chdb) return context.skip('no python3 on the PATH: chDB cannot run');
    const clients = [createClickHouse({ ...settings, database: later }), chdb.client(later)];
    const servers = [old.server, current.server];
    try {
      // Records stored by an installation of migrations up to 0007, then 0008 and its backfill.
      for (const [index, client] of clients.entries()) {
        await migrate(servers[index]!, client, later, () => undefined, '', '0007_token_detail.sql');
        expect(
          (await loadIsolatingBadRows(client, rows('cb'), (row) => row, undefined, { windowS: 86_400, keyTable: false })).refused,
        ).toEqual([]);
        await migrate(servers[index]!, client, later);
        const outcome = await backfillRollups(client, new RollupFence(redis, `${n.keyPrefix}backfill${index}:`, null));
        expect(outcome.done).toBe(true);
      }
      const backfilled = await rollupGroups(clients[0]!);
      expect(await rollupGroups(clients[1]!)).toEqual(backfilled);
      for (const client of clients) {
        for (const total of await rollupTotals(client)) expect(total.counted, total.table).toBe(total.stored);
      }

      // One user's erasure, as the admin service runs it.
      const [subject] = await (
        await clients[0]!.query({
          query:
            'SELECT environment, user_id, count() AS n FROM usage_events GROUP BY environment, user_id ORDER BY n DESC, user_id LIMIT 1',
          format: 'JSONEachRow',
        })
      ).json<{ environment: 'prod'; user_id: string; n: string }>();
      const removed = [];
      for (const [index, client] of clients.entries()) {
        const jobs = new ErasureJobs(
          redis,
          `${n.keyPrefix}erasure${index}:`,
          client,
          new RollupFence(redis, `${n.keyPrefix}erasure${index}:`, null),
          new AuditLog(client),
          createLogger('current-clickhouse-test', 'silent'),
          { tombstoneSeconds: 3600, mutationTimeoutMs: 120_000 },
          { announce: async () => undefined },
        );
        const started = await jobs.start(subject!.environment, subject!.user_id, 'test', 'req-erase');
        let job = await jobs.get(started.id);
        for (const deadline = Date.now() + 120_000; job?.state === 'running' && Date.now() < deadline; job = await jobs.get(started.id)) {
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
        expect(job?.state, job?.error).toBe('done');
        removed.push(job!.removed);
      }
      expect(removed[0]!.events).toBe(Number(subject!.n));
      expect(removed[1]).toEqual(removed[0]);
      const erased = await rollupGroups(clients[0]!);
      expect(erased).not.toEqual(backfilled);
      expect(await rollupGroups(clients[1]!)).toEqual(erased);
      for (const client of clients) {
        for (const total of await rollupTotals(client)) expect(total.counted, total.table).toBe(total.stored);
      }
    } finally {
      await clients[0]!.close();
    }
  }, 600_000);
});
