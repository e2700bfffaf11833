// npm run chaos: faults under load, counted. Starts its own stack (.stack/chaos, own
// ports, loopback only), offers a fixed rate through the gateway while one fault at
// a time is injected and cleared, and checks that every acknowledged record is in
// ClickHouse once. Writes chaos/results/*.json and RELIABILITY.md; exits 1 when any
// scenario lost or double-counted a record.
//
//   npm run chaos [-- --kafka-brokers 3] [--scenarios a,b] [--rate 2000] [--hold 10]
import { Command, Option } from 'commander';
import { runChaos } from './chaos/run.js';
import { scenarioNames } from './chaos/scenarios.js';
import { writeReport } from './chaos/report.js';
import { projectRoot as root } from './lib/project-root.js';

const seconds = (value: string) => {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < 0 || parsed > 600) throw new Error(`not a number of seconds (0-600): ${value}`);
  return parsed;
};
const options = new Command('chaos')
  .description('Faults under load: every acknowledged record stored once, per scenario')
  .addOption(new Option('--kafka-brokers <n>', 'Kafka brokers of the chaos stack').choices(['1', '3']).default('1'))
  .option('--scenarios <names>', `comma-separated, of: ${scenarioNames.join(', ')}`, scenarioNames.join(','))
  .option('--rate <n>', 'records offered per second', (value) => Number(value), 2000)
  .option('--warm <s>', 'seconds of traffic before each fault', seconds, 5)
  .option('--hold <s>', 'seconds each fault lasts', seconds, 10)
  .option('--after <s>', 'seconds of traffic after each fault is cleared', seconds, 12)
  .option('--drain-timeout <s>', 'seconds the topic may take to drain after the traffic stops', seconds, 120)
  .option('--keep-stack', 'leave the chaos stack running afterwards (faster repeated runs)', false)
  .option('--no-write', 'print the figures only; do not write chaos/results or RELIABILITY.md')
  .parse(process.argv)
  .opts<{
    kafkaBrokers: '1' | '3';
    scenarios: string;
    rate: number;
    warm: number;
    hold: number;
    after: number;
    drainTimeout: number;
    keepStack: boolean;
    write: boolean;
  }>();
if (!Number.isInteger(options.rate) || options.rate < 1 || options.rate > 20_000) throw new Error('--rate: 1 to 20,000 records/s');

const started = Date.now();
const report = await runChaos({
  rate: options.rate,
  scenarios: options.scenarios.split(',').filter(Boolean),
  warmSeconds: options.warm,
  holdSeconds: options.hold,
  afterSeconds: options.after,
  drainTimeoutSeconds: options.drainTimeout,
  stack: { kafkaBrokers: options.kafkaBrokers === '3' ? 3 : 1, keep: options.keepStack },
});
if (options.write) await writeReport(root, report);
console.log(
  `chaos: ${report.scenarios.filter((result) => result.passed).length} of ${report.scenarios.length} scenarios passed in ${((Date.now() - started) / 1000).toFixed(0)} s${options.write ? '; figures in RELIABILITY.md' : ''}`,
);
process.exit(report.passed ? 0 : 1);
