// An open-loop load generator at a fixed rate (wrk2-style): requests are scheduled
// evenly, and each latency is measured from its scheduled time, so a stall is not
// hidden by the generator waiting for it (no coordinated omission). autocannon's
// own rate limit sends in bursts, which shows as latency of the generator itself.
// The first `warmupSeconds` (default 2) run at the same rate but are not measured:
// they open the connections (TLS handshakes on both sides) and warm the JIT of the
// server and of this generator, which otherwise shows as the tail of a short run.
// Input: one JSON argument; output: one JSON line. Loopback only, bounded in time.
import fs from 'node:fs';
import { Pool } from 'undici';

interface RateSpec {
  url: string;
  bodiesFile: string;
  headers: Record<string, string>;
  rate: number;
  durationSeconds: number;
  connections: number;
  warmupSeconds?: number;
  /** How long answers still due are awaited after the last request is sent (default 15). */
  drainSeconds?: number;
}

const spec = JSON.parse(process.argv[2]!) as RateSpec;
if (!/^https?:\/\/(127\.0\.0\.1|localhost|\[::1\])[:/]/.test(spec.url)) throw new Error('load tests target loopback only');
const bodies = JSON.parse(fs.readFileSync(spec.bodiesFile, 'utf8')) as string[];
const url = new URL(spec.url);
const pool = new Pool(url.origin, { connections: spec.connections, pipelining: 1, connect: { rejectUnauthorized: false } });
const latencies: number[] = [];
let accepted = 0;
let other = 0;
let errors = 0;
let sent = 0;
const warmupMs = Math.min(spec.warmupSeconds ?? 2, 30) * 1000;
const durationMs = warmupMs + Math.min(spec.durationSeconds, 120) * 1000;
const started = performance.now();
const pending = new Set<Promise<void>>();

function fire(scheduledAt: number) {
  const body = bodies[sent++ % bodies.length]!;
  const request = pool
    .request({ path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json', ...spec.headers }, body })
    .then(async (response) => {
      await response.body.dump();
      if (scheduledAt - started < warmupMs) return;
      latencies.push(performance.now() - scheduledAt);
      if (response.statusCode >= 200 && response.statusCode < 300) accepted++;
      else other++;
    })
    .catch(() => {
      if (scheduledAt - started >= warmupMs) errors++;
    });
  pending.add(request);
  void request.finally(() => pending.delete(request));
}

await new Promise<void>((resolve) => {
  const timer = setInterval(() => {
    const elapsed = performance.now() - started;
    const due = Math.min(Math.floor((elapsed / 1000) * spec.rate), Math.floor((durationMs / 1000) * spec.rate));
    while (sent < due) fire(started + (sent / spec.rate) * 1000);
    if (elapsed >= durationMs) {
      clearInterval(timer);
      resolve();
    }
  }, 1);
});
// Stragglers get `drainSeconds` (15 s) at most; the timer must not keep the process
// alive after them. Above a server's capacity the queue of an open-loop generator only
// grows: what is still queued then is counted as unanswered, and the connections close.
const drainMs = Math.min(spec.drainSeconds ?? 15, 15) * 1000;
await Promise.race([Promise.all(pending), new Promise((resolve) => setTimeout(resolve, drainMs).unref())]);
const unanswered = pending.size;
const failed = errors; // destroying the pool fails what is still queued: not errors of the server
await (unanswered > 0 ? pool.destroy() : pool.close()).catch(() => undefined);
latencies.sort((a, b) => a - b);
const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)] ?? NaN;
console.log(
  JSON.stringify({
    accepted,
    non2xx: other,
    errors: failed,
    unanswered,
    perSec: accepted / ((performance.now() - started - warmupMs) / 1000),
    p50Ms: at(50),
    p99Ms: at(99),
    p999Ms: at(99.9),
    durationSeconds: (performance.now() - started - warmupMs) / 1000,
  }),
);
process.exit(0);
