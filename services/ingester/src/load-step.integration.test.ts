// The look-up before each insert (load-step.ts) on the real ClickHouse: it finds what an
// earlier load stored, it reads usage_event_keys only over the days an earlier copy can
// have been stored in (before migration 0012 it read nearly every row of usage_events,
// whatever their age), and after an insert that ended without an answer it looks in the
// table itself and records there the keys it finds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '@clickhouse/client';
import { createClickHouse } from '@otm/shared/clickhouse';
import { migrate } from '@otm/shared/migrate';
import { queuedRecords, sampleUsageRecords } from '../../../test/fixtures/sample-records.js';
import { generateEvents } from '../../../test/fixtures/generate-events.js';
import { eventually, queryRows, testNames, testStack } from '../../../test/helpers/stack.js';
import { enrich } from './enrich-step.js';
import { encodeRow, INSERT_EVENTS, INSERT_IO } from './encode-step.js';
import { existingEventKeys, storedSince } from './key-lookup.js';
import { insertEncoded, loadIsolatingBadRows, loadStep } from './load-step.js';
import { noneUnanswered } from './ports.js';
import { PriceTable } from './prices.js';

const n = testNames('lookup');
const stack = testStack();
const settings = { url: stack.CLICKHOUSE_URL, username: 'default', password: '' };
const server = createClickHouse({ ...settings, database: '' }, { database: null });
const clickhouse = createClickHouse({ ...settings, database: n.database });
const prices = PriceTable.load();
const DAY_MS = 86_400_000;
const WINDOW_S = 86_400;

beforeAll(async () => {
  await migrate(server, clickhouse, n.database);
});
afterAll(async () => {
  await server.command({ query: `DROP DATABASE IF EXISTS ${n.database}` }).catch(() => undefined);
  await Promise.all([server.close(), clickhouse.close()]);
});

const encoded = (count: number, prefix: string, seed: number) =>
  queuedRecords(sampleUsageRecords(count, { seed, users: 20 }), { eventKey: (index) => `${prefix}-${index}` }).map((record) =>
    encodeRow(enrich(record, prices)),
  );

/** Records the rollups count (every row inserted into usage_events is counted, a repeat too). */
async function counted(): Promise<number> {
  const [row] = await queryRows<{ n: string }>(clickhouse, 'SELECT countMerge(requests) AS n FROM usage_rollup_key_totals_by_hour');
  return Number(row!.n);
}

/**
 * Rows ClickHouse read for the last look-up that named `marker`. An HTTP query's
 * log entry is written after its answer reaches the client, so a flush at once can
 * come before it: flush and look again until it is there.
 */
async function rowsRead(marker: string): Promise<number> {
  const row = await eventually(async () => {
    await server.command({ query: 'SYSTEM FLUSH LOGS' });
    const [found] = await queryRows<{ read: string }>(
      server,
      `SELECT read_rows AS read FROM system.query_log
       WHERE type = 2 AND query LIKE 'SELECT DISTINCT %event_key FROM %${marker}%' AND event_date >= yesterday()
       ORDER BY event_time DESC LIMIT 1`,
    );
    return found;
  }, 15_000);
  return Number(row.read);
}

describe('the look-up before an insert', () => {
  it('finds what an earlier load stored: a redelivery with new records stores only the new ones, each once', async () => {
    const rows = encoded(250, 'again', 11);
    const before = await counted();
    const first = await loadIsolatingBadRows(clickhouse, rows.slice(0, 200), (row) => row);
    expect(first.alreadyLoaded).toEqual([]);
    const second = await loadIsolatingBadRows(clickhouse, rows, (row) => row);
    expect(second.alreadyLoaded.sort()).toEqual(
      rows
        .slice(0, 200)
        .map((row) => row.eventKey)
        .sort(),
    );
    expect((await counted()) - before).toBe(250);
  });

  it('reads the days an earlier copy can have been stored in, not every record ever stored', async () => {
    // 300,000 records stored 30 days ago (their keys in usage_event_keys under that day).
    const thirtyDaysAgo = Date.now() - 30 * DAY_MS;
    await generateEvents(clickhouse, {
      count: 300_000,
      days: 1,
      endMs: thirtyDaysAgo,
      users: 1_000,
      models: 5,
      keys: 3,
      ingestedAtS: Math.floor(thirtyDaysAgo / 1000),
    });
    const log = createClient({ url: stack.CLICKHOUSE_URL, database: n.database, clickhouse_settings: { log_queries: 1 } });
    try {
      // 1,000 keys of those records and 1,000 of none, the first a marker that finds the query in the log.
      const keys = (marker: string) => [
        marker,
        ...Array.from({ length: 1_000 }, (_, index) => `gen-${index * 300}`),
        ...Array.from({ length: 999 }, (_, index) => `new-${index}`),
      ];
      // A record received now: a copy stored a month ago is outside the dedupe window, and unread.
      const recent = await existingEventKeys(log, 'usage_events', keys(`recent-${n.database}`), storedSince([Date.now()], WINDOW_S));
      expect(recent.size).toBe(0);
      expect(await rowsRead(`recent-${n.database}`)).toBeLessThan(5_000);
      // Received a month ago (a replay from Kafka): that day is read, and the copies found.
      const replayed = await existingEventKeys(log, 'usage_events', keys(`replayed-${n.database}`), storedSince([thirtyDaysAgo], WINDOW_S));
      expect(replayed.size).toBe(1_000);
      expect(await rowsRead(`replayed-${n.database}`)).toBeLessThanOrEqual(300_000);
      // The table itself (what every look-up read before usage_event_keys): nearly all of it.
      const direct = await existingEventKeys(log, 'usage_events', keys(`direct-${n.database}`), null);
      expect(direct.size).toBe(1_000);
      expect(await rowsRead(`direct-${n.database}`)).toBeGreaterThan(250_000);
    } finally {
      await log.close();
    }
  });

  it('after an insert that ended without an answer, finds its rows in the table itself and records their keys', async () => {
    const rows = encoded(100, 'unsure', 12);
    const before = await counted();
    // The insert whose keys never reached usage_event_keys (a server stopped between the table and its views).
    await clickhouse.command({ query: 'DETACH TABLE usage_event_keys_events_mv' });
    try {
      expect((await loadIsolatingBadRows(clickhouse, rows, (row) => row)).loaded).toHaveLength(100);
    } finally {
      await clickhouse.command({ query: 'ATTACH TABLE usage_event_keys_events_mv' });
    }
    const since = storedSince([Date.now()], WINDOW_S);
    const keys = rows.map((row) => row.eventKey);
    expect((await existingEventKeys(clickhouse, 'usage_events', keys, since)).size).toBe(0);

    // The retry of that unit knows its insert went unanswered: the table itself is asked.
    const unanswered = noneUnanswered();
    for (const key of keys) unanswered.eventKeys.add(key);
    const retried = await loadIsolatingBadRows(clickhouse, rows, (row) => row, unanswered);
    expect(retried.alreadyLoaded).toHaveLength(100);
    expect((await counted()) - before).toBe(100);
    // The keys are recorded now: a later redelivery, unaware of that insert, finds them.
    expect((await existingEventKeys(clickhouse, 'usage_events', keys, since)).size).toBe(100);
    const redelivered = await loadIsolatingBadRows(clickhouse, rows, (row) => row);
    expect(redelivered.alreadyLoaded).toHaveLength(100);
    expect((await counted()) - before).toBe(100);
  });

  it('finds keys holding quotes, backslashes and the separator of its one literal, in the key table and the table itself', async () => {
    const odd = ["o'brien\\1", 'line\nbreak', 'tab\tand \\n', `plain-${n.database}`];
    const rows = queuedRecords(sampleUsageRecords(odd.length, { seed: 21, users: 5 }), { eventKey: (index) => odd[index]! }).map((record) =>
      encodeRow(enrich(record, prices)),
    );
    expect((await loadIsolatingBadRows(clickhouse, rows, (row) => row)).loaded).toHaveLength(odd.length);
    const since = storedSince([Date.now()], WINDOW_S);
    const absent = ["o'brien", 'line', 'break', 'tab\tand \\', ''];
    for (const from of [since, null]) {
      // Without the newline key the keys go as one literal split by ClickHouse; with it, as a list.
      const withoutNewline = odd.filter((key) => !key.includes('\n'));
      expect(await existingEventKeys(clickhouse, 'usage_events', [...withoutNewline, ...absent], from)).toEqual(new Set(withoutNewline));
      expect(await existingEventKeys(clickhouse, 'usage_events', [...odd, ...absent], from)).toEqual(new Set(odd));
    }
  });

  it('completes a unit that stopped halfway: the table holding its rows is not written again, the other is', async () => {
    for (const [seed, first] of [
      [31, 'usage_events'],
      [32, 'usage_io'],
    ] as const) {
      const prefix = `half-${first}`;
      const rows = encoded(20, prefix, seed);
      const withIo = rows.filter((row) => row.io !== null);
      expect(withIo.length).toBeGreaterThan(0);
      if (first === 'usage_events')
        await insertEncoded(
          clickhouse,
          INSERT_EVENTS,
          rows.map((row) => row.event),
        );
      else
        await insertEncoded(
          clickhouse,
          INSERT_IO,
          withIo.map((row) => row.io!),
        );
      await loadIsolatingBadRows(clickhouse, rows, (row) => row);
      // Each insert records its keys (usage_event_keys is a plain MergeTree: a second insert would show twice).
      const [stored] = await queryRows<{ events: string; io: string }>(
        clickhouse,
        `SELECT countIf(source = 1) AS events, countIf(source = 2) AS io FROM usage_event_keys WHERE startsWith(event_key, '${prefix}-')`,
      );
      expect({ first, events: Number(stored!.events), io: Number(stored!.io) }).toEqual({ first, events: 20, io: withIo.length });
    }
  });

  it('reaches back a day and the dedupe window before the oldest receipt', () => {
    const received = Date.UTC(2026, 10, 27, 0, 30);
    expect(storedSince([received, received + DAY_MS], 86_400)).toBe('2026-11-25');
    expect(storedSince([received], 3_600)).toBe('2026-11-25');
    expect(storedSince([Date.UTC(2026, 10, 27, 23)], 600)).toBe('2026-11-26');
  });
});

describe('the two inserts of a unit', () => {
  const database = `${n.database}_halves`;
  const halves = createClickHouse({ ...settings, database });
  beforeAll(async () => {
    await migrate(server, halves, database);
    // usage_io gone: its insert fails at once, while usage_events (and its views) take theirs.
    await server.command({ query: `DROP TABLE ${database}.usage_io` });
  });
  afterAll(async () => {
    await server.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
    await halves.close();
  });

  it('both end before the unit fails: a retry never looks up keys while the other insert may still store them', async () => {
    const rows = encoded(5000, 'halves', 13);
    await expect(loadStep(halves, rows)).rejects.toThrow(/usage_io/);
    // The usage_events insert had ended, whole, when the unit's attempt failed.
    const [stored] = await queryRows<{ n: string }>(halves, "SELECT count() AS n FROM usage_events WHERE event_key LIKE 'halves-%'");
    expect(Number(stored!.n)).toBe(5000);
  });
});
