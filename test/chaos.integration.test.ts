// The chaos suite in the normal test run: its smoke scenario (kill -9 of the ingester
// while its insert is in flight, 30 s of traffic) on the test stack must find nothing
// lost and nothing counted twice; the same scenario against two deliberately broken
// ingesters must fail, so the suite can notice either: one commits offsets before the
// insert (records lost), the other loads every record as new (a record delivered again
// after the kill counted twice). The whole suite is `npm run chaos` (every scenario, its
// own stack).
import { describe, expect, it } from 'vitest';
import { runChaos, type BrokenBuild, type ChaosOptions } from '../scripts/chaos/run.js';
import { testStack } from './helpers/stack.js';

function smoke(brokenBuild?: BrokenBuild): Promise<Awaited<ReturnType<typeof runChaos>>> {
  const broken = brokenBuild !== undefined;
  const { KAFKA_BROKERS, SCHEMA_REGISTRY_URL, REDIS_URL, CLICKHOUSE_URL } = testStack();
  const options: ChaosOptions = {
    rate: 400,
    scenarios: ['ingester-kill'],
    // A broken build shows at the kill (the unit in flight lost, or stored twice): a short
    // tail after the restart is enough.
    warmSeconds: broken ? 4 : 6,
    holdSeconds: 6,
    afterSeconds: broken ? 4 : 12,
    drainTimeoutSeconds: 60,
    stack: { addresses: { KAFKA_BROKERS, SCHEMA_REGISTRY_URL, REDIS_URL, CLICKHOUSE_URL } },
    brokenBuild,
    log: (line) => console.log(`[chaos smoke${broken ? `, broken build (${brokenBuild})` : ''}] ${line}`),
  };
  return runChaos(options);
}

describe('chaos suite', () => {
  it('smoke: ingester killed mid-batch under 400 records/s, nothing lost, nothing counted twice', async () => {
    const report = await smoke();
    const [result] = report.scenarios;
    expect(result!.acknowledged).toBeGreaterThan(5000);
    expect(result!.missing).toBe(0);
    expect(result!.doubleCounted).toBe(0);
    expect(result!.unexpected).toBe(0);
    expect(result!.deadLetters).toBe(0);
    expect(result!.stored).toBe(result!.acknowledged);
    expect(result!.replays).toBeGreaterThan(0);
    expect(report.passed).toBe(true);
  }, 240_000);

  it('self-test: an ingester that commits offsets before the insert fails the same scenario with records missing', async () => {
    // Such a build loses records only when the kill finds offsets committed past the
    // rows stored, which depends on timing: a run of it can lose nothing (one CI run in
    // several did, on a busy machine). The suite must catch it in one of three runs; a
    // run after the first happens only when the one before lost nothing.
    let report = await smoke('commit-before-load');
    for (let attempt = 2; attempt <= 3 && report.scenarios[0]!.missing === 0; attempt++) report = await smoke('commit-before-load');
    const [result] = report.scenarios;
    expect(result!.missing).toBeGreaterThan(0);
    expect(result!.passed).toBe(false);
    expect(result!.failure).toMatch(/acknowledged records missing/);
    expect(report.passed).toBe(false);
  }, 600_000);

  it('self-test: an ingester that loads every record as new fails the same scenario with records counted twice', async () => {
    // The kill leaves the unit in flight stored and its offsets uncommitted: delivered
    // again after the restart, such a build stores it again, and the rollups count it
    // twice. Whether the kill finds a unit stored and not committed depends on timing,
    // so, as above, the suite must catch it in one of three runs.
    const doubled = (report: Awaited<ReturnType<typeof runChaos>>) => report.scenarios[0]!.doubleCounted > 0;
    let report = await smoke('skip-dedupe');
    for (let attempt = 2; attempt <= 3 && !doubled(report); attempt++) report = await smoke('skip-dedupe');
    const [result] = report.scenarios;
    expect(result!.missing).toBe(0);
    expect(result!.doubleCounted).toBeGreaterThan(0);
    // Failed for what the rollups counted (the message names the last table found off).
    expect(result!.passed).toBe(false);
    expect(report.brokenBuild).toBe('skip-dedupe');
    expect(report.passed).toBe(false);
  }, 600_000);
});
