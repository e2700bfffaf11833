// 3. Ingester throughput -----------------------------------------------------------
import { decodeWire } from '@otm/shared/registry';
import { createClickHouse } from '@otm/shared/clickhouse';
import { enrich } from '../../../services/ingester/src/enrich-step.js';
import { encodeRow, INSERT_EVENTS, INSERT_IO } from '../../../services/ingester/src/encode-step.js';
import { insertEncoded, insertLines } from '../../../services/ingester/src/load-step.js';
import { migrate } from '../../../services/shared/src/migrate.js';
import { markBackfilledIfEmpty } from '../../../services/shared/src/rollups/backfill.js';
import { PriceTable } from '../../../services/ingester/src/prices.js';
import { calcPrice } from '@pydantic/genai-prices';
import type { QueuedUsageRecord } from '@otm/schemas';
import { queuedRecords, sampleUsageRecords } from '../../../test/fixtures/sample-records.js';
import {
  runs,
  scale,
  addresses,
  runId,
  log,
  figure,
  peakRssMb,
  cpuSeconds,
  serviceEnv,
  startQuiet,
  prefillTopic,
  PREFILL_CODEC,
  waitForRows,
  profileDir,
  kafka,
  results,
  clickhousePid,
  waitForMerges,
  unitTimings,
  percentile,
} from '../context.js';

/** ClickHouse's CPU counts until its merges of a database have stopped for a second (at most a minute). */
const MERGES_SETTLED = { quietMs: 1000, pollMs: 100, timeoutMs: 60_000 };

/**
 * The enrich step's CPU per record (this process, the same records, median of `runs`):
 * priced from the price database as the ingester does (each (provider, model) resolved
 * once), with no prices at all (the floor: what pricing adds is the difference), and the
 * database's own calcPrice() per record (what pricing would cost without the cache).
 */
function measureEnrich(queued: QueuedUsageRecord[], prices: PriceTable) {
  const unpriced = new PriceTable('none', {}, false);
  const usPerRecord = (work: (record: QueuedUsageRecord) => unknown) => {
    const samples: number[] = [];
    for (let run = 0; run < runs; run++) {
      const start = process.cpuUsage();
      for (const record of queued) work(record);
      const used = process.cpuUsage(start);
      samples.push((used.user + used.system) / queued.length);
    }
    return figure(samples);
  };
  // Warm: the book's look-ups resolved, the code compiled.
  for (const record of queued.slice(0, 1000)) enrich(record, prices);
  const priced = usPerRecord((record) => enrich(record, prices));
  const floor = usPerRecord((record) => enrich(record, unpriced));
  const calc = usPerRecord(({ record }) =>
    calcPrice(
      {
        input_tokens: record.tokens?.input ?? 0,
        output_tokens: record.tokens?.output ?? 0,
        cache_read_tokens: Math.min(record.tokens?.cachedInput ?? 0, record.tokens?.input ?? 0),
      },
      record.request.modelId,
      { providerId: record.request.provider },
    ),
  );
  log(
    `   enrich CPU per record: ${priced.median.toFixed(2)} µs priced, ${floor.median.toFixed(2)} µs without prices; calcPrice alone ${calc.median.toFixed(2)} µs`,
  );
  return { enrichUsPerRecord: priced, enrichUnpricedUsPerRecord: floor, calcPriceUsPerRecord: calc };
}

export async function benchIngester(): Promise<void> {
  log(`3. ingester throughput: ${scale.ingestRecords} records pre-filled (baseline: bare kafkajs consumer + JSON.parse)`);
  const topic = `bench.ingest.${runId}`;
  await prefillTopic(topic, 6, scale.ingestRecords, (i) => `i-${runId}-${i}`);

  const ingestRates: number[] = [];
  const bareRates: number[] = [];
  const bareCpuPerRecord: number[] = [];
  const rss: number[] = [];
  const unitRows: number[] = [];
  const unitClickhouseMs: number[] = [];
  const ingesterCpu: number[] = [];
  const ingesterClickhouseCpu: number[] = [];
  // ClickHouse's own ceiling: the same rows, enriched once up front, inserted the way a
  // hand-written loader would (HTTP, batches of INGEST_BATCH_MAX_ROWS, both tables at
  // once, their materialized views firing) into a scratch database: as JSONEachRow
  // lines and as the ingester's RowBinary rows; ClickHouse's CPU per row for each
  // (its process's user and system time over the inserts, /proc).
  const ceilingRows = sampleUsageRecords(Math.min(scale.ingestRecords, 100_000), { seed: 11, startMs: Date.now() - 3600_000 });
  const prices = PriceTable.load();
  const queued = queuedRecords(ceilingRows, { eventKey: (i) => `c-${runId}-${i}`, receivedAtMs: Date.now() });
  const enrichCost = measureEnrich(queued, prices);
  const enriched = queued.map((record) => enrich(record, prices));
  const encoded = enriched.map(encodeRow);
  const ceilingBatch = Number(process.env.INGEST_BATCH_MAX_ROWS ?? 20_000);
  const formats = ['JSONEachRow', 'RowBinary'] as const;
  const ceilingRates: Record<(typeof formats)[number], number[]> = { JSONEachRow: [], RowBinary: [] };
  const ceilingCpu: Record<(typeof formats)[number], number[]> = { JSONEachRow: [], RowBinary: [] };
  const clickhouseProcess = clickhousePid();
  for (let run = 0; run < runs; run++) {
    for (const format of formats) {
      const database = `bench_ceiling_${runId}_${run}_${format.toLowerCase()}`;
      const server = createClickHouse({ url: addresses.CLICKHOUSE_URL, database: 'default', username: 'default', password: '' });
      const scratch = createClickHouse({ url: addresses.CLICKHOUSE_URL, database, username: 'default', password: '' });
      await migrate(server, scratch, database);
      // A new installation, as the ingesters' own databases are: the legacy minute rollup's view retired.
      await markBackfilledIfEmpty(scratch);
      const cpuStart = cpuSeconds(clickhouseProcess);
      const started = performance.now();
      for (let start = 0; start < enriched.length; start += ceilingBatch) {
        if (format === 'JSONEachRow') {
          const rows = enriched.slice(start, start + ceilingBatch);
          await Promise.all([
            insertLines(
              scratch,
              'usage_events',
              rows.map((row) => JSON.stringify(row.event)),
            ),
            insertLines(
              scratch,
              'usage_io',
              rows.flatMap((row) => (row.io ? [JSON.stringify(row.io)] : [])),
            ),
          ]);
        } else {
          const rows = encoded.slice(start, start + ceilingBatch);
          await Promise.all([
            insertEncoded(
              scratch,
              INSERT_EVENTS,
              rows.map((row) => row.event),
            ),
            insertEncoded(
              scratch,
              INSERT_IO,
              rows.flatMap((row) => (row.io ? [row.io] : [])),
            ),
          ]);
        }
      }
      ceilingRates[format].push(enriched.length / ((performance.now() - started) / 1000));
      // The inserts' parts are merged after them: ClickHouse's CPU counts until its merges
      // of this database have stopped for a second (at most a minute), as a sustained load pays them.
      await waitForMerges(scratch, database, MERGES_SETTLED);
      ceilingCpu[format].push(((cpuSeconds(clickhouseProcess) - cpuStart) * 1e6) / enriched.length);
      await server.command({ query: `DROP DATABASE IF EXISTS ${database}` });
      await Promise.all([server.close(), scratch.close()]);
      log(
        `   run ${run + 1}: ClickHouse ceiling, ${format}: ${ceilingRates[format].at(-1)!.toFixed(0)} rows/s, ClickHouse CPU ${ceilingCpu[format].at(-1)!.toFixed(1)} µs per row (${enriched.length} rows, batches of ${ceilingBatch})`,
      );
    }
  }
  for (let run = 0; run < runs; run++) {
    // Baseline: read and decode the same topic, nothing else.
    const consumer = kafka.consumer({
      groupId: `bench-bare-${runId}-${run}`,
      maxBytesPerPartition: 16 * 1024 * 1024,
      maxWaitTimeInMs: 250,
    });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    let seen = 0;
    let started = 0;
    // Its CPU is this process's: nothing else runs in it meanwhile (the connection and the
    // group's join, before the first batch, included).
    const bareCpu = process.cpuUsage();
    await new Promise<void>((resolve) => {
      void consumer.run({
        eachBatch: async ({ batch }) => {
          if (started === 0) started = performance.now();
          for (const message of batch.messages) {
            const wire = decodeWire(message.value);
            if (wire.ok) JSON.parse(wire.json);
            seen++;
          }
          if (seen >= scale.ingestRecords) resolve();
        },
      });
    });
    bareRates.push(scale.ingestRecords / ((performance.now() - started) / 1000));
    const bareUsage = process.cpuUsage(bareCpu);
    bareCpuPerRecord.push((bareUsage.user + bareUsage.system) / scale.ingestRecords);
    await consumer.disconnect();

    const database = `bench_${runId}_${run}`;
    const clickhouse = createClickHouse({ url: addresses.CLICKHOUSE_URL, database, username: 'default', password: '' });
    const ingester = await startQuiet(
      'ingester',
      serviceEnv({
        USAGE_TOPIC: topic,
        CLICKHOUSE_DATABASE: database,
        INGEST_GROUP_ID: `bench-ingest-${runId}-${run}`,
        REDIS_KEY_PREFIX: `bench-${runId}-${run}:`,
        METRICS_PORT: 0,
      }),
      /ingester consuming/,
      'debug',
      run === 0
        ? profileDir('ingester', 'Ingester under the ingester section (first run, pre-filled topic)', () => scale.ingestRecords)
        : undefined,
    );
    const ingestStart = performance.now();
    const cpuStart = cpuSeconds(ingester.child.pid);
    const clickhouseCpuStart = cpuSeconds(clickhousePid());
    await waitForRows(clickhouse, scale.ingestRecords, 'the ingester');
    ingestRates.push(scale.ingestRecords / ((performance.now() - ingestStart) / 1000));
    ingesterCpu.push(((cpuSeconds(ingester.child.pid) - cpuStart) * 1e6) / scale.ingestRecords);
    await waitForMerges(clickhouse, database, MERGES_SETTLED);
    ingesterClickhouseCpu.push(((cpuSeconds(clickhousePid()) - clickhouseCpuStart) * 1e6) / scale.ingestRecords);
    rss.push(peakRssMb(ingester.child.pid));
    const units = unitTimings(ingester.logs);
    unitRows.push(percentile(units.rows, 50));
    // Under a backlog the two units in flight share the window of pending rows, and their
    // sizes alternate (one takes what the other left): the mean says what the median hides.
    const meanRows = units.rows.reduce((sum, rows) => sum + rows, 0) / Math.max(1, units.rows.length);
    unitClickhouseMs.push(percentile(units.clickhouseMs, 50));
    await ingester.stop();
    await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
    await clickhouse.close();
    log(
      `   run ${run + 1}: ingester ${ingestRates.at(-1)!.toFixed(0)} rows/s (units: p50 ${unitRows.at(-1)} rows, mean ${meanRows.toFixed(0)}, ${units.rows.length} units, ClickHouse ${unitClickhouseMs.at(-1)!.toFixed(0)} ms), bare consumer ${bareRates.at(-1)!.toFixed(0)}/s, ingester peak RSS ${rss.at(-1)!.toFixed(0)} MB`,
    );
  }
  const ingest = figure(ingestRates);
  const bare = figure(bareRates);
  // The ingester sends RowBinary: its ratio is against ClickHouse's ceiling in that format.
  const ceiling = figure(ceilingRates.RowBinary);
  const jsonCeiling = figure(ceilingRates.JSONEachRow);
  results.clickhouseCeiling = {
    rowsPerS: ceiling.median,
    rows: enriched.length,
    batchRows: ceilingBatch,
    format: 'RowBinary',
    ceiling,
    cpuUsPerRow: figure(ceilingCpu.RowBinary).median,
  };
  results.clickhouseCeilingJson = {
    rowsPerS: jsonCeiling.median,
    ceiling: jsonCeiling,
    cpuUsPerRow: figure(ceilingCpu.JSONEachRow).median,
  };
  results.ingester = {
    rowsPerSec: ingest.median,
    baselinePerSec: bare.median,
    ratio: ingest.median / bare.median,
    baselineCpuUsPerRecord: figure(bareCpuPerRecord).median,
    ratioToClickhouse: ingest.median / ceiling.median,
    cpuUsPerRecord: figure(ingesterCpu).median,
    clickhouseCpuUsPerRecord: figure(ingesterClickhouseCpu).median,
    unitRowsP50: figure(unitRows).median,
    unitClickhouseMsP50: figure(unitClickhouseMs).median,
    records: scale.ingestRecords,
    prefillCodec: PREFILL_CODEC,
    ingester: ingest,
    baseline: bare,
    ...enrichCost,
  };
  results.memory = { ...results.memory, ingesterRssMb: figure(rss).median, ingesterRss: figure(rss) };
}
