// A load generator process that sends through the client SDK (@otm/client), as a
// high-volume producer would: record() in a loop, batches of `flushAt`, gzip, a few
// requests in flight; at a fixed offered rate when `rate` is given, else as fast as
// the endpoint takes them. Bounded in time and to loopback. The queue is kept from
// overflowing (a producer faster than the gateway waits instead of dropping), so the
// rate achieved is what the endpoint accepts. Input: one JSON argument; output: one JSON line.
import fs from 'node:fs';
import { createClient, type UsageRecord } from '@otm/client';

interface SdkLoadSpec {
  endpoint: string;
  apiKey: string;
  bodiesFile: string;
  durationSeconds: number;
  warmupSeconds: number;
  flushAt: number;
  maxConcurrentRequests: number;
  /** Records offered per second; absent: as fast as the endpoint accepts them. */
  rate?: number;
}

const spec = JSON.parse(process.argv[2]!) as SdkLoadSpec;
if (!/^https?:\/\/(127\.0\.0\.1|localhost|\[::1\])[:/]/.test(spec.endpoint)) throw new Error('load tests target loopback only');
const records = (JSON.parse(fs.readFileSync(spec.bodiesFile, 'utf8')) as string[]).map((body) => JSON.parse(body) as UsageRecord);

/** Per-request latency (one batch), measured around the client's fetch. */
let measuring = false;
const latencies: number[] = [];
const timedFetch: typeof fetch = async (input, init) => {
  const started = performance.now();
  const response = await fetch(input, init);
  if (measuring) latencies.push(performance.now() - started);
  return response;
};

const maxQueueSize = spec.flushAt * (spec.maxConcurrentRequests + 2);
const client = createClient({
  endpoint: spec.endpoint,
  apiKey: spec.apiKey,
  flushAt: spec.flushAt,
  maxConcurrentRequests: spec.maxConcurrentRequests,
  maxQueueSize,
  fetch: timedFetch,
});

let next = 0;
let offered = 0;
async function offer(seconds: number): Promise<void> {
  const started = performance.now();
  const until = started + seconds * 1000;
  const due = () => (spec.rate ? Math.floor((spec.rate * (performance.now() - started)) / 1000) : Infinity);
  let sent = 0;
  while (performance.now() < until) {
    if (sent >= due()) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    } else if (client.stats().queued < maxQueueSize - spec.flushAt) {
      const count = Math.min(spec.flushAt, due() - sent);
      for (let i = 0; i < count; i++) client.record(records[next++ % records.length]!);
      sent += count;
      // A turn of the event loop every batch's worth, so responses are handled.
      await new Promise((resolve) => setImmediate(resolve));
    } else {
      // Full: wait rather than spin (a spinning generator takes the CPU the gateway needs).
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }
}

await offer(spec.warmupSeconds);
await client.flush(60_000);
const before = client.stats();
measuring = true;
const started = performance.now();
const cpuStarted = process.cpuUsage();
const nextBefore = next;
await offer(spec.durationSeconds);
offered = next - nextBefore;
await client.flush(60_000);
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuStarted);
measuring = false;
const after = await client.shutdown(10_000);
latencies.sort((a, b) => a - b);
const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((latencies.length * p) / 100))] ?? NaN;
console.log(
  JSON.stringify({
    accepted: after.sent - before.sent,
    perSec: (after.sent - before.sent) / seconds,
    offered,
    offeredPerSec: offered / spec.durationSeconds,
    /** Every record the client was given over the whole run, warm-up included. */
    recordedTotal: next,
    sentTotal: after.sent,
    failed: after.failed - before.failed,
    dropped: after.dropped - before.dropped,
    retries: after.retries - before.retries,
    batches: latencies.length,
    p50Ms: at(50),
    p99Ms: at(99),
    durationSeconds: seconds,
    /** The generator's own CPU (the SDK building, compressing and sending the batches) per record accepted over the measured part. */
    cpuUsPerRecord: (cpu.user + cpu.system) / Math.max(1, after.sent - before.sent),
  }),
);
