// 3b. The look-up before each insert, at scale ------------------------------------------
// What the ingester's look-up of a unit's event keys reads once many records are stored
// (docs/ingester.md, "Stored once"): BENCH_LOOKUP_EVENTS records (10 million) generated
// inside ClickHouse over 30 days, each stored at its event time (only usage_events, its
// event keys and the copy of usage_io's keys: the rollups' views are dropped, they do not
// bear on the look-up; keys spread over the key space as idempotency keys are), then,
// once their merges have stopped, units of 5,000 keys (half of them stored in the last
// day, half of none) for records received now, looked up in usage_event_keys as the ingester
// does and in usage_events itself as it did before migration 0012: rows read
// (system.query_log) and time, the median of BENCH_LOOKUP_RUNS units each.
import { createClient } from '@clickhouse/client';
import { migrate } from '../../../services/shared/src/migrate.js';
import { existingEventKeys, storedSince } from '../../../services/ingester/src/key-lookup.js';
import { generateEvents } from '../../../test/fixtures/generate-events.js';
import { randomBytes } from 'node:crypto';
import { addresses, figure, log, queryLogRows, results, runId, quick, waitForMerges } from '../context.js';

export async function benchLookup(): Promise<void> {
  const events = Number(process.env.BENCH_LOOKUP_EVENTS ?? (quick ? 1_000_000 : 10_000_000));
  const units = Number(process.env.BENCH_LOOKUP_RUNS ?? 7);
  const keysPerUnit = 5_000;
  log(`3b. the look-up before each insert: ${events} records stored over 30 days, units of ${keysPerUnit} keys`);
  const database = `bench_lookup_${runId}`;
  const server = createClient({ url: addresses.CLICKHOUSE_URL, request_timeout: 600_000 });
  const clickhouse = createClient({
    url: addresses.CLICKHOUSE_URL,
    database,
    request_timeout: 600_000,
    clickhouse_settings: { log_queries: 1 },
  });
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
    await generateEvents(clickhouse as never, {
      count: events,
      days: 30,
      endMs,
      users: 100_000,
      models: 50,
      keys: 48,
      ingestedAtS: 'eventTime',
      spreadKeys: true,
    });
    const generatedS = (performance.now() - started) / 1000;
    await waitForMerges(clickhouse as never, database, { quietMs: 5_000, pollMs: 500, timeoutMs: 300_000 });
    // Keys as idempotency keys are: spread over the key space (gen- and a hash), half of
    // records stored in the last day, half of none.
    const stored = async (unit: number) =>
      (
        await (
          await clickhouse.query({
            query: `SELECT event_key FROM usage_events WHERE event_time >= toDateTime(${Math.floor(endMs / 1000) - 86_400})
                    ORDER BY cityHash64(event_key, ${unit}) LIMIT ${keysPerUnit / 2}`,
            format: 'JSONEachRow',
          })
        ).json<{ event_key: string }>()
      ).map((row) => row.event_key);
    const picked = await Promise.all(Array.from({ length: units }, (_, unit) => stored(unit)));
    const keys = (unit: number, marker: string) => [
      marker,
      ...picked[unit]!,
      ...Array.from({ length: keysPerUnit / 2 - 1 }, () => `gen-${randomBytes(8).readBigUInt64BE()}`),
    ];
    const since = storedSince([endMs], 86_400);
    const measured: Record<'keyTable' | 'table', { ms: number[]; found: number[]; marker: string[] }> = {
      keyTable: { ms: [], found: [], marker: [] },
      table: { ms: [], found: [], marker: [] },
    };
    for (let unit = 0; unit < units; unit++) {
      for (const way of unit % 2 === 0 ? (['keyTable', 'table'] as const) : (['table', 'keyTable'] as const)) {
        const marker = `gen-marker-${runId}-${way}-${unit}`;
        const t = performance.now();
        const found = await existingEventKeys(clickhouse as never, 'usage_events', keys(unit, marker), way === 'keyTable' ? since : null);
        measured[way].ms.push(performance.now() - t);
        measured[way].found.push(found.size);
        measured[way].marker.push(marker);
      }
    }
    const read = async (marker: string) => {
      const [row] = await queryLogRows<{ rows: string; bytes: string }>(
        server,
        `SELECT read_rows AS rows, read_bytes AS bytes FROM system.query_log WHERE type = 2 AND event_date >= yesterday() AND query LIKE '%${marker}%' AND query LIKE 'SELECT DISTINCT%' LIMIT 1`,
        (rows) => rows.length > 0,
      );
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
