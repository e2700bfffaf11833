// npm run bench [-- --quick] [-- --runs N]   (npm run bench --quick works too)
// Measures the pipeline on this machine against baselines measured in the same run,
// each figure the median of several runs (min and max kept), and writes
// bench/results/latest.json and BENCHMARKS.md. Never fails on a number. All load
// targets loopback and is bounded in count and time.
import { deleteRunRedisKeys, deleteRunTopics, redis, section } from './bench/context.js';
import { benchGateway } from './bench/sections/gateway.js';
import { benchBatch } from './bench/sections/batch.js';
import { benchProduce } from './bench/sections/produce.js';
import { benchIngester } from './bench/sections/ingester.js';
import { benchLookup } from './bench/sections/lookup.js';
import { benchScaleOut } from './bench/sections/scale-out.js';
import { benchFreshness } from './bench/sections/freshness.js';
import { benchEndToEnd } from './bench/sections/end-to-end.js';
import { benchRevocation } from './bench/sections/revocation.js';
import { benchRedaction } from './bench/sections/redaction.js';
import { benchHostile } from './bench/sections/hostile.js';
import { benchCodecs } from './bench/sections/codecs.js';
import { benchAnalytics } from './bench/sections/analytics.js';
import { benchKafkaClients } from './bench/sections/kafka-clients.js';
import { writeReport } from './bench/report.js';

// In this order: each section starts and stops its own services.
const sections: [string, () => Promise<void>][] = [
  ['gateway', benchGateway],
  ['batch', benchBatch],
  ['produce', benchProduce],
  ['ingester', benchIngester],
  ['lookup', benchLookup],
  ['scaleOut', benchScaleOut],
  ['freshness', benchFreshness],
  ['endToEnd', benchEndToEnd],
  ['revocation', benchRevocation],
  ['redaction', benchRedaction],
  ['hostile', benchHostile],
  ['codecs', benchCodecs],
  ['analytics', benchAnalytics],
  ['kafkaClients', benchKafkaClients],
];
for (const [name, run] of sections) {
  if (!section(name)) continue;
  await run();
  await deleteRunRedisKeys();
}
await writeReport(sections.map(([name]) => name).filter(section));
await deleteRunTopics();
await deleteRunRedisKeys(true);
redis.disconnect();
process.exit(0);
