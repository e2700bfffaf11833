// 1. Gateway throughput and latency ------------------------------------------------
import os from 'node:os';
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
  startBaseline,
  startQuiet,
  bodiesFile,
  meanBodyBytes,
  keyPrefix,
  benchKey,
  results,
} from '../context.js';

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
  const rss: number[] = [];
  const port = 18443;
  const load = (url: string, extra: Record<string, unknown> = {}) =>
    runLoad({
      url,
      bodiesFile,
      headers: { 'x-api-key': benchKey.key },
      connections: Number(process.env.BENCH_CONNECTIONS ?? 50),
      durationSeconds: scale.loadSeconds,
      ...extra,
    });
  // The three servers start once and stay up; each run loads them in turn, so
  // every run's figures share the machine's conditions of that moment.
  const gatewayEnv = (gatewayPort: number) => gatewayServiceEnv(`bench.gateway.${runId}`, keyPrefix, gatewayPort);
  const [baselineServer, gateway, cluster] = await Promise.all([
    startBaseline(port),
    startQuiet('gateway', gatewayEnv(port + 4), /gateway listening/),
    startQuiet('gateway-cluster', { ...gatewayEnv(port + 5), GATEWAY_WORKERS: String(os.availableParallelism()) }, /gateway listening/),
  ]);
  await sleep(1500); // let every worker listen
  const url = (serverPort: number) => `https://127.0.0.1:${serverPort}/v1/telemetry/usage`;
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
    const at50 = await load(url(port + 4), fixed(0.5));
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
      `   run ${run + 1}: baseline ${baseline.at(-1)!.toFixed(0)}/s, gateway ${single.at(-1)!.toFixed(0)}/s, per-core ${perCore.at(-1)!.toFixed(0)}/s, p99@50% ${p99at50.at(-1)!.toFixed(1)} ms`,
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
  };
  results.memory = { ...results.memory, gatewayRssMb: figure(rss).median, gatewayRss: figure(rss) };
}
