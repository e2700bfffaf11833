// 3b. The look-up before each insert, at scale ------------------------------------------
// What the ingester's look-up of a unit's event keys reads once many records are stored
// (docs/ingester.md, "Stored once"): BENCH_LOOKUP_EVENTS records (10 million) generated
// inside ClickHouse over 30 days, each stored at its event time (only usage_events, its
// event keys and the copy of usage_io's keys: the rollups' views are dropped, they do not
// bear on the look-up), then units of 5,000 keys (half of them stored in the last day,
// half of none) for records received now, looked up in usage_event_keys as the ingester
// does and in usage_events itself as it did before migration 0012: rows read
// (system.query_log) and time, the median of BENCH_LOOKUP_RUNS units each.
import { createClient } from '@clickhouse/client';
import { migrate } from '../../../services/shared/src/migrate.js';
import { existingEventKeys, storedSince } from '../../../services/ingester/src/load-step.js';
import { generateEvents } from '../../../test/fixtures/generate-events.js';
import { addresses, figure, log, results, runId, quick } from '../context.js';

const DAY_MS = 86_400_000;

export async function benchLookup(): Promise<void> {
  const events = Number(process.env.BENCH_LOOKUP_EVENTS ?? (quick ? 1_000_000 : 10_000_000));
  const units = Number(process.env.BENCH_LOOKUP_RUNS ?? 7);
  const keysPerUnit = 5_000;
  log(`3b. the look-up before each insert: ${events} records stored over 30 days, units of ${keysPerUnit} keys`);
  const database = `bench_lookup_${runId}`;
  const server = createClient({ url: addresses.CLICKHOUSE_URL, request_timeout: 600_000 });
  const clickhouse = createClient({ url: addresses.CLICKHOUSE_URL, database, request_timeout: 600_000, clickhouse_settings: { log_queries: 1 } });
  try {
    await migrate(server as never, clickhouse as never, database);
    const views = await (
      await clickhouse.query({
        query: `SELECT name FROM system.tables WHERE database = '${database}' AND engine = 'MaterializedView' AND name NOT LIKE 'usage_event_keys_%'`,
        format: 'JSONEachRow',
      })
    ).json<{ name: string }>();
    for (const { name } of views) await clickhouse.command({ query: `DROP TABLE ${name}` });
    const endMs = Date.now();
    const started = performance.now();
    await generateEvents(clickhouse as never, { count: events, days: 30, endMs, users: 100_000, models: 50, keys: 48, ingestedAtS: 'eventTime' });
    const generatedS = (performance.now() - started) / 1000;
    // The last day's records are the last thirtieth of the numbers.
    const lastDay = Math.floor(events / 30);
    const keys = (unit: number, marker: string) => [
      marker,
      ...Array.from({ length: keysPerUnit / 2 }, (_, i) => `gen-${events - 1 - ((unit * 7919 + i * 104_729) % lastDay)}`),
      ...Array.from({ length: keysPerUnit / 2 - 1 }, (_, i) => `none-${runId}-${unit}-${i}`),
    ];
    const since = storedSince([endMs], 86_400);
    const measured: Record<'keyTable' | 'table', { ms: number[]; found: number[]; marker: string[] }> = {
      keyTable: { ms: [], found: [], marker: [] },
      table: { ms: [], found: [], marker: [] },
    };
    for (let unit = 0; unit < units; unit++) {
      for (const way of unit % 2 === 0 ? (['keyTable', 'table'] as const) : (['table', 'keyTable'] as const)) {
        const marker = `marker-${runId}-${way}-${unit}`;
        const t = performance.now();
        const found = await existingEventKeys(clickhouse as never, 'usage_events', keys(unit, marker), way === 'keyTable' ? since : null);
        measured[way].ms.push(performance.now() - t);
        measured[way].found.push(found.size);
        measured[way].marker.push(marker);
      }
    }
    await server.command({ query: 'SYSTEM FLUSH LOGS' });
    const read = async (marker: string) => {
      const [row] = await (
        await server.query({
          query: `SELECT read_rows AS rows, read_bytes AS bytes FROM system.query_log WHERE type = 2 AND event_date >= yesterday() AND query LIKE '%${marker}%' AND query LIKE 'SELECT DISTINCT%' LIMIT 1`,
          format: 'JSONEachRow',
        })
      ).json<{ rows: string; bytes: string }>();
      return { rows: Number(row?.rows ?? NaN), bytes: Number(row?.bytes ?? NaN) };
    };
    const out: Record<string, unknown> = { events, keysPerUnit, units, generatedS, since };
    for (const way of ['keyTable', 'table'] as const) {
      const reads = await Promise.all(measured[way].marker.map(read));
      out[way] = {
        ms: figure(measured[way].ms),
        rowsRead: figure(reads.map((r) => r.rows)),
        mbRead: figure(reads.map((r) => r.bytes / 1e6)),
        found: figure(measured[way].found),
      };
    }
    const [keysTable] = await (
      await server.query({
        query: `SELECT sum(rows) AS rows, sum(bytes_on_disk) AS bytes FROM system.parts WHERE database = '${database}' AND table = 'usage_event_keys' AND active`,
        format: 'JSONEachRow',
      })
    ).json<{ rows: string; bytes: string }>();
    out.keyTableBytesPerRow = Number(keysTable!.bytes) / Number(keysTable!.rows);
    results.lookup = out as never;
    log(`   key table ${JSON.stringify(out.keyTable)}; table itself ${JSON.stringify(out.table)}`);
  } finally {
    await server.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
    await Promise.all([server.close(), clickhouse.close()]);
  }
}
