// 3. Ingester throughput -----------------------------------------------------------
import { decodeWire } from '@otm/shared/registry';
import { createClickHouse } from '@otm/shared/clickhouse';
import { enrich } from '../../../services/ingester/src/enrich-step.js';
import { migrate } from '../../../services/shared/src/migrate.js';
import { PriceTable } from '../../../services/ingester/src/prices.js';
import { queuedRecords, sampleUsageRecords } from '../../lib/sample-records.js';
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
  waitForRows,
  profileDir,
  kafka,
  results,
} from '../context.js';

export async function benchIngester(): Promise<void> {
  log(`3. ingester throughput: ${scale.ingestRecords} records pre-filled (baseline: bare kafkajs consumer + JSON.parse)`);
  const topic = `bench.ingest.${runId}`;
  await prefillTopic(topic, 6, scale.ingestRecords, (i) => `i-${runId}-${i}`);

  const ingestRates: number[] = [];
  const bareRates: number[] = [];
  const ceilingRates: number[] = [];
  const rss: number[] = [];
  const ingesterCpu: number[] = [];
  // ClickHouse's own ceiling: the same rows, enriched once up front, inserted the way a
  // hand-written loader would (HTTP, JSONEachRow, batches of INGEST_BATCH_MAX_ROWS, both
  // tables at once, their materialized views firing) into a scratch database.
  const ceilingRows = sampleUsageRecords(Math.min(scale.ingestRecords, 100_000), { seed: 11, startMs: Date.now() - 3600_000 });
  const prices = PriceTable.load();
  const enriched = queuedRecords(ceilingRows, { eventKey: (i) => `c-${runId}-${i}` }).map((record) => enrich(record, prices));
  const ceilingBatch = Number(process.env.INGEST_BATCH_MAX_ROWS ?? 20_000);
  for (let run = 0; run < runs; run++) {
    const database = `bench_ceiling_${runId}_${run}`;
    const server = createClickHouse({ url: addresses.CLICKHOUSE_URL, database: 'default', username: 'default', password: '' });
    const scratch = createClickHouse({ url: addresses.CLICKHOUSE_URL, database, username: 'default', password: '' });
    await migrate(server, scratch, database);
    const started = performance.now();
    for (let start = 0; start < enriched.length; start += ceilingBatch) {
      const rows = enriched.slice(start, start + ceilingBatch);
      const io = rows.flatMap((row) => (row.io ? [row.io] : []));
      await Promise.all([
        scratch.insert({ table: 'usage_events', values: rows.map((row) => row.event), format: 'JSONEachRow' }),
        io.length > 0 ? scratch.insert({ table: 'usage_io', values: io, format: 'JSONEachRow' }) : undefined,
      ]);
    }
    ceilingRates.push(enriched.length / ((performance.now() - started) / 1000));
    await server.command({ query: `DROP DATABASE IF EXISTS ${database}` });
    await Promise.all([server.close(), scratch.close()]);
    log(
      `   run ${run + 1}: ClickHouse ceiling ${ceilingRates.at(-1)!.toFixed(0)} rows/s (${enriched.length} rows, batches of ${ceilingBatch})`,
    );
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
      'info',
      run === 0
        ? profileDir('ingester', 'Ingester under the ingester section (first run, pre-filled topic)', () => scale.ingestRecords)
        : undefined,
    );
    const ingestStart = performance.now();
    const cpuStart = cpuSeconds(ingester.child.pid);
    await waitForRows(clickhouse, scale.ingestRecords, 'the ingester');
    ingestRates.push(scale.ingestRecords / ((performance.now() - ingestStart) / 1000));
    ingesterCpu.push(((cpuSeconds(ingester.child.pid) - cpuStart) * 1e6) / scale.ingestRecords);
    rss.push(peakRssMb(ingester.child.pid));
    await ingester.stop();
    await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
    await clickhouse.close();
    log(
      `   run ${run + 1}: ingester ${ingestRates.at(-1)!.toFixed(0)} rows/s, bare consumer ${bareRates.at(-1)!.toFixed(0)}/s, ingester peak RSS ${rss.at(-1)!.toFixed(0)} MB`,
    );
  }
  const ingest = figure(ingestRates);
  const bare = figure(bareRates);
  const ceiling = figure(ceilingRates);
  results.clickhouseCeiling = { rowsPerS: ceiling.median, rows: enriched.length, batchRows: ceilingBatch, ceiling };
  results.ingester = {
    rowsPerSec: ingest.median,
    baselinePerSec: bare.median,
    ratio: ingest.median / bare.median,
    ratioToClickhouse: ingest.median / ceiling.median,
    cpuUsPerRecord: figure(ingesterCpu).median,
    records: scale.ingestRecords,
    ingester: ingest,
    baseline: bare,
  };
  results.memory = { ...results.memory, ingesterRssMb: figure(rss).median, ingesterRss: figure(rss) };
}
