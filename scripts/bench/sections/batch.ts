// 1b. Batch ingest through the SDK ------------------------------------------------
import os from 'node:os';
import {
  runs,
  scale,
  runId,
  log,
  figure,
  sleep,
  peakRssMb,
  cpuSeconds,
  runLoad,
  runSdkLoad,
  gatewayServiceEnv,
  startBaseline,
  startQuiet,
  profileDir,
  bodiesFile,
  meanBodyBytes,
  keyPrefix,
  benchKey,
  results,
} from '../context.js';
import { cpuUsPerRecordSent } from '../per-record.js';

export async function benchBatch(): Promise<void> {
  const flushAt = 500;
  const concurrency = 4;
  log(
    `1b. batch ingest: the SDK (batches of ${flushAt}, gzip, ${concurrency} in flight) into Kafka, ingester stopped; single endpoint beside it`,
  );
  const port = 18450;
  const [baselineServer, gateway, cluster] = await Promise.all([
    startBaseline(port),
    startQuiet(
      'gateway',
      gatewayServiceEnv(`bench.batch.${runId}`, keyPrefix, port + 1),
      /gateway listening/,
      'info',
      profileDir(
        'gateway',
        'Gateway under the batch section (batch and single-record load, every run; it idles while the bare server and the one-process-per-core gateway are measured, which the idle share counts)',
        () => gatewayRecords,
      ),
    ),
    startQuiet(
      'gateway-cluster',
      { ...gatewayServiceEnv(`bench.batch.${runId}`, keyPrefix, port + 2), GATEWAY_WORKERS: String(os.availableParallelism()) },
      /gateway listening/,
    ),
  ]);
  await sleep(1500); // let every worker listen
  const sdkLoad = (endpoint: string) =>
    runSdkLoad({
      endpoint,
      apiKey: benchKey.key,
      bodiesFile,
      durationSeconds: scale.loadSeconds,
      warmupSeconds: scale.warmupSeconds,
      flushAt,
      maxConcurrentRequests: concurrency,
    });
  let gatewayRecords = 0;
  const batchRates: number[] = [];
  const batchP99: number[] = [];
  const batchP50: number[] = [];
  const baselineRates: number[] = [];
  const singleRates: number[] = [];
  const cpuPerRecord: number[] = [];
  const singleCpuPerRecord: number[] = [];
  const clusterRates: number[] = [];
  // What the bare server and the SDK generator feeding it take per record: the floor
  // under any gateway on this machine (the end-to-end summary weighs it).
  const baselineCpuPerRecord: number[] = [];
  const generatorCpuPerRecord: number[] = [];
  let refused = 0;
  for (let run = 0; run < runs; run++) {
    const baselineCpu = cpuSeconds(baselineServer.child.pid);
    const bare = await sdkLoad(`https://127.0.0.1:${port}`);
    baselineRates.push(bare.perSec);
    // The server's CPU over the whole load (its warm-up included), per record sent in it.
    baselineCpuPerRecord.push(cpuUsPerRecordSent(cpuSeconds(baselineServer.child.pid) - baselineCpu, bare));
    generatorCpuPerRecord.push(bare.cpuUsPerRecord);
    let cpu = cpuSeconds(gateway.child.pid);
    const batch = await sdkLoad(`https://127.0.0.1:${port + 1}`);
    // The gateway's CPU over the whole load too, its warm-up included, as the bare server's.
    cpuPerRecord.push(cpuUsPerRecordSent(cpuSeconds(gateway.child.pid) - cpu, batch));
    batchRates.push(batch.perSec);
    gatewayRecords += batch.sentTotal; // the profile samples the warm-up too
    batchP99.push(batch.p99Ms);
    batchP50.push(batch.p50Ms);
    refused += batch.failed + batch.dropped;
    cpu = cpuSeconds(gateway.child.pid);
    const single = await runLoad({
      url: `https://127.0.0.1:${port + 1}/v1/telemetry/usage`,
      bodiesFile,
      headers: { 'x-api-key': benchKey.key },
      connections: Number(process.env.BENCH_CONNECTIONS ?? 50),
      durationSeconds: scale.loadSeconds,
    });
    singleCpuPerRecord.push(((cpuSeconds(gateway.child.pid) - cpu) * 1e6) / single.accepted);
    gatewayRecords += single.accepted;
    singleRates.push(single.perSec);
    clusterRates.push((await sdkLoad(`https://127.0.0.1:${port + 2}`)).perSec);
    log(
      `   run ${run + 1}: batch ${batchRates.at(-1)!.toFixed(0)} records/s (p99 ${batch.p99Ms.toFixed(0)} ms per batch, ${cpuPerRecord.at(-1)!.toFixed(0)} µs CPU per record), bare Fastify ${baselineRates.at(-1)!.toFixed(0)}/s, single ${singleRates.at(-1)!.toFixed(0)}/s, batch one process per core ${clusterRates.at(-1)!.toFixed(0)}/s`,
    );
  }
  const gatewayRss = peakRssMb(gateway.child.pid);
  await Promise.all([baselineServer.stop(), gateway.stop(), cluster.stop()]);
  const batched = figure(batchRates);
  const base = figure(baselineRates);
  results.batch = {
    recordsPerS: batched.median,
    p99Ms: figure(batchP99).median,
    p50Ms: figure(batchP50).median,
    baselineRecordsPerS: base.median,
    ratio: batched.median / base.median,
    singleRecordsPerS: figure(singleRates).median,
    perCoreRecordsPerS: figure(clusterRates).median,
    gatewayCpuUsPerRecord: figure(cpuPerRecord).median,
    baselineCpuUsPerRecord: figure(baselineCpuPerRecord).median,
    generatorCpuUsPerRecord: figure(generatorCpuPerRecord).median,
    singleGatewayCpuUsPerRecord: figure(singleCpuPerRecord).median,
    gatewayRssMb: gatewayRss,
    notAccepted: refused,
    flushAt,
    requestsInFlight: concurrency,
    meanBodyBytes,
    batch: batched,
    baseline: base,
    single: figure(singleRates),
    perCore: figure(clusterRates),
    p99: figure(batchP99),
  };
}
