// 8. Kafka codecs of the gateway's record batches -----------------------------------
// For each codec KAFKA_COMPRESSION can name: the gateway under the SDK's batch load
// (accepted records/s, its CPU per record), the bytes the broker keeps per record (the
// topic's log segments on disk), and an ingester loading the same topic from the start
// (rows/s into ClickHouse, its CPU per record). The pipeline's end-to-end rate with a
// codec is at most the lower of the two rates. BENCHMARKS.md shows the table; the
// gateway's default codec is chosen from it.
import fs from 'node:fs';
import path from 'node:path';
import { createClickHouse } from '@otm/shared/clickhouse';
import {
  addresses,
  benchKey,
  bodiesFile,
  cpuSeconds,
  figure,
  gatewayServiceEnv,
  keyPrefix,
  log,
  quick,
  results,
  runId,
  runSdkLoad,
  scale,
  serviceEnv,
  sleep,
  stack,
  startQuiet,
  waitForRows,
} from '../context.js';
import { cpuUsPerRecordSent } from '../per-record.js';

const CODECS = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;

/** Bytes of a topic's log segments on the local broker's disk. */
function topicBytes(topic: string): number {
  const data = path.join(stack.dir, 'kafka', 'data');
  let bytes = 0;
  for (const folder of fs.readdirSync(data).filter((name) => name.startsWith(`${topic}-`))) {
    for (const file of fs.readdirSync(path.join(data, folder)).filter((name) => name.endsWith('.log'))) {
      bytes += fs.statSync(path.join(data, folder, file)).size;
    }
  }
  return bytes;
}

export async function benchCodecs(): Promise<void> {
  log(`8. Kafka codecs: gateway (SDK batch load) and ingester, per KAFKA_COMPRESSION`);
  const rows: Record<string, unknown>[] = [];
  for (const codec of CODECS) {
    const topic = `bench.codec.${codec}.${runId}`;
    const gateway = await startQuiet(
      'gateway',
      { ...gatewayServiceEnv(topic, keyPrefix, 18460), KAFKA_COMPRESSION: codec },
      /gateway listening/,
    );
    const rates: number[] = [];
    const gatewayCpu: number[] = [];
    let sent = 0;
    for (let run = 0; run < (quick ? 1 : 2); run++) {
      const cpu = cpuSeconds(gateway.child.pid);
      const load = await runSdkLoad({
        endpoint: gateway.url,
        apiKey: benchKey.key,
        bodiesFile,
        durationSeconds: scale.loadSeconds,
        warmupSeconds: scale.warmupSeconds,
        flushAt: 500,
        maxConcurrentRequests: 4,
      });
      gatewayCpu.push(cpuUsPerRecordSent(cpuSeconds(gateway.child.pid) - cpu, load));
      rates.push(load.perSec);
      // Every record the topic holds, the warm-up's included: what the ingester reads.
      sent += load.sentTotal;
    }
    await gateway.stop();
    await sleep(1_000);
    const bytesPerRecord = topicBytes(topic) / sent;

    // The ingester reads the whole topic from the start, into a database of its own.
    const database = `bench_codec_${codec}_${runId}`;
    const ingester = await startQuiet(
      'ingester',
      serviceEnv({
        USAGE_TOPIC: topic,
        CLICKHOUSE_DATABASE: database,
        INGEST_GROUP_ID: `bench-codec-${codec}-${runId}`,
        REDIS_KEY_PREFIX: `bench-codec-${codec}-${runId}:`,
        METRICS_PORT: 0,
      }),
      /ingester consuming/,
    );
    const clickhouse = createClickHouse({ url: addresses.CLICKHOUSE_URL, database, username: 'default', password: '' });
    const started = performance.now();
    const ingesterCpuBefore = cpuSeconds(ingester.child.pid);
    await waitForRows(clickhouse, sent, `the ingester (${codec})`);
    const seconds = (performance.now() - started) / 1000;
    const ingesterCpuUs = ((cpuSeconds(ingester.child.pid) - ingesterCpuBefore) * 1e6) / sent;
    await ingester.stop();
    await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${database}` });
    await clickhouse.close();

    const row = {
      codec,
      gatewayRecordsPerS: figure(rates).median,
      gatewayCpuUsPerRecord: figure(gatewayCpu).median,
      brokerBytesPerRecord: bytesPerRecord,
      ingesterRowsPerS: sent / seconds,
      ingesterCpuUsPerRecord: ingesterCpuUs,
      records: sent,
    };
    rows.push(row);
    log(
      `   ${codec}: gateway ${row.gatewayRecordsPerS.toFixed(0)} records/s, ${row.gatewayCpuUsPerRecord.toFixed(0)} µs CPU per record; broker ${bytesPerRecord.toFixed(0)} B per record; ingester ${row.ingesterRowsPerS.toFixed(0)} rows/s, ${ingesterCpuUs.toFixed(0)} µs CPU per record`,
    );
  }
  results.codecs = { rows };
}
