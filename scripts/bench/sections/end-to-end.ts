// 4b. End to end ------------------------------------------------------------------
// A ladder of offered rates through the batch endpoint (SDK as the client), gateway
// and ingester co-located with the whole stack. A step passes when the SDK achieved
// at least 95 % of the offered rate with nothing failed or dropped, the consumer lag
// stayed bounded (at most 5 s of records over the step's second half), the topic
// drained within 2 minutes after it, and ClickHouse holds every accepted record once
// (distinct event keys = accepted) and counts it once (the rollup's requests =
// accepted). The ladder stops at the first failing step; up to BENCH_E2E_NARROW_STEPS
// more steps (2) then halve the gap between the last step that passed (if one did) and
// the lowest that failed, to 250 records/s, each starting once the topic has drained.
// sustainedPerS is the highest offered rate of a passing step. BENCH_E2E_CAPTURE sets
// the capture policy of the steps' keys (full by default, as the floors' records are):
// metadata-only measures the pipeline for records whose prompts and responses are not
// kept, and the report then shows the ladder's figures without checking them against
// the targets (set for the floors' records, which keep them).
// BENCH_E2E_LOGS names a file the ingester's log is written to when the ladder ends, at
// debug level: each load unit's rows and the times of its dedupe, load and mark.
import fs from 'node:fs';
import { consumerLag } from '@otm/shared/kafka';
import { createClickHouse } from '@otm/shared/clickhouse';
import { KeyStore } from '@otm/shared/keys/key-store';
import { CAPTURE_POLICIES, type CapturePolicy } from '@otm/schemas';
import { clickhouseThreadKind, nodeThreadKind, perRecordUs, threadCpuSeconds } from '../../lib/thread-cpu.js';
import {
  quick,
  addresses,
  runId,
  log,
  sleep,
  takePeakRssMb,
  memorySample,
  loadUnitTotals,
  maxMemory,
  type MemorySample,
  cpuSeconds,
  machineCpuSeconds,
  stackPids,
  SdkLoadResult,
  runSdkLoad,
  startPipeline,
  bodiesFile,
  redis,
  kafka,
  results,
} from '../context.js';
import { nextNarrowingRate } from '../ladder.js';
import { clickhouseNow, partShares, partWork } from '../part-work.js';

/** How long a narrowing step waits for the failed step's records to drain. */
const DRAIN_BEFORE_NARROWING_S = 180;

/** Waits until the consumer's lag is 0 or `timeoutMs` has passed; the last lag read. */
async function drain(lagNow: () => Promise<number>, timeoutMs: number): Promise<number> {
  const started = performance.now();
  let lag = await lagNow();
  while (lag > 0 && performance.now() - started < timeoutMs) {
    await sleep(500);
    lag = await lagNow();
  }
  return lag;
}

/** The capture policy of the steps' keys: BENCH_E2E_CAPTURE, full when unset. */
function e2eCapture(value: string | undefined): CapturePolicy {
  if (value === undefined || value === '') return 'full';
  if (!(CAPTURE_POLICIES as readonly string[]).includes(value)) {
    throw new Error(`BENCH_E2E_CAPTURE must be one of ${CAPTURE_POLICIES.join(', ')}, not ${value}`);
  }
  return value as CapturePolicy;
}

export async function benchEndToEnd(): Promise<void> {
  const capture = e2eCapture(process.env.BENCH_E2E_CAPTURE);
  const stepSeconds = quick ? 10 : Number(process.env.BENCH_E2E_STEP_SECONDS ?? 60);
  const ladder = quick
    ? [1000]
    : (process.env.BENCH_E2E_RATES ?? '1000,2000,3000,4000,5000,6000,7000,8000,10000,12000').split(',').map(Number);
  const narrowSteps = quick ? 0 : Number(process.env.BENCH_E2E_NARROW_STEPS ?? 2);
  log(
    `4b. end to end: offered ${ladder.join(', ')} records/s for ${stepSeconds} s each, batch endpoint, capture policy ${capture}, until a step fails; then up to ${narrowSteps} steps between the last that passed and it`,
  );
  const topic = `bench.e2e.${runId}`;
  const database = `bench_e2e_${runId}`;
  const prefix = `bench-e2e-${runId}:`;
  const groupId = `bench-e2e-${runId}`;
  const port = 18460;
  const store = new KeyStore(redis, prefix);
  const logsFile = process.env.BENCH_E2E_LOGS;
  const { ingester, gateway } = await startPipeline({ topic, database, groupId, prefix, port, level: logsFile ? 'debug' : 'info' });
  const admin = kafka.admin();
  await admin.connect();
  const clickhouse = createClickHouse({ url: addresses.CLICKHOUSE_URL, database, username: 'default', password: '' });
  const lagNow = async () => (await consumerLag(admin, groupId, topic)).reduce((sum, partition) => sum + partition.lag, 0);
  const steps: Record<
    string,
    number | boolean | string | number[] | MemorySample | Record<string, number> | Record<string, Partial<Record<string, number>>>
  >[] = [];
  let sustained = 0;
  let records = 0;
  const cpu = { gateway: cpuSeconds(gateway.child.pid), ingester: cpuSeconds(ingester.child.pid) };
  // Where the machine's CPU goes during a step, per record: each process of the pipeline
  // and the stack, the rest (the load generator, this bench, the machine's own) by difference.
  const pids: Record<string, number | undefined> = { gateway: gateway.child.pid, ingester: ingester.child.pid, ...stackPids() };
  const cpuNow = () => ({
    machine: machineCpuSeconds(),
    processes: Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid)])),
    // The services' and ClickHouse's CPU by what their threads do (scripts/lib/thread-cpu.ts).
    threads: {
      gateway: threadCpuSeconds(pids.gateway, nodeThreadKind, 'other'),
      ingester: threadCpuSeconds(pids.ingester, nodeThreadKind, 'other'),
      clickhouse: threadCpuSeconds(pids.clickhouse, clickhouseThreadKind, 'queries'),
    },
  });
  // Each service's peak RSS over the ladder, read in stretches (the step, its drain, the
  // time between) whose peaks the report shows apart; the ladder's is the largest of them.
  const ladderPeakRss = { gateway: 0, ingester: 0 };
  const passedStepsPeakRss = { gateway: 0, ingester: 0 };
  const takePeaks = () => {
    const peaks = { gateway: takePeakRssMb(gateway.child.pid), ingester: takePeakRssMb(ingester.child.pid) };
    ladderPeakRss.gateway = Math.max(ladderPeakRss.gateway, peaks.gateway);
    ladderPeakRss.ingester = Math.max(ladderPeakRss.ingester, peaks.ingester);
    return peaks;
  };
  /** One step at `rate` records/s: measured, logged and recorded; whether it passed. */
  const step = async (rate: number): Promise<boolean> => {
    const key = await store.create({ environment: 'prod', name: `e2e-${rate}`, capture });
    takePeaks(); // what came before the step
    const lags: { at: number; lag: number }[] = [];
    let sampling = true;
    const started = performance.now();
    const cpuBefore = cpuNow();
    const partsFrom = await clickhouseNow(clickhouse);
    const unitsBefore = await loadUnitTotals(ingester);
    // Peak of each memory figure during the step, read every 5 s from the services' metrics.
    const memory: { gateway?: MemorySample; ingester?: MemorySample } = {};
    const sampler = (async () => {
      for (let tick = 0; sampling; tick++) {
        lags.push({ at: (performance.now() - started) / 1000, lag: await lagNow() });
        if (tick % 5 === 0) {
          memory.gateway = maxMemory(memory.gateway, await memorySample(gateway));
          memory.ingester = maxMemory(memory.ingester, await memorySample(ingester));
        }
        await sleep(1000);
      }
    })();
    const load = (await runSdkLoad({
      endpoint: `https://127.0.0.1:${port}`,
      apiKey: key.key,
      bodiesFile,
      durationSeconds: stepSeconds,
      warmupSeconds: 0,
      flushAt: 500,
      maxConcurrentRequests: 4,
      rate,
    })) as SdkLoadResult & { sentTotal: number; offeredPerSec: number };
    sampling = false;
    await sampler;
    const stepPeakRss = takePeaks();
    const drainStarted = performance.now();
    const lag = await drain(lagNow, 120_000);
    const drainSeconds = (performance.now() - drainStarted) / 1000;
    const drainPeakRss = takePeaks();
    const cpuAfter = cpuNow();
    // The ClickHouse inserts the step took (one load unit: one insert per table), and their size.
    const unitsAfter = await loadUnitTotals(ingester);
    const loadUnits = unitsBefore && unitsAfter ? unitsAfter.units - unitsBefore.units : NaN;
    const rowsPerUnit = unitsBefore && unitsAfter ? (unitsAfter.rows - unitsBefore.rows) / Math.max(1, loadUnits) : NaN;
    const perRecord = (seconds: number) => (seconds * 1e6) / Math.max(1, load.sentTotal);
    const cpuUsPerRecord: Record<string, number> = {};
    for (const name of Object.keys(pids)) cpuUsPerRecord[name] = perRecord(cpuAfter.processes[name]! - cpuBefore.processes[name]!);
    const machineBusy = cpuAfter.machine.busy - cpuBefore.machine.busy;
    const listed = Object.values(cpuUsPerRecord).reduce((sum, value) => sum + (Number.isFinite(value) ? value : 0), 0);
    // The hypervisor's share (steal) apart from what is left: the load generator, the bench, the machine's own work.
    cpuUsPerRecord.steal = perRecord(cpuAfter.machine.steal - cpuBefore.machine.steal);
    cpuUsPerRecord.rest = perRecord(machineBusy) - listed - (Number.isFinite(cpuUsPerRecord.steal) ? cpuUsPerRecord.steal : 0);
    cpuUsPerRecord.machine = perRecord(machineBusy);
    const threadUsPerRecord = {
      gateway: perRecordUs(cpuBefore.threads.gateway, cpuAfter.threads.gateway, load.sentTotal),
      ingester: perRecordUs(cpuBefore.threads.ingester, cpuAfter.threads.ingester, load.sentTotal),
      clickhouse: perRecordUs(cpuBefore.threads.clickhouse, cpuAfter.threads.clickhouse, load.sentTotal),
    };
    // What ClickHouse's threads spent on each table's parts over the step and its drain.
    const clickhouseParts = await partWork(clickhouse, database, partsFrom);
    // The share of the machine's CPU time in use over the step and its drain (1: every core busy).
    const machineBusyShare = machineBusy / (cpuAfter.machine.total - cpuBefore.machine.total);
    // The last rows of a unit are marked and committed after the insert: give the
    // rollup a moment to show what the commit already says.
    await sleep(1000);
    const id = key.id.replace(/'/g, '');
    const [stored] = await (
      await clickhouse.query({
        query: `SELECT uniqExact(event_key) AS n FROM usage_events WHERE api_key_id = '${id}'`,
        format: 'JSONEachRow',
      })
    ).json<{ n: string }>();
    const [counted] = await (
      await clickhouse.query({
        query: `SELECT countMerge(requests) AS n FROM usage_rollup_key_totals_by_minute WHERE api_key_id = '${id}'`,
        format: 'JSONEachRow',
      })
    ).json<{ n: string }>();
    const accepted = load.sentTotal;
    const lost = accepted - Number(stored?.n ?? 0);
    const duplicates = Number(counted?.n ?? 0) - Number(stored?.n ?? 0);
    const secondHalf = lags.filter((sample) => sample.at >= stepSeconds / 2);
    const maxLag = Math.max(0, ...lags.map((sample) => sample.lag));
    const maxLagSecondHalf = Math.max(0, ...secondHalf.map((sample) => sample.lag));
    // The lag every 5 s of the step: whether it grew, or rose and fell with the load units.
    const lagEvery5s = lags.filter((_, index) => index % 5 === 0).map((sample) => sample.lag);
    const bounded = maxLagSecondHalf <= rate * 5;
    const achievedEnough = load.perSec >= rate * 0.95;
    const passed = bounded && lag === 0 && lost === 0 && duplicates === 0 && load.failed === 0 && load.dropped === 0 && achievedEnough;
    records += accepted;
    if (passed) {
      passedStepsPeakRss.gateway = Math.max(passedStepsPeakRss.gateway, stepPeakRss.gateway, drainPeakRss.gateway);
      passedStepsPeakRss.ingester = Math.max(passedStepsPeakRss.ingester, stepPeakRss.ingester, drainPeakRss.ingester);
    }
    steps.push({
      offeredPerS: rate,
      achievedPerS: load.perSec,
      accepted,
      stored: Number(stored?.n ?? 0),
      lost,
      duplicates,
      failed: load.failed,
      dropped: load.dropped,
      maxLag,
      maxLagSecondHalf,
      lagEvery5s,
      drainSeconds,
      batchP99Ms: load.p99Ms,
      cpuUsPerRecord,
      threadUsPerRecord,
      machineBusyShare,
      loadUnits,
      rowsPerUnit,
      ...(clickhouseParts ? { clickhouseParts } : {}),
      ...(memory.gateway ? { gatewayMemory: memory.gateway } : {}),
      ...(memory.ingester ? { ingesterMemory: memory.ingester } : {}),
      peakRssMb: {
        gateway: { step: stepPeakRss.gateway, drain: drainPeakRss.gateway },
        ingester: { step: stepPeakRss.ingester, drain: drainPeakRss.ingester },
      },
      passed,
      limitedBy: !achievedEnough
        ? 'gateway (offered rate not achieved)'
        : !bounded || lag > 0
          ? 'ingester (lag grew)'
          : passed
            ? ''
            : 'loss or duplicates',
    });
    log(
      `   offered ${rate}/s: achieved ${load.perSec.toFixed(0)}/s, ${accepted} accepted, ${lost} lost, ${duplicates} counted twice, max lag ${maxLag} (${maxLagSecondHalf} in the second half), drained in ${drainSeconds.toFixed(1)} s: ${passed ? 'passed' : `failed (${steps.at(-1)!.limitedBy})`}`,
    );
    const mb = (sample?: MemorySample) =>
      sample
        ? `RSS ${sample.rssMb.toFixed(0)} MB (heap ${sample.heapUsedMb.toFixed(0)} used of ${sample.heapTotalMb.toFixed(0)}, external ${sample.externalMb.toFixed(0)}${Number.isFinite(sample.pendingMb) ? `, records waiting to load ${sample.pendingMb.toFixed(0)}` : ''})`
        : 'unknown';
    log(`   lag every 5 s: ${lagEvery5s.join(', ')}`);
    log(`   memory at its peak during the step: gateway ${mb(memory.gateway)}; ingester ${mb(memory.ingester)}`);
    log(
      `   peak RSS (VmHWM) in the step / in its drain: gateway ${stepPeakRss.gateway.toFixed(0)} / ${drainPeakRss.gateway.toFixed(0)} MB; ingester ${stepPeakRss.ingester.toFixed(0)} / ${drainPeakRss.ingester.toFixed(0)} MB`,
    );
    log(
      Number.isFinite(loadUnits)
        ? `   load units: ${loadUnits} over the step and its drain (${(loadUnits / (stepSeconds + drainSeconds)).toFixed(2)} a second), ${rowsPerUnit.toFixed(0)} rows each on average`
        : "   load units: not read (the ingester's metrics did not answer before or after the step)",
    );
    log(
      `   CPU per record: ${Object.entries(cpuUsPerRecord)
        .map(([name, us]) => `${name} ${us.toFixed(0)} µs`)
        .join(', ')}; the machine ${(machineBusyShare * 100).toFixed(0)} % busy`,
    );
    const us = (value: number | undefined) => (value === undefined ? '?' : value.toFixed(0));
    log(
      `   by thread: gateway main ${us(threadUsPerRecord.gateway.main)}, V8 helpers ${us(threadUsPerRecord.gateway.v8)}, pool ${us(threadUsPerRecord.gateway.pool)} µs; ingester main ${us(threadUsPerRecord.ingester.main)}, V8 helpers ${us(threadUsPerRecord.ingester.v8)}, pool ${us(threadUsPerRecord.ingester.pool)} µs; ClickHouse merges ${us(threadUsPerRecord.clickhouse.merges)}, the rest ${us(threadUsPerRecord.clickhouse.queries)} µs`,
    );
    if (clickhouseParts) {
      const shares = partShares(clickhouseParts).map(
        ({ group, share, newPartS, mergeS }) => `${group} ${(share * 100).toFixed(0)} % (${newPartS.toFixed(1)} + ${mergeS.toFixed(1)} s)`,
      );
      log(`   ClickHouse's part work (its threads' time writing new parts + merging): ${shares.join(', ')}`);
    }
    return passed;
  };
  let failedAt: number | undefined;
  for (const rate of ladder) {
    if (!(await step(rate))) {
      failedAt = rate;
      break;
    }
    sustained = rate;
  }
  // The ladder's steps are far apart (1,000 records/s, a tenth of two cores' limit or so):
  // between the last step that passed and the lowest that failed, the rate is narrowed
  // down by halving (each new step passes or fails as any other), so that the sustained
  // rate is known to within the ladder's spacing divided by 2^steps, not the spacing.
  for (let narrowing = 0; failedAt !== undefined && narrowing < narrowSteps; narrowing++) {
    const rate = nextNarrowingRate(sustained, failedAt);
    if (rate === undefined) break;
    // A step starts with the topic drained, as every step of the ladder did.
    if ((await drain(lagNow, DRAIN_BEFORE_NARROWING_S * 1000)) > 0) {
      log(`   not narrowed: the topic did not drain within ${DRAIN_BEFORE_NARROWING_S} s of the failed step`);
      break;
    }
    if (await step(rate)) sustained = rate;
    else failedAt = rate;
  }
  const cpuUs = {
    gateway: ((cpuSeconds(gateway.child.pid) - cpu.gateway) * 1e6) / Math.max(1, records),
    ingester: ((cpuSeconds(ingester.child.pid) - cpu.ingester) * 1e6) / Math.max(1, records),
  };
  takePeaks(); // the last drain's end to now
  const rss = ladderPeakRss;
  await admin.disconnect();
  if (logsFile) fs.writeFileSync(logsFile, `${ingester.logs.join('\n')}\n`);
  await Promise.all([gateway.stop(), ingester.stop()]);
  await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
  await clickhouse.close();
  results.endToEnd = {
    sustainedPerS: sustained,
    stepSeconds,
    capture,
    gatewayCpuUsPerRecord: cpuUs.gateway,
    ingesterCpuUsPerRecord: cpuUs.ingester,
    gatewayRssMb: rss.gateway,
    ingesterRssMb: rss.ingester,
    // The same peaks over the steps that passed and their drains alone.
    gatewayPassedStepsRssMb: passedStepsPeakRss.gateway,
    ingesterPassedStepsRssMb: passedStepsPeakRss.ingester,
    steps,
  };
}
