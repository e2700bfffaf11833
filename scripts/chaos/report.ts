// The chaos suite's figures: chaos/results/<profile>.json per Kafka profile, and
// RELIABILITY.md rendered from every profile's latest run.
import fs from 'node:fs';
import path from 'node:path';
import { format, resolveConfig } from 'prettier';
import type { ChaosReport } from './run.js';

export function resultsFile(root: string, kafkaBrokers: number): string {
  return path.join(root, 'chaos', 'results', kafkaBrokers === 1 ? 'latest.json' : `latest-${kafkaBrokers}-brokers.json`);
}

export async function writeReport(root: string, report: ChaosReport): Promise<void> {
  const file = resultsFile(root, report.kafkaBrokers);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  const reports = [1, 3]
    .map((brokers) => resultsFile(root, brokers))
    .filter((candidate) => fs.existsSync(candidate))
    .map((candidate) => JSON.parse(fs.readFileSync(candidate, 'utf8')) as ChaosReport);
  // Written as the formatter would (npm test checks it): tables aligned.
  const target = path.join(root, 'RELIABILITY.md');
  const options = (await resolveConfig(target)) ?? {};
  fs.writeFileSync(target, await format(renderReliability(reports), { ...options, filepath: target }));
}

const refusalText = (refusals: Record<string, number>) =>
  Object.entries(refusals)
    .map(([kind, count]) => `${kind}: ${count}`)
    .join(', ') || 'none';

function table(report: ChaosReport): string {
  const rows = report.scenarios.map((result) =>
    [
      `\`${result.scenario}\``,
      `${result.offeredPerS} / ${result.achievedPerS}`,
      result.acknowledged,
      result.stored,
      `**${result.missing}**`,
      `**${result.doubleCounted}**`,
      result.deadLetters,
      refusalText(result.refusals),
      result.refusalBoundSeconds !== undefined
        ? `${result.longestRefusalSeconds} (≤ ${result.refusalBoundSeconds})`
        : result.longestRefusalSeconds,
      result.slowestAnswerSeconds,
      result.maxLag,
      result.lagGrowth === undefined
        ? '-'
        : result.lagGrowthBound !== undefined
          ? `${result.lagGrowth} (≤ ${result.lagGrowthBound})`
          : result.lagGrowth,
      result.recoverySeconds ?? '-',
      result.rollupRecounts ?? 0,
      result.passed ? 'passed' : `**failed**: ${result.failure}`,
    ].join(' | '),
  );
  return [
    '| scenario | offered / achieved per s | acknowledged | stored (distinct) | missing | counted twice | dead letters | non-2xx answers (records) | longest refusal (s) | slowest answer (s) | max lag (messages) | lag growth over the fault (messages) | recovery (s) | rollup recounts | result |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows.map((row) => `| ${row} |`),
  ].join('\n');
}

export function renderReliability(reports: ChaosReport[]): string {
  const sections = reports.map((report) =>
    [
      `## ${report.kafkaBrokers === 1 ? 'Single broker (the default stack)' : `${report.kafkaBrokers} brokers (replication factor 3, min.insync.replicas 2)`}`,
      '',
      `Run ${report.startedAt} to ${report.finishedAt}: ${report.rate} records/s offered; each scenario ${report.warmSeconds} s of traffic, the fault for ${report.holdSeconds} s, then ${report.afterSeconds} s more with the fault cleared, then the topic drained. ${report.passed ? 'Every scenario passed.' : '**Not every scenario passed.**'}`,
      '',
      table(report),
      '',
      ...report.scenarios.map((result) => `- \`${result.scenario}\`: ${result.title}.`),
      '',
    ].join('\n'),
  );
  return [
    '# Reliability under faults',
    '',
    'Written by `npm run chaos` (scripts/chaos.ts); do not edit by hand. Each run starts its own',
    'stack (own folder and ports, loopback only), a gateway with two workers and an ingester whose',
    'ClickHouse connection passes through a fault proxy, and offers a fixed rate of records: about a',
    'third through `POST /v1/telemetry/usage`, the rest in batches of 50, each record with its own',
    'idempotency key, 3 % of them sent again after their 202 (replays). A record that was not',
    'acknowledged is sent again after 1 s with the same key, until the traffic stops.',
    '',
    'What the columns mean:',
    '',
    '- **acknowledged**: records answered 202 (or 202 inside a 207). **stored**: distinct event keys of',
    '  the scenario in `usage_events`. **missing**: acknowledged and not stored. **counted twice**: what',
    '  the analytics rollups (`usage_rollup_key_totals_by_minute`, one of those the dashboard and analytics API read) count beyond',
    '  the distinct stored records (negative: stored records the rollups do not count). Every other rollup',
    '  and `usage_events_by_user` are checked the same way across the database (what each counted during the',
    '  scenario against the records stored during it); a difference is named in the failure. A scenario fails on',
    '  any missing, any counted twice or not counted, any stored record',
    '  that was never sent, and any dead letter (every record sent is valid).',
    '- **rollup recounts**: load units whose rollups the ingester recounted after an insert into',
    '  `usage_events` ended without an answer (see docs/ingester.md).',
    '- **non-2xx answers**: per kind, in records (`http 503`: the whole request; `item 503`: items of a',
    '  207; `network …`: no answer, e.g. a worker killed mid-request). **longest refusal**: the longest',
    '  stretch in which every answer was a refusal; on three brokers the broker kill must keep it within',
    '  the documented leader-election bound (12 s: the controller fences a dead broker after the 6 s broker',
    "  session timeout, and a request may wait the gateway's 5 s produce timeout). **slowest answer**: the",
    '  longest a request waited for any answer.',
    "- **max lag**: the consumer group's uncommitted messages, sampled every 500 ms. **lag growth**: the",
    "  mean lag over the fault's last 10 s less that over its first 10 s (`-` for a fault shorter than 20 s); where",
    '  a scenario bounds it (in seconds of offered traffic), the ingester must keep up through the fault.',
    '  **recovery**: from',
    '  the fault cleared (the service restarted and healthy, the process resumed, the proxy passing',
    '  again) until the lag is under two seconds of offered traffic.',
    '',
    'The run fails (exit code 1) when any scenario fails. `npm test` runs one scenario (ingester',
    'kill -9, 30 s, on the test stack) and the same scenario against two deliberately broken ingesters,',
    'each of which must fail in one of up to three runs (what each breaks shows only when the kill',
    'finds a unit at the right moment, which depends on timing; a run is repeated only when the one',
    'before did not show it): one commits offsets before the insert',
    '(`INGEST_FAULT_INJECTION=commit-before-load`) and must fail with records missing; the other loads',
    "every record as new, asking neither Redis's marks nor ClickHouse's stored keys",
    '(`INGEST_FAULT_INJECTION=skip-dedupe`), and must fail with records counted twice: the unit in',
    'flight at the kill is stored and not committed, and is delivered again after the restart.',
    '',
    ...sections,
  ].join('\n');
}
