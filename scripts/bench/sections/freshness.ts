// 4. Freshness ---------------------------------------------------------------------
import fs from 'node:fs';
import { Agent, request } from 'undici';
import { createClickHouse } from '@otm/shared/clickhouse';
import { KeyStore } from '@otm/shared/keys/key-store';
import {
  quick,
  runs,
  scale,
  addresses,
  runId,
  log,
  figure,
  percentile,
  sleep,
  runSdkLoad,
  tls,
  startPipeline,
  unitTimings,
  bodies,
  bodiesFile,
  redis,
  results,
} from '../context.js';

export async function benchFreshness(): Promise<void> {
  log('4. freshness: 202 -> row visible to an analytics query, at fixed rates');
  const port = 18444;
  const agent = new Agent({ connect: { ca: fs.readFileSync(tls.certFile) } });
  // --quick measures the target rate only. From 1,000/s: the target is read at half the
  // sustained rate end to end, which falls that low in a slow hour.
  const rates = quick ? [5000] : (process.env.BENCH_FRESHNESS_RATES ?? '1000,1500,2000,2500,3000,3500,4000,5000').split(',').map(Number);
  for (const rate of rates) {
    const p50s: number[] = [];
    const p99s: number[] = [];
    const achieved: number[] = [];
    const unitP50s: number[] = [];
    const unitP99s: number[] = [];
    const clickhouseP50s: number[] = [];
    const unitRows: number[] = [];
    // One gateway and one ingester per rate, loaded by each run in turn.
    const topic = `bench.fresh.${runId}.${rate}`;
    const database = `bench_fresh_${runId}_${rate}`;
    const prefix = `bench-fresh-${runId}-${rate}:`;
    const key = await new KeyStore(redis, prefix).create({ environment: 'prod', name: 'freshness' });
    const { ingester, gateway } = await startPipeline({
      topic,
      database,
      groupId: `bench-fresh-${runId}-${rate}`,
      prefix,
      port,
      level: 'debug',
    });
    const clickhouse = createClickHouse({ url: addresses.CLICKHOUSE_URL, database, username: 'default', password: '' });
    const url = `https://127.0.0.1:${port}/v1/telemetry/usage`;
    for (let run = 0; run < runs; run++) {
      const logsBefore = ingester.logs.length;
      // The background load comes through the batch endpoint (the SDK at a fixed
      // offered rate): the single endpoint alone does not reach 5,000/s here. The
      // figure is reported at the rate achieved, beside the rate offered.
      const background = runSdkLoad({
        endpoint: `https://127.0.0.1:${port}`,
        apiKey: key.key,
        bodiesFile,
        durationSeconds: scale.freshnessSeconds,
        warmupSeconds: 0,
        flushAt: 500,
        maxConcurrentRequests: 4,
        rate,
      });
      // Markers: 10 per second, each with a user id of its own, timed from its 202.
      const accepted = new Map<string, number>();
      const visible = new Map<string, number>();
      const markerEnd = Date.now() + scale.freshnessSeconds * 1000 - 500;
      let index = 0;
      const markers = (async () => {
        while (Date.now() < markerEnd) {
          const userId = `fresh-${runId}-${run}-${index++}`;
          const record = JSON.parse(bodies[index % bodies.length]!);
          record.user.id = userId;
          const response = await request(url, {
            method: 'POST',
            dispatcher: agent,
            headers: { 'content-type': 'application/json', 'x-api-key': key.key },
            body: JSON.stringify(record),
          });
          await response.body.text();
          if (response.statusCode === 202) accepted.set(userId, performance.now());
          await sleep(100);
        }
      })();
      const poll = (async () => {
        const deadline = Date.now() + scale.freshnessSeconds * 1000 + 15_000;
        while (Date.now() < deadline) {
          const pending = [...accepted.keys()].filter((id) => !visible.has(id));
          if (pending.length > 0) {
            try {
              const result = await clickhouse.query({
                query: `SELECT user_id FROM usage_rollup_user_by_day WHERE user_id IN (${pending.map((id) => `'${id}'`).join(',')}) GROUP BY user_id`,
                format: 'JSONEachRow',
              });
              const now = performance.now();
              for (const row of await result.json<{ user_id: string }>()) visible.set(row.user_id, now);
            } catch {
              // the database appears with the ingester's first migration
            }
          } else if (Date.now() > markerEnd + 1000) break;
          await sleep(20);
        }
      })();
      const [load] = await Promise.all([background, markers, poll]);
      const delays = [...visible.entries()].map(([id, at]) => at - accepted.get(id)!);
      p50s.push(percentile(delays, 50));
      p99s.push(percentile(delays, 99));
      achieved.push(load.perSec);
      const units = unitTimings(ingester.logs.slice(logsBefore));
      unitP50s.push(percentile(units.unitMs, 50));
      unitP99s.push(percentile(units.unitMs, 99));
      clickhouseP50s.push(percentile(units.clickhouseMs, 50));
      unitRows.push(percentile(units.rows, 50));
      log(
        `   ${rate}/s run ${run + 1}: achieved ${load.perSec.toFixed(0)}/s, ${delays.length}/${accepted.size} markers seen, p50 ${percentile(delays, 50).toFixed(0)} ms, p99 ${percentile(delays, 99).toFixed(0)} ms; load units p50 ${unitP50s.at(-1)!.toFixed(0)} ms (ClickHouse ${clickhouseP50s.at(-1)!.toFixed(0)}), p99 ${unitP99s.at(-1)!.toFixed(0)} ms, ${unitRows.at(-1)} rows`,
      );
    }
    await Promise.all([gateway.stop(), ingester.stop()]);
    await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
    await clickhouse.close();
    results.freshness = {
      ...(results.freshness ?? {}),
      [`p50MsAt${rate}`]: figure(p50s).median,
      [`p99MsAt${rate}`]: figure(p99s).median,
      [`achievedPerSecAt${rate}`]: figure(achieved).median,
      [`p99At${rate}`]: figure(p99s),
      [`unitMsP50At${rate}`]: figure(unitP50s).median,
      [`unitMsP99At${rate}`]: figure(unitP99s).median,
      [`unitClickhouseMsP50At${rate}`]: figure(clickhouseP50s).median,
      [`unitRowsP50At${rate}`]: figure(unitRows).median,
    };
  }
  results.freshness = {
    ...results.freshness,
    p99Ms: results.freshness!.p99MsAt5000 as number,
    p50Ms: results.freshness!.p50MsAt5000 as number,
  };
  await agent.close();
}
