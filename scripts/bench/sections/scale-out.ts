// 3b. Scale-out --------------------------------------------------------------------
// The same pre-filled records loaded by one ingester and by two in one consumer
// group, from a topic of 6 partitions and one of 12. Two processes on two cores
// share them with ClickHouse, the broker and Redis: the figure shows whether a second
// member adds rows/s here or only splits the same CPU.
import { createClickHouse } from '@otm/shared/clickhouse';
import { quick, addresses, runId, log, serviceEnv, startQuiet, prefillTopic, waitForRows, results } from '../context.js';

export async function benchScaleOut(): Promise<void> {
  const count = quick ? 10_000 : Number(process.env.BENCH_SCALE_RECORDS ?? 60_000);
  log(`3b. scale-out: ${count} records, 1 vs 2 ingesters, 6 vs 12 partitions`);
  const figures: Record<string, number> = {};
  for (const partitions of [6, 12]) {
    const topic = `bench.scale.${runId}.${partitions}`;
    await prefillTopic(topic, partitions, count, (i) => `s-${runId}-${partitions}-${i}`);
    for (const members of [1, 2]) {
      const database = `bench_scale_${runId}_${partitions}_${members}`;
      const env = serviceEnv({
        USAGE_TOPIC: topic,
        USAGE_TOPIC_PARTITIONS: partitions,
        CLICKHOUSE_DATABASE: database,
        INGEST_GROUP_ID: `bench-scale-${runId}-${partitions}-${members}`,
        REDIS_KEY_PREFIX: `bench-scale-${runId}-${partitions}-${members}:`,
        METRICS_PORT: 0,
      });
      // The members join together, so the clock starts once all of them are in the group.
      const ingesters = await Promise.all(Array.from({ length: members }, () => startQuiet('ingester', env, /ingester consuming/)));
      const clickhouse = createClickHouse({ url: addresses.CLICKHOUSE_URL, database, username: 'default', password: '' });
      const started = performance.now();
      await waitForRows(clickhouse, count, 'the scale-out run');
      const rate = count / ((performance.now() - started) / 1000);
      figures[`p${partitions}Ingesters${members}RowsPerS`] = rate;
      await Promise.all(ingesters.map((ingester) => ingester.stop()));
      await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
      await clickhouse.close();
      log(`   ${partitions} partitions, ${members} ingester${members > 1 ? 's' : ''}: ${rate.toFixed(0)} rows/s`);
    }
  }
  results.scaleOut = {
    ...figures,
    records: count,
    twoVsOneAt6: figures.p6Ingesters2RowsPerS! / figures.p6Ingesters1RowsPerS!,
    twoVsOneAt12: figures.p12Ingesters2RowsPerS! / figures.p12Ingesters1RowsPerS!,
  };
}
