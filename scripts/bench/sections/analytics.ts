// 9. Analytics at scale ---------------------------------------------------------
// Events generated inside ClickHouse (test/fixtures/generate-events.ts: 30 days, 100,000
// users, 50 models, 48 keys, 2 % errors), first a tenth of BENCH_ANALYTICS_EVENTS
// (default 100 million), then the rest; at each size every request each dashboard page
// makes and each documented API shape (grouped by model, provider, environment, user,
// key; one user; top users by cost; latency; errors; over 24 h, 7 d and 30 d) is asked of
// a real admin service once (its time reported as the first answer: pages not yet in
// memory), then TIMED_ANSWERS more times: p50 and p95 of those answers' times, and the
// rows and bytes ClickHouse read for it (system.query_log, found by the request's id). At the
// full size: one user's erasure, one day's re-costing, ten records removed from history,
// and each dashboard page's time
// until its charts are drawn in Chromium.
//
// The two sizes are timed side by side, not twenty minutes apart: the tenth, once merged,
// is kept in a database of its own (its parts linked, not copied) with an admin of its
// own, and each request is asked of both in turn, so that what the machine does meanwhile
// (ClickHouse's background work, the page cache, the other processes on its two cores)
// weighs on both alike and the ratio is of the queries' own cost.
//
// The events of a month arrive over a month, and ClickHouse merges each rollup's parts
// in the background meanwhile; generated in minutes, they leave many parts unmerged.
// Before the queries are timed, every rollup the queries read and the copy ordered by
// user are merged into one part per monthly partition (OPTIMIZE … FINAL, partition by
// partition, timed and reported), at both sizes alike, so that the two sizes differ in
// their rows and not in how far the merges had got; usage_events stays as generated.
//
// The generated database is what the ingesters build: a new installation, its backfill
// recorded done, so the legacy minute rollup's view is retired before the events are
// generated, as an ingester retires it (services/shared/src/rollups/backfill.ts).
import { createClient } from '@clickhouse/client';
import { chromium } from 'playwright-core';
import { migrate } from '@otm/shared/migrate';
import { RollupFence } from '@otm/shared/rollups/fence';
import { JOB_BUILT_DAY_ROLLUPS, SCALED_ROLLUPS } from '@otm/shared/rollups/views';
import { markBackfilledIfEmpty } from '@otm/shared/rollups/backfill';
import { USER_WEEKS, buildDays, markDays } from '@otm/shared/rollups/day-levels';
import { generateEvents } from '../../../test/fixtures/generate-events.js';
import { ensureChromium } from '../../stack/services.js';
import { startService } from '../../lib/service-process.js';
import { PriceTable } from '../../../services/ingester/src/prices.js';
import { recost } from '@otm/shared/rollups/recost';
import { clickhouseErrorCode } from '@otm/shared/clickhouse-errors';
import { KeyStore } from '@otm/shared/keys/key-store';
import {
  addresses,
  analyticsEvents,
  bodiesFile,
  log,
  percentile,
  profileEventSql,
  queryLogRows,
  redis,
  results,
  runId,
  runSdkLoadUntil,
  startPipeline,
  waitForMerges,
} from '../context.js';

/** ClickHouse's refusal of an OPTIMIZE with optimize_throw_if_noop (a background merge holds a part). */
const CANNOT_ASSIGN_OPTIMIZE = 388;
const DAY_MS = 86_400_000;

interface Shape {
  name: string;
  /** The request's path and query string (`since` is added). */
  path: string;
}

const RANGES = ['24h', '7d', '30d'] as const;
const bucketFor = (since: string) => ({ '24h': 'hour', '7d': 'hour', '30d': 'day' })[since] ?? 'hour';

/** The documented shapes, per range. */
function shapes(since: string): Shape[] {
  const bucket = bucketFor(since);
  const q = (route: string, params: Record<string, string>) => `/v1/analytics/${route}?${new URLSearchParams({ since, ...params })}`;
  return [
    { name: `usage by model (${since}, ${bucket})`, path: q('usage', { bucket, groupBy: 'model' }) },
    { name: `usage by provider (${since}, none)`, path: q('usage', { bucket: 'none', groupBy: 'provider' }) },
    { name: `usage by environment (${since}, ${bucket})`, path: q('usage', { bucket, groupBy: 'environment' }) },
    { name: `usage by key (${since}, none)`, path: q('usage', { bucket: 'none', groupBy: 'keyId' }) },
    { name: `usage by key (${since}, ${bucket})`, path: q('usage', { bucket, groupBy: 'keyId' }) },
    { name: `top users by cost (${since})`, path: q('usage', { bucket: 'none', groupBy: 'userId', orderBy: 'costUsd', limit: '10' }) },
    { name: `one user (${since}, ${bucket})`, path: q('usage', { bucket, userId: 'user-123' }) },
    { name: `one user by model (${since}, none)`, path: q('usage', { bucket: 'none', userId: 'user-123', groupBy: 'model' }) },
    { name: `latency by model (${since}, ${bucket})`, path: q('latency', { bucket, groupBy: 'model' }) },
    { name: `errors by code (${since}, none)`, path: q('errors', { bucket: 'none', groupBy: 'errorCode' }) },
    { name: `errors over time (${since}, ${bucket})`, path: q('errors', { bucket }) },
  ];
}

/** The requests each dashboard page makes (services/admin/dashboard/pages.ts), for `since`. */
function pageRequests(since: string): Shape[] {
  const bucket = bucketFor(since);
  const q = (route: string, params: Record<string, string>) => `/v1/analytics/${route}?${new URLSearchParams({ since, ...params })}`;
  return [
    { name: `overview: totals (${since})`, path: q('usage', { bucket: 'none' }) },
    { name: `overview: series (${since})`, path: q('usage', { bucket }) },
    { name: `overview: latency (${since})`, path: q('latency', { bucket }) },
    { name: `models: usage (${since})`, path: q('usage', { bucket: 'none', groupBy: 'provider,model', orderBy: 'totalTokens' }) },
    { name: `models: latency (${since})`, path: q('latency', { bucket: 'none', groupBy: 'provider,model' }) },
    { name: `errors: codes (${since})`, path: q('errors', { bucket: 'none', groupBy: 'errorCode', limit: '10' }) },
    { name: `errors: messages (${since})`, path: q('errors', { bucket: 'none', groupBy: 'errorCode,errorMessage', limit: '10' }) },
    {
      name: `users: top (${since})`,
      path: q('usage', { bucket: 'none', groupBy: 'userId,userType', orderBy: 'totalTokens', limit: '20' }),
    },
    { name: `users: split (${since})`, path: q('usage', { bucket: 'none', groupBy: 'userType' }) },
  ];
}

/**
 * Answers timed per request after the first. The p95 of 60 is the fourth slowest: on two
 * shared cores one pause (a collection, a background merge) in a 10 ms request is not its p95.
 */
const TIMED_ANSWERS = 60;

interface Timed {
  name: string;
  /** The first answer's time. */
  firstMs: number;
  p50Ms: number;
  p95Ms: number;
  rowsRead: number;
  bytesRead: number;
  /** ClickHouse's own time for the timed answers (query_duration_ms, the request's queries added up): p50 and p95. */
  clickhouseP50Ms: number;
  clickhouseP95Ms: number;
  /**
   * Of ClickHouse's time, p50 over the timed answers: the CPU its threads took (user and
   * system) and the time they waited, ready, for a core (`OSCPUWaitMicroseconds`).
   */
  clickhouseCpuP50Ms: number;
  clickhouseCpuWaitP50Ms: number;
  status: number;
}

export async function benchAnalytics(): Promise<void> {
  const events = analyticsEvents;
  const first = Math.round(events / 10);
  const database = `bench_analytics_${runId}`;
  log(`9. analytics at scale: ${first.toLocaleString('en-US')} then ${events.toLocaleString('en-US')} generated events in ${database}`);
  const server = createClient({ url: addresses.CLICKHOUSE_URL, request_timeout: 1_800_000 });
  const clickhouse = createClient({ url: addresses.CLICKHOUSE_URL, database, request_timeout: 1_800_000 });
  await migrate(server as never, clickhouse as never, database);
  // A new installation: nothing to backfill (every generation recorded done, the legacy minute rollup's view retired).
  await markBackfilledIfEmpty(clickhouse as never);
  const endMs = Date.now();
  const spec = { days: 30, endMs, users: 100_000, models: 50, keys: 50 };
  const adminToken = `bench-analytics-${runId}-0123456789abcdef`;
  const startAdmin = (inDatabase: string) =>
    startService(
      'admin',
      {
        ...process.env,
        ...addresses,
        CLICKHOUSE_DATABASE: inDatabase,
        REDIS_KEY_PREFIX: `bench-analytics-${runId}:${inDatabase}:`,
        ADMIN_TOKEN: adminToken,
        ADMIN_PORT: '0',
        METRICS_PORT: '0',
        LOG_LEVEL: 'info',
      },
      /admin listening/,
      90_000,
    );
  const admin = await startAdmin(database);
  // The tenth, kept as it was when timed: its parts linked into a database of its own
  // (ATTACH PARTITION … FROM: hard links, no copy), answered by an admin of its own.
  const tenth = `${database}_tenth`;
  const tenthClient = createClient({ url: addresses.CLICKHOUSE_URL, database: tenth, request_timeout: 1_800_000 });
  let tenthAdmin: Awaited<ReturnType<typeof startAdmin>> | undefined;
  const auth = { authorization: `Bearer ${adminToken}` };
  const out: Record<string, unknown> = { events, first, timedAnswers: TIMED_ANSWERS };

  /**
   * Times every request of `list` on each admin (one per size) in turn: each asked once
   * (the first answer), then TIMED_ANSWERS rounds, the two sizes alternating which goes
   * first, so that both sizes are timed under the same background work of the machine.
   */
  const measure = async (list: Shape[], admins: readonly { url: string }[]): Promise<Timed[][]> => {
    const timed: (Timed & { ids: string[] })[][] = admins.map(() => []);
    for (const shape of list) {
      const times: number[][] = admins.map(() => []);
      const ids: string[][] = admins.map(() => []);
      const status: number[] = admins.map(() => 0);
      for (let i = 0; i <= TIMED_ANSWERS; i++) {
        const order = admins.map((_, at) => at);
        if (i % 2 === 1) order.reverse();
        for (const at of order) {
          const started = performance.now();
          const response = await fetch(`${admins[at]!.url}${shape.path}`, { headers: auth });
          await response.text();
          times[at]!.push(performance.now() - started);
          ids[at]!.push(response.headers.get('x-request-id') ?? '');
          status[at] = response.status;
        }
      }
      admins.forEach((_, at) => {
        const [firstMs, ...rest] = times[at] as [number, ...number[]];
        timed[at]!.push({
          name: shape.name,
          firstMs,
          p50Ms: percentile(rest, 50),
          p95Ms: percentile(rest, 95),
          rowsRead: 0,
          bytesRead: 0,
          clickhouseP50Ms: NaN,
          clickhouseP95Ms: NaN,
          clickhouseCpuP50Ms: NaN,
          clickhouseCpuWaitP50Ms: NaN,
          status: status[at]!,
          ids: ids[at]!,
        });
      });
    }
    // From ClickHouse's query log, per answer: what it read and its own time (a request
    // may run two queries: top users, the groups first, under the id with `-groups`).
    // What it read is the last answer's; its time, p50 and p95 of the timed answers (what
    // grows in ClickHouse and what around it).
    const event = await profileEventSql(clickhouse);
    for (const entry of timed.flat()) {
      const { ids } = entry;
      const answers = await queryLogRows<{
        id: string;
        read_rows: string;
        read_bytes: string;
        ms: string;
        cpu_us: string;
        wait_us: string;
      }>(
        clickhouse,
        `SELECT replaceRegexpOne(query_id, '-groups$', '') AS id, sum(read_rows) AS read_rows, sum(read_bytes) AS read_bytes,
            sum(query_duration_ms) AS ms, sum(${event('UserTimeMicroseconds')} + ${event('SystemTimeMicroseconds')}) AS cpu_us,
            sum(${event('OSCPUWaitMicroseconds')}) AS wait_us FROM system.query_log
          WHERE query_id IN (${ids.flatMap((one) => [`'${one}'`, `'${one}-groups'`]).join(', ')}) AND type = 2 GROUP BY id`,
        (rows) => rows.some((row) => row.id === ids.at(-1)),
      );
      const last = answers.find((answer) => answer.id === ids.at(-1));
      entry.rowsRead = Number(last?.read_rows ?? NaN);
      entry.bytesRead = Number(last?.read_bytes ?? NaN);
      const timedAnswers = answers.filter((answer) => answer.id !== ids[0]);
      const p50Of = (values: number[]) => (values.length ? percentile(values, 50) : NaN);
      const ms = timedAnswers.map((answer) => Number(answer.ms));
      entry.clickhouseP50Ms = p50Of(ms);
      entry.clickhouseP95Ms = ms.length ? percentile(ms, 95) : NaN;
      entry.clickhouseCpuP50Ms = p50Of(timedAnswers.map((answer) => Number(answer.cpu_us) / 1000));
      entry.clickhouseCpuWaitP50Ms = p50Of(timedAnswers.map((answer) => Number(answer.wait_us) / 1000));
    }
    return timed.map((list) => list.map(({ ids: _ids, ...entry }) => entry));
  };
  /** Links every generated part into the tenth's database; the seconds it took. */
  const keepTenth = async () => {
    const started = Date.now();
    await migrate(server as never, tenthClient as never, tenth);
    await markBackfilledIfEmpty(tenthClient as never);
    const stored = (db: string) => `SELECT table, partition, sum(rows) AS rows FROM system.parts WHERE database = '${db}' AND active
      AND table != 'schema_migrations' AND NOT startsWith(table, 'rollup_backfill')
      -- The ingester's key look-up table: no query reads it, and its Date partition's text does not parse back as one on 18.16.
      AND table != 'usage_event_keys' GROUP BY table, partition ORDER BY table, partition`;
    const list = async (db: string) =>
      (await server.query({ query: stored(db), format: 'JSONEachRow' })).json<{ table: string; partition: string; rows: string }>();
    const partitions = await list(database);
    for (const { table, partition } of partitions) {
      await server.command({ query: `ALTER TABLE ${tenth}.${table} ATTACH PARTITION ${partition} FROM ${database}.${table}` });
    }
    const linked = await list(tenth);
    if (JSON.stringify(linked) !== JSON.stringify(partitions))
      throw new Error(`the tenth's database holds other rows than the tenth: ${linked.length} of ${partitions.length} partitions alike`);
    return (Date.now() - started) / 1000;
  };
  /**
   * The job's work (day-levels.ts): the day rollups of the generated days built from their
   * hours, and the per-user weeks over by yesterday from their days, today's left to its
   * hours as a live installation's is; the seconds it took.
   * After the second generation the days are built anew (their rows emptied and the days
   * marked, as records arriving for built days would mark them), not rebuilt one by one.
   */
  const buildGeneratedDays = async (again: boolean) => {
    const started = Date.now();
    if (again) {
      for (const table of [...JOB_BUILT_DAY_ROLLUPS.map((rollup) => rollup.table), USER_WEEKS]) {
        await clickhouse.command({ query: `TRUNCATE TABLE ${table}` });
      }
      const days: number[] = [];
      for (let at = spec.endMs - (spec.days + 1) * DAY_MS; at < spec.endMs + DAY_MS; at += DAY_MS) days.push(at);
      await markDays(clickhouse as never, days);
    }
    // Nothing loads meanwhile: no lease to wait for.
    const quiet = { setDayWatermark: async () => {}, waitForInsertsInFlight: async () => {} };
    await buildDays(clickhouse as never, quiet, { delayMs: 0, maxDays: 100_000 });
    return (Date.now() - started) / 1000;
  };
  const all = () => [...RANGES.flatMap(shapes), ...RANGES.flatMap(pageRequests)];
  /**
   * Merges every rollup the queries read and the copy ordered by user into one part per
   * monthly partition; the seconds it took, their rows and parts before and after.
   */
  const settle = async () => {
    // One user's records lie in one granule or two of each part of the copy ordered by
    // user, so what a user's query reads follows how many parts a month holds; a month of
    // background merges leaves a few, a generation in 2-million-row steps dozens. The
    // minute rollups (the edges of a range) and the errors per minute likewise.
    const merged = [...SCALED_ROLLUPS.map(({ table }) => table), USER_WEEKS, 'usage_events_by_user', 'usage_errors_minute'];
    const parts = async () =>
      (
        await (
          await clickhouse.query({
            query: `SELECT table, partition, count() AS parts, sum(rows) AS rows FROM system.parts
              WHERE database = '${database}' AND active AND table IN (${merged.map((t) => `'${t}'`).join(', ')}) GROUP BY table, partition`,
            format: 'JSONEachRow',
          })
        ).json<{ table: string; partition: string; parts: string; rows: string }>()
      ).map((row) => ({ table: row.table, partition: row.partition, parts: Number(row.parts), rows: Number(row.rows) }));
    const total = (list: { parts: number; rows: number }[], field: 'parts' | 'rows') => list.reduce((sum, row) => sum + row[field], 0);
    // OPTIMIZE does nothing to parts a background merge holds, and says so only when
    // asked to throw: the merges the generation started are waited for first, then each
    // partition is named and merged with optimize_throw_if_noop, a refused one asked
    // again (a partition left unmerged fails the run instead of skewing its timings).
    const mergesBeforeSeconds = await waitForMerges(clickhouse as never, database, { quietMs: 5000, pollMs: 1000, timeoutMs: 900_000 });
    const before = await parts();
    const started = Date.now();
    const work = [...before];
    const optimize = async ({ table, partition }: { table: string; partition: string }) => {
      for (let attempt = 1; ; attempt++) {
        try {
          await clickhouse.command({
            query: `OPTIMIZE TABLE ${table} PARTITION ${partition} FINAL`,
            clickhouse_settings: { optimize_throw_if_noop: 1 },
          });
          return;
        } catch (error) {
          // Only ClickHouse's refusal (a merge holds a part) is asked again.
          if (attempt >= 10 || clickhouseErrorCode(error) !== CANNOT_ASSIGN_OPTIMIZE) throw error;
          await new Promise((resolve) => setTimeout(resolve, 3000));
        }
      }
    };
    // Two at a time: the machine's two cores.
    await Promise.all(
      [0, 1].map(async () => {
        for (let next = work.shift(); next; next = work.shift()) await optimize(next);
      }),
    );
    const seconds = (Date.now() - started) / 1000;
    // The background merges the generation left (usage_events) run on the same two
    // cores as the queries: waited for until none has run for 20 s (one merge ending lets
    // ClickHouse choose the next), up to 15 minutes, so that the timings are of a
    // database at rest (the wait is reported).
    const mergesWaitSeconds =
      mergesBeforeSeconds + (await waitForMerges(clickhouse as never, database, { quietMs: 20_000, pollMs: 2000, timeoutMs: 900_000 }));
    const after = await parts();
    return {
      seconds,
      rowsBefore: total(before, 'rows'),
      rowsAfter: total(after, 'rows'),
      partsBefore: total(before, 'parts'),
      partsAfter: total(after, 'parts'),
      partitions: after.length,
      mergesWaitSeconds,
    };
  };

  try {
    let started = Date.now();
    await generateEvents(clickhouse as never, { ...spec, count: first }, (done) => log(`  generated ${done.toLocaleString('en-US')}`));
    out.firstGenerateSeconds = (Date.now() - started) / 1000;
    out.firstDayBuildSeconds = await buildGeneratedDays(false);
    out.firstSettle = await settle();
    log(
      `  ${first.toLocaleString('en-US')} events in ${out.firstGenerateSeconds} s, merged in ${(out.firstSettle as { seconds: number }).seconds} s, merges left waited for ${(out.firstSettle as { mergesWaitSeconds: number }).mergesWaitSeconds} s; kept in ${tenth}`,
    );
    out.tenthLinkSeconds = await keepTenth();
    tenthAdmin = await startAdmin(tenth);

    started = Date.now();
    await generateEvents(clickhouse as never, { ...spec, count: events - first, offset: first }, (done) =>
      log(`  generated ${(first + done).toLocaleString('en-US')}`),
    );
    out.restGenerateSeconds = (Date.now() - started) / 1000;
    out.fullDayBuildSeconds = await buildGeneratedDays(true);
    out.fullSettle = await settle();
    log(
      `  ${events.toLocaleString('en-US')} events (${out.restGenerateSeconds} s more), merged in ${(out.fullSettle as { seconds: number }).seconds} s, merges left waited for ${(out.fullSettle as { mergesWaitSeconds: number }).mergesWaitSeconds} s; timing the queries at both sizes`,
    );
    out.timing = 'interleaved';
    [out.atFirst, out.atFull] = await measure(all(), [tenthAdmin, admin]);

    const sizes = await (
      await clickhouse.query({
        query: `SELECT table, sum(rows) AS rows, sum(bytes_on_disk) AS bytes FROM system.parts WHERE database = '${database}' AND active GROUP BY table ORDER BY table`,
        format: 'JSONEachRow',
      })
    ).json<{ table: string; rows: string; bytes: string }>();
    out.tables = sizes.map((row) => ({ table: row.table, rows: Number(row.rows), bytes: Number(row.bytes) }));

    // An unfiltered 30-day query: the rollup rows it reads, against the events.
    const wide = (out.atFull as Timed[]).find((entry) => entry.name === 'usage by model (30d, day)');
    out.wideRowsShare = wide ? wide.rowsRead / events : NaN;

    // The same requests at the full size while a pipeline ingests into that database.
    Object.assign(out, await timedWhileIngesting(database, admin, all(), measure));

    // One user's erasure and one day's re-costing at the full size (figures, not targets).
    started = Date.now();
    const erase = await fetch(`${admin.url}/v1/admin/users/user-4242/data?environment=${['prod', 'qa', 'dev'][4242 % 3]}`, {
      method: 'DELETE',
      headers: auth,
    });
    const job = (await erase.json()) as { statusUrl: string };
    let state = 'running';
    while (state === 'running' && Date.now() - started < 1_800_000) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      state = ((await (await fetch(`${admin.url}${job.statusUrl}`, { headers: auth })).json()) as { state: string }).state;
    }
    out.erasureSeconds = (Date.now() - started) / 1000;
    out.erasureState = state;
    started = Date.now();
    const dayMs = Math.floor(endMs / 86_400_000) * 86_400_000 - 10 * 86_400_000;
    const recosted = await recost(clickhouse as never, new RollupFence(redis, `bench-analytics-${runId}:`, null), PriceTable.load(), {
      fromMs: dayMs,
      toMs: dayMs + 86_400_000,
    });
    out.recostSeconds = (Date.now() - started) / 1000;
    out.recostRows = recosted.rows;

    // Ten records of one day removed from history by event key (the job of the admin API).
    const picked = await (
      await clickhouse.query({
        query: `SELECT event_key FROM usage_events WHERE event_time >= toDateTime(${dayMs / 1000}) AND event_time < toDateTime(${dayMs / 1000 + 86_400}) LIMIT 10`,
        format: 'JSONEachRow',
      })
    ).json<{ event_key: string }>();
    started = Date.now();
    const removal = (await (
      await fetch(`${admin.url}/v1/admin/records/removals`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ eventKeys: picked.map((row) => row.event_key), reason: 'bench' }),
      })
    ).json()) as { statusUrl: string };
    let removed: { state: string; records?: number } = { state: 'running' };
    while (removed.state === 'running' && Date.now() - started < 1_800_000) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      removed = (await (await fetch(`${admin.url}${removal.statusUrl}`, { headers: auth })).json()) as typeof removed;
    }
    out.removalSeconds = (Date.now() - started) / 1000;
    out.removalState = removed.state;
    out.removalRecords = removed.records ?? 0;

    // Each dashboard page, in Chromium: from choosing the page to its charts drawn.
    const browser = await chromium.launch({ executablePath: ensureChromium(), args: ['--headless', '--no-sandbox', '--disable-gpu'] });
    try {
      const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
      await page.goto(admin.url);
      await page.fill('#token', adminToken);
      await page.click('#sign-in');
      await page.waitForSelector('body[data-ready="overview"]', { timeout: 120_000 });
      // The last 30 days (a change of range renders the page again).
      await page.evaluate(() => delete document.body.dataset.ready);
      await page.selectOption('#range', '30d');
      await page.waitForSelector('body[data-ready="overview"]', { timeout: 120_000 });
      // What ClickHouse still does in the background after those jobs (their mutations, the
      // merges of the parts they and the load wrote), as the pages are timed.
      out.pagesBackground = await backgroundWork(clickhouse, database);
      // Each page PAGE_ROUNDS times, the pages in turn: one timing of a page is one
      // moment of the background work.
      const ids = ['models', 'errors', 'users', 'overview'];
      const times = new Map<string, number[]>(ids.map((id) => [id, []]));
      const found = new Map<string, { charts: number; errors: number }>();
      for (let round = 0; round < PAGE_ROUNDS; round++) {
        for (const id of ids) {
          await page.evaluate(() => delete document.body.dataset.ready);
          const at = performance.now();
          await page.evaluate((target) => (location.hash = target), id);
          await page.waitForSelector(`body[data-ready="${id}"]`, { timeout: 120_000 });
          times.get(id)!.push(performance.now() - at);
          found.set(id, { charts: await page.locator('canvas').count(), errors: await page.locator('.error').count() });
        }
      }
      out.pages = ids.map((id) => ({ page: id, ms: percentile(times.get(id)!, 50), each: times.get(id)!, ...found.get(id)! }));
      out.pagesBackgroundAfter = await backgroundWork(clickhouse, database);
    } finally {
      await browser.close();
    }
  } finally {
    await admin.stop();
    await tenthAdmin?.stop();
    await server.command({ query: `DROP DATABASE IF EXISTS ${tenth}` }).catch(() => undefined);
    await tenthClient.close();
    await server.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
    await clickhouse.close();
    await server.close();
  }
  results.analytics = out as never;
}

/** Records per second the pipeline offers while the queries are timed again: half the sustained rate end to end. */
function ingestRateWhileTimed(): number {
  const given = Number(process.env.BENCH_ANALYTICS_INGEST_RATE);
  if (Number.isFinite(given) && given > 0) return given;
  const sustained = Number((results.endToEnd as { sustainedPerS?: number } | undefined)?.sustainedPerS);
  return Number.isFinite(sustained) && sustained > 0 ? sustained / 2 : 3000;
}

/** Each dashboard page is timed this many times after the jobs (the median reported). */
const PAGE_ROUNDS = 3;

/** The merges running and the mutations not done in `database`, now. */
async function backgroundWork(
  clickhouse: ReturnType<typeof createClient>,
  database: string,
): Promise<{ merges: number; mutations: number }> {
  const count = async (query: string) =>
    Number((await (await clickhouse.query({ query, format: 'JSONEachRow' })).json<{ n: string }>())[0]?.n ?? NaN);
  return {
    merges: await count(`SELECT count() AS n FROM system.merges WHERE database = '${database}'`),
    mutations: await count(`SELECT count() AS n FROM system.mutations WHERE database = '${database}' AND is_done = 0`),
  };
}

/**
 * Every request timed again at the full size while a gateway and an ingester load
 * records into the same database at half the sustained rate end to end (the SDK, batches
 * of 500): the inserts, their views and the merges after them share the two cores with
 * the queries, as in a live installation. The load starts 10 s before the timing and is
 * stopped when it ends (at most 30 minutes); what was ingested meanwhile is counted in
 * ClickHouse (the records of the load's key stored during the timing).
 */
async function timedWhileIngesting<T>(
  database: string,
  admin: { url: string },
  list: Shape[],
  measure: (list: Shape[], admins: readonly { url: string }[]) => Promise<T[][]>,
): Promise<Record<string, unknown>> {
  const rate = ingestRateWhileTimed();
  const topic = `bench.analytics.${runId}`;
  const prefix = `bench-analytics-${runId}:ingest:`;
  const port = 18445;
  const key = await new KeyStore(redis, prefix).create({ environment: 'prod', name: 'analytics while ingesting' });
  const { ingester, gateway } = await startPipeline({ topic, database, groupId: `bench-analytics-${runId}`, prefix, port, level: 'info' });
  const clickhouse = createClient({ url: addresses.CLICKHOUSE_URL, database });
  const stop = new AbortController();
  try {
    const load = runSdkLoadUntil(
      {
        endpoint: `https://127.0.0.1:${port}`,
        apiKey: key.key,
        bodiesFile,
        durationSeconds: 1800,
        warmupSeconds: 0,
        flushAt: 500,
        maxConcurrentRequests: 4,
        rate,
      },
      stop.signal,
    );
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    const from = Math.floor(Date.now() / 1000);
    const [timed] = await measure(list, [admin]);
    const to = Math.floor(Date.now() / 1000);
    stop.abort();
    await load;
    const [row] = await (
      await clickhouse.query({
        query: `SELECT count() AS n FROM usage_events WHERE api_key_id = '${key.id}' AND ingested_at >= toDateTime(${from}) AND ingested_at < toDateTime(${to})`,
        format: 'JSONEachRow',
      })
    ).json<{ n: string }>();
    const ingestedPerS = Number(row?.n ?? 0) / Math.max(1, to - from);
    log(
      `  timed again while ingesting: offered ${rate.toFixed(0)}/s, ${ingestedPerS.toFixed(0)}/s stored during the ${to - from} s of timing`,
    );
    return {
      atFullWhileIngesting: timed,
      whileIngesting: { offeredPerS: rate, achievedPerS: ingestedPerS, timedSeconds: to - from },
    };
  } finally {
    stop.abort();
    await Promise.all([gateway.stop(), ingester.stop(), clickhouse.close()]);
  }
}
