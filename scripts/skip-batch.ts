// Moves the ingesters' consumer group past a record batch they cannot decode (the
// runbook "A batch that cannot be decoded" in docs/operations.md):
//   npm run skip-batch -- --partition 3 --from 1200 --through 1219 [--reason "zstd from a broken producer"]
// --from and --through are the batch's first and last offsets, as the ingester's log
// line names them; the group must stand inside them (everything before is loaded).
// Kafka takes a group's offsets from outside only while the group has no member, so
// the ingesters are stopped first. What is skipped (topic, partition, offsets, reason)
// is written to the audit log before the offset moves (no entry, no change).
import os from 'node:os';
import { Command } from 'commander';
import { AuditLog, AuditUnavailableError } from '@otm/shared/audit';
import { clickhouseSettingsFrom, createClickHouse } from '@otm/shared/clickhouse';
import { infrastructureSpec, parseConfig, str } from '@otm/shared/config';
import { createKafka, kafkaSettingsFrom } from '@otm/shared/kafka';

const options = new Command('skip-batch')
  .description("move the ingesters' consumer group past a batch they cannot decode, writing what is skipped to the audit log")
  .requiredOption('--partition <n>', 'the partition the ingester stopped (its log line and otm_ingester_stopped_partitions)')
  .requiredOption('--from <offset>', "the undecodable batch's first offset (firstOffset in the log line)")
  .requiredOption('--through <offset>', "the undecodable batch's last offset (lastOffset in the log line)")
  .option('--topic <topic>', 'the usage topic (default: USAGE_TOPIC)')
  .option('--reason <text>', 'why it is skipped, for the audit log', 'undecodable record batch')
  .parse(process.argv)
  .opts<{ partition: string; from: string; through: string; topic?: string; reason: string }>();

const config = parseConfig(process.env, {
  ...infrastructureSpec,
  INGEST_GROUP_ID: str({ default: 'otm-ingester', desc: 'Kafka consumer group' }),
});
const partition = Number(options.partition);
if (
  ![options.partition, options.from, options.through].every((value) => /^\d+$/.test(value)) ||
  BigInt(options.from) > BigInt(options.through)
) {
  console.error('--partition, --from and --through: whole numbers, --from not after --through');
  process.exit(2);
}
const topic = options.topic ?? config.USAGE_TOPIC;
const first = BigInt(options.from);
const through = BigInt(options.through);
const groupId = config.INGEST_GROUP_ID;

const kafka = createKafka(kafkaSettingsFrom(config, 'skip-batch'));
const admin = kafka.admin();
await admin.connect();
const clickhouse = createClickHouse(clickhouseSettingsFrom(config));
try {
  const [group] = (await admin.describeGroups([groupId])).groups;
  if (group && group.members.length > 0) {
    console.error(
      `the group ${groupId} has ${group.members.length} member(s): stop the ingesters first (Kafka takes a group's offsets only while it has none)`,
    );
    process.exit(1);
  }
  const committed = (await admin.fetchOffsets({ groupId, topics: [topic] }))[0]?.partitions.find((p) => p.partition === partition);
  const from = committed && committed.offset !== '-1' ? BigInt(committed.offset) : 0n;
  if (from > through) {
    console.log(`${topic}/${partition}: the group is already at offset ${from}, past ${through}; nothing to skip`);
    process.exit(0);
  }
  if (from < first) {
    console.error(
      `${topic}/${partition}: the group is at offset ${from}, before the batch (${first}): records before it are not loaded yet; start the ingesters, let them stop at the batch, then stop them and skip`,
    );
    process.exit(1);
  }
  await new AuditLog(clickhouse).around(
    {
      actor: `cli:${os.userInfo().username}@${os.hostname()}`,
      action: 'kafka.skip',
      target: `${topic}/${partition}`,
      details: { group: groupId, fromOffset: from.toString(), throughOffset: through.toString(), reason: options.reason },
    },
    () => admin.setOffsets({ groupId, topic, partitions: [{ partition, offset: (through + 1n).toString() }] }),
  );
  console.log(`${topic}/${partition}: skipped offsets ${from}..${through} for ${groupId} (audit log: kafka.skip); start the ingesters`);
} catch (error) {
  if (error instanceof AuditUnavailableError) {
    console.error(`the audit log cannot be written, so nothing was skipped: ${error.message}`);
    process.exit(1);
  }
  throw error;
} finally {
  await admin.disconnect();
  await clickhouse.close();
}
