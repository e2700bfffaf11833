// 1. Gateway throughput and latency ------------------------------------------------
import fs from 'node:fs';
import os from 'node:os';
import { bucketsSince, histogramBuckets, histogramQuantile, metricValue } from '../../lib/histogram.js';
import {
  runs,
  scale,
  runId,
  log,
  figure,
  sleep,
  peakRssMb,
  runLoad,
  gatewayServiceEnv,
  machineCpuSeconds,
  startBaseline,
  startQuiet,
  bodiesFile,
  meanBodyBytes,
  keyPrefix,
  benchKey,
  results,
  profileDir,
} from '../context.js';

/** prom-client samples the event loop's delay every 10 ms (monitorEventLoopDelay's resolution), which its figures include. */
const EVENT_LOOP_RESOLUTION_MS = 10;

/**
 * What the gateway measured itself over a fixed-rate load, to set beside what the load
 * generator saw: its own time per single record (otm_gateway_request_seconds, from the
 * request's arrival in Fastify to its answer), the event loop's delay past its timer
 * (prom-client's figures, reset at each scrape), and how busy its main thread was.
 */
async function gatewayOwnView<T>(gateway: { metricsPort?: number; child: { pid?: number } }, load: () => Promise<T>) {
  const scrape = async () => (await fetch(`http://127.0.0.1:${gateway.metricsPort}/metrics`)).text();
  const pid = gateway.child.pid!;
  const ranNs = () => Number(fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]);
  const series = 'otm_gateway_request_seconds';
  const route = { route: '/v1/telemetry/usage' };
  const before = histogramBuckets(await scrape(), series, route);
  const ran = ranNs();
  const machine = machineCpuSeconds();
  const started = performance.now();
  const result = await load();
  const wallMs = performance.now() - started;
  const busy = (ranNs() - ran) / 1e6 / wallMs;
  const machineAfter = machineCpuSeconds();
  const steal = (machineAfter.steal - machine.steal) / (machineAfter.total - machine.total);
  const text = await scrape();
  const counted = bucketsSince(histogramBuckets(text, series, route), before);
  const lagMs = (name: string) => metricValue(text, `nodejs_eventloop_lag_${name}_seconds`) * 1000 - EVENT_LOOP_RESOLUTION_MS;
  return {
    result,
    ownP50Ms: histogramQuantile(counted, 0.5) * 1000,
    ownP99Ms: histogramQuantile(counted, 0.99) * 1000,
    loopDelayP99Ms: lagMs('p99'),
    loopDelayMaxMs: lagMs('max'),
    mainThreadBusy: busy,
    machineSteal: steal,
  };
}

export async function benchGateway(): Promise<void> {
  log('1. gateway throughput and latency (baseline: bare Fastify with TLS)');
  const baseline: number[] = [];
  const single: number[] = [];
  const perCore: number[] = [];
  const p50at50: number[] = [];
  const p99at50: number[] = [];
  const p999at50: number[] = [];
  const p99at80: number[] = [];
  const baselineP99at50: number[] = [];
  const non2xx: number[] = [];
  const ownP50at50: number[] = [];
  const ownP99at50: number[] = [];
  const loopP99at50: number[] = [];
  const loopMaxAt50: number[] = [];
  const busyAt50: number[] = [];
  const stealAt50: number[] = [];
  const rss: number[] = [];
  const port = 18443;
  // What the single-record gateway accepted over the whole section (its profile's records).
  let gatewayRecords = 0;
  const load = async (url: string, extra: Record<string, unknown> = {}) => {
    const result = await runLoad({
      url,
      bodiesFile,
      headers: { 'x-api-key': benchKey.key },
      connections: Number(process.env.BENCH_CONNECTIONS ?? 50),
      durationSeconds: scale.loadSeconds,
      ...extra,
    });
    if (url.includes(`:${port + 4}/`)) gatewayRecords += result.accepted;
    return result;
  };
  // The three servers start once and stay up; each run loads them in turn, so
  // every run's figures share the machine's conditions of that moment.
  const gatewayEnv = (gatewayPort: number) => gatewayServiceEnv(`bench.gateway.${runId}`, keyPrefix, gatewayPort);
  const [baselineServer, gateway, cluster] = await Promise.all([
    startBaseline(port),
    startQuiet(
      'gateway',
      gatewayEnv(port + 4),
      /gateway listening/,
      'info',
      profileDir(
        'gateway-single',
        'Gateway under the gateway section (single records: its warm-up, maximum, 50 % and 80 % runs; it idles while the bare server and the one-process-per-core gateway are measured, which the idle share counts)',
        () => gatewayRecords,
      ),
    ),
    startQuiet('gateway-cluster', { ...gatewayEnv(port + 5), GATEWAY_WORKERS: String(os.availableParallelism()) }, /gateway listening/),
  ]);
  await sleep(1500); // let every worker listen
  const url = (serverPort: number) => `https://127.0.0.1:${serverPort}/v1/telemetry/usage`;
  // Each server warmed at its maximum before the first run, as the fixed rates are warmed
  // before theirs: a process's first seconds (its compiler, its connections, the
  // producer's first batches) are not what it does after; the first run's maximum was
  // about half the later runs' without it.
  for (const serverPort of [port, port + 4, port + 5])
    await load(url(serverPort), { durationSeconds: Math.max(1, scale.warmupSeconds * 2) });
  for (let run = 0; run < runs; run++) {
    baseline.push((await load(url(port))).perSec);
    const max = await load(url(port + 4));
    single.push(max.perSec);
    non2xx.push(max.non2xx + max.errors);
    // Fixed rates: measured after a warm-up at the same rate (connections, JIT).
    const fixed = (share: number) => ({
      rate: Math.max(1, Math.floor(max.perSec * share)),
      durationSeconds: scale.latencySeconds,
      warmupSeconds: scale.warmupSeconds,
    });
    const own = await gatewayOwnView(gateway, () => load(url(port + 4), fixed(0.5)));
    const at50 = own.result;
    ownP50at50.push(own.ownP50Ms);
    ownP99at50.push(own.ownP99Ms);
    loopP99at50.push(own.loopDelayP99Ms);
    loopMaxAt50.push(own.loopDelayMaxMs);
    busyAt50.push(own.mainThreadBusy);
    stealAt50.push(own.machineSteal);
    p50at50.push(at50.p50Ms);
    p99at50.push(at50.p99Ms);
    p999at50.push(at50.p999Ms);
    const at80 = await load(url(port + 4), fixed(0.8));
    p99at80.push(at80.p99Ms);
    // The floor under those latencies: the bare server at the same rate, same generator.
    baselineP99at50.push((await load(url(port), fixed(0.5))).p99Ms);
    rss.push(peakRssMb(gateway.child.pid));
    perCore.push((await load(url(port + 5))).perSec);
    log(
      `   run ${run + 1}: baseline ${baseline.at(-1)!.toFixed(0)}/s, gateway ${single.at(-1)!.toFixed(0)}/s, per-core ${perCore.at(-1)!.toFixed(0)}/s, p99@50% ${p99at50.at(-1)!.toFixed(1)} ms (its own ${own.ownP99Ms.toFixed(1)} ms; event loop delay p99 ${own.loopDelayP99Ms.toFixed(1)}, max ${own.loopDelayMaxMs.toFixed(1)} ms; main thread ${(100 * own.mainThreadBusy).toFixed(0)} % busy; the machine's steal ${(100 * own.machineSteal).toFixed(1)} %)`,
    );
  }
  await Promise.all([baselineServer.stop(), gateway.stop(), cluster.stop()]);
  const singleFigure = figure(single);
  const base = figure(baseline);
  results.gateway = {
    recordsPerSec: singleFigure.median,
    baselinePerSec: base.median,
    ratio: singleFigure.median / base.median,
    perCoreRecordsPerSec: figure(perCore).median,
    p50Ms: figure(p50at50).median,
    p99Ms: figure(p99at50).median,
    p999Ms: figure(p999at50).median,
    p99MsAt80: figure(p99at80).median,
    baselineP99Ms: figure(baselineP99at50).median,
    non2xxAtMax: figure(non2xx).median,
    meanBodyBytes,
    single: singleFigure,
    baseline: base,
    perCore: figure(perCore),
    p99At50: figure(p99at50),
    p99At80: figure(p99at80),
    baselineP99At50: figure(baselineP99at50),
    // At 50 % of max, as the gateway measured itself (its warm-up at the same rate included).
    ownP50At50: figure(ownP50at50),
    ownP99At50: figure(ownP99at50),
    eventLoopDelayP99At50: figure(loopP99at50),
    eventLoopDelayMaxAt50: figure(loopMaxAt50),
    mainThreadBusyAt50: figure(busyAt50),
    machineStealAt50: figure(stealAt50),
  };
  results.memory = { ...results.memory, gatewayRssMb: figure(rss).median, gatewayRss: figure(rss) };
}
