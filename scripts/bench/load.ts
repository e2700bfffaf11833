// A closed-loop load generator process (autocannon) against one loopback URL,
// bounded in time: the maximum accepted rate. Fixed rates use rate-load.ts.
// Input: one JSON argument; output: one JSON line with the figures.
import fs from 'node:fs';
import autocannon from 'autocannon';

interface LoadSpec {
  url: string;
  bodiesFile: string;
  headers: Record<string, string>;
  connections: number;
  durationSeconds: number;
}

const spec = JSON.parse(process.argv[2]!) as LoadSpec;
if (!/^https?:\/\/(127\.0\.0\.1|localhost|\[::1\])[:/]/.test(spec.url)) throw new Error('load tests target loopback only');
const bodies = JSON.parse(fs.readFileSync(spec.bodiesFile, 'utf8')) as string[];
let sent = 0;
const result = await autocannon({
  url: spec.url,
  method: 'POST',
  connections: spec.connections,
  duration: Math.min(spec.durationSeconds, 120),
  headers: { 'content-type': 'application/json', ...spec.headers },
  // One request whose body is set as it is sent, cycling through the bodies (the same
  // order as rate-load.ts). A list of 1,000 requests made autocannon build 1,000
  // buffers per connection inside the measured window: seconds of set-up and 430 MB of
  // generator heap, which cut the measured rate of whatever it loaded by half.
  requests: [{ method: 'POST', setupRequest: (request) => ({ ...request, body: bodies[sent++ % bodies.length] }) }],
  timeout: 10,
});
const latency = result.latency as unknown as Record<string, number>;
console.log(
  JSON.stringify({
    accepted: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    perSec: result['2xx'] / result.duration,
    p50Ms: latency.p50,
    p99Ms: latency.p99,
    p999Ms: latency.p99_9 ?? latency.max,
    durationSeconds: result.duration,
  }),
);
