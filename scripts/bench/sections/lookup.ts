// 3b. The look-up before each insert, at scale ------------------------------------------
// What the ingester's look-up of a unit's event keys reads once many records are stored
// (docs/ingester.md, "Stored once"): BENCH_LOOKUP_EVENTS records (10 million) generated
// inside ClickHouse over 30 days, each stored at its event time (only usage_events, its
// event keys and the copy of usage_io's keys: the rollups' views are dropped, they do not
// bear on the look-up; keys spread over the key space as idempotency keys are), then,
// once their merges have stopped, units of 5,000 keys (half of them stored in the last
// day, half of none) for records received now, looked up in usage_event_keys as the ingester
// does and in usage_events itself as it did before migration 0012: rows read
// (system.query_log) and time, the median of BENCH_LOOKUP_RUNS units each. Then units of
// 5,000 new keys (none stored) in usage_event_keys: random ones among the same records'
// keys, and time-ordered ones (as the SDK's UUIDv7s are, made now) among the keys of the
// same records generated time-ordered in a second database (docs/ingester.md, "Stored
// once: the keys' order").
import { createClient } from '@clickhouse/client';
import { migrate } from '../../../services/shared/src/migrate.js';
import { existingEventKeys, storedSince } from '../../../services/ingester/src/key-lookup.js';
import { generateEvents, timeOrderedKey, type GeneratedEvents } from '../../../test/fixtures/generate-events.js';
import { randomBytes } from 'node:crypto';
import { addresses, figure, log, queryLogRows, results, runId, quick, waitForMerges } from '../context.js';

export async function benchLookup(): Promise<void> {
  const events = Number(process.env.BENCH_LOOKUP_EVENTS ?? (quick ? 1_000_000 : 10_000_000));
  const units = Number(process.env.BENCH_LOOKUP_RUNS ?? 7);
  const keysPerUnit = 5_000;
  log(`3b. the look-up before each insert: ${events} records stored over 30 days, units of ${keysPerUnit} keys`);
  const database = `bench_lookup_${runId}`;
  const orderedDatabase = `bench_lookup_ordered_${runId}`;
  const server = createClient({ url: addresses.CLICKHOUSE_URL, request_timeout: 600_000 });
  const connect = (name: string) =>
    createClient({
      url: addresses.CLICKHOUSE_URL,
      database: name,
      request_timeout: 600_000,
      clickhouse_settings: { log_queries: 1 },
    });
  const clickhouse = connect(database);
  const ordered = connect(orderedDatabase);
  const endMs = Date.now();
  /** The records stored in `name` (their event keys as `eventKeys`), their merges over. */
  const prepare = async (client: typeof clickhouse, name: string, eventKeys: GeneratedEvents['eventKeys']) => {
    await migrate(server as never, client as never, name);
    const views = await (
      await client.query({
        query: `SELECT name FROM system.tables WHERE database = '${name}' AND engine = 'MaterializedView' AND name NOT LIKE 'usage_event_keys_%'`,
        format: 'JSONEachRow',
      })
    ).json<{ name: string }>();
    for (const { name: view } of views) await client.command({ query: `DROP TABLE ${view}` });
    await generateEvents(client as never, {
      count: events,
      days: 30,
      endMs,
      users: 100_000,
      models: 50,
      keys: 48,
      ingestedAtS: 'eventTime',
      eventKeys,
    });
    await waitForMerges(client as never, name, { quietMs: 5_000, pollMs: 500, timeoutMs: 300_000 });
  };
  try {
    const started = performance.now();
    await prepare(clickhouse, database, 'spread');
    const generatedS = (performance.now() - started) / 1000;
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
    // Units of new records, as nearly every unit is: keys none of which is stored, random
    // among the random keys, and time-ordered among the time-ordered ones (made over the
    // last second, as a unit's records are at 5,000 a second: after every stored key).
    await prepare(ordered, orderedDatabase, 'timeOrdered');
    const kinds = ['random', 'timeOrdered'] as const;
    const fresh: Record<(typeof kinds)[number], { ms: number[]; found: number[]; marker: string[] }> = {
      random: { ms: [], found: [], marker: [] },
      timeOrdered: { ms: [], found: [], marker: [] },
    };
    const random = () => randomBytes(8).readBigUInt64BE();
    for (let unit = 0; unit < units; unit++) {
      for (const kind of unit % 2 === 0 ? kinds : ([...kinds].reverse() as (typeof kinds)[number][])) {
        const marker = `gen-marker-${runId}-${kind}-${unit}`;
        const madeFrom = Date.now() - 1000;
        const newKeys = Array.from({ length: keysPerUnit - 1 }, (_, j) =>
          kind === 'random' ? `gen-${random()}` : timeOrderedKey(madeFrom + Math.floor((j * 1000) / keysPerUnit), random()),
        );
        const t = performance.now();
        const found = await existingEventKeys(
          (kind === 'random' ? clickhouse : ordered) as never,
          'usage_events',
          [marker, ...newKeys],
          since,
        );
        fresh[kind].ms.push(performance.now() - t);
        fresh[kind].found.push(found.size);
        fresh[kind].marker.push(marker);
      }
    }
    for (const kind of kinds) {
      const reads = await Promise.all(fresh[kind].marker.map(read));
      out[kind === 'random' ? 'newRandom' : 'newTimeOrdered'] = {
        ms: figure(fresh[kind].ms),
        rowsRead: figure(reads.map((r) => r.rows)),
        found: figure(fresh[kind].found),
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
    log(`   new keys: random ${JSON.stringify(out.newRandom)}; time-ordered ${JSON.stringify(out.newTimeOrdered)}`);
  } finally {
    for (const name of [database, orderedDatabase])
      await server.command({ query: `DROP DATABASE IF EXISTS ${name}` }).catch(() => undefined);
    await Promise.all([server.close(), clickhouse.close(), ordered.close()]);
  }
}
