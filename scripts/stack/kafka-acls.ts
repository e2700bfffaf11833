// Kafka's authorizer on the secure profile: every service signs in as a principal of its
// own and may do only what it needs (serviceAcls, the table docs/production.md gives for a
// managed cluster); the operator (`otm`: tooling and the tests' own clients), the broker,
// the PLAIN and mTLS test clients are super users. Topics are created by the operator
// before the services start: no service may create one.
// Relative, not @otm/shared, and nothing that imports a workspace package: the test
// setup loads this file (through services.ts) before any workspace is built.
import { createKafka, ensureTopic, grantAcls, type AclGrant } from '../../services/shared/src/kafka.js';
import { infrastructureSpec } from '../../services/shared/src/config.js';
import { stackAddresses, type StackConfig } from './config.js';
import { secureKafkaClient } from './kafka.js';
import { SECURE_USERS } from './secure.js';

/** What the services' Kafka rights are about: the topics and the ingesters' consumer group. */
export interface PipelineNames {
  usageTopic: string;
  dlqTopic: string;
  erasureTopic: string;
  /** INGEST_GROUP_ID. */
  ingestGroup: string;
}

/** The services' defaults (the ingester's INGEST_GROUP_ID is its own config's; kafka-acls.test.ts holds them equal). */
export const DEFAULT_PIPELINE_NAMES: PipelineNames = {
  usageTopic: infrastructureSpec.USAGE_TOPIC.default!,
  dlqTopic: infrastructureSpec.DLQ_TOPIC.default!,
  erasureTopic: infrastructureSpec.ERASURE_TOPIC.default!,
  ingestGroup: 'otm-ingester',
};

/** The erasure topic's settings (ERASURE_TOPIC_CONFIG of erasure-announcements.ts; kafka-acls.test.ts holds them equal). */
export const ERASURE_TOPIC_SETTINGS = { 'cleanup.policy': 'compact', 'min.compaction.lag.ms': '0' };

/** The least each service needs (its principal, `User:<name>`), nothing else. */
export function serviceAcls(names: PipelineNames, principals = SERVICE_PRINCIPALS): AclGrant[] {
  const topic = (principal: string, name: string, operations: AclGrant['operations']): AclGrant => ({
    principal,
    resource: 'topic',
    name,
    operations,
  });
  return [
    // The gateway writes records (idempotently: WRITE on the topic is enough for that).
    topic(principals.gateway, names.usageTopic, ['describe', 'write']),
    // The ingester reads them in its group, writes dead letters, checks the erasure topic is there.
    topic(principals.ingester, names.usageTopic, ['describe', 'read']),
    { principal: principals.ingester, resource: 'group', name: names.ingestGroup, operations: ['describe', 'read'] },
    topic(principals.ingester, names.dlqTopic, ['describe', 'write']),
    topic(principals.ingester, names.erasureTopic, ['describe']),
    // The admin service announces erasures and reads the ingesters' lag (GET /v1/pipeline).
    topic(principals.admin, names.erasureTopic, ['describe', 'write']),
    topic(principals.admin, names.usageTopic, ['describe']),
    { principal: principals.admin, resource: 'group', name: names.ingestGroup, operations: ['describe'] },
  ];
}

export const SERVICE_PRINCIPALS = {
  gateway: `User:${SECURE_USERS.kafkaGateway}`,
  ingester: `User:${SECURE_USERS.kafkaIngester}`,
  admin: `User:${SECURE_USERS.kafkaAdmin}`,
} as const;

/** As the operator: the pipeline's topics (partitions as the services would make them), then every service's rights on them. */
export async function preparePipelineTopics(
  config: StackConfig,
  names: PipelineNames,
  usagePartitions = infrastructureSpec.USAGE_TOPIC_PARTITIONS.default!,
): Promise<void> {
  const kafka = createKafka({
    brokers: [stackAddresses(config).KAFKA_BROKERS],
    clientId: 'otm-stack',
    security: secureKafkaClient(config),
  });
  await ensureTopic(kafka, names.usageTopic, usagePartitions);
  await ensureTopic(kafka, names.dlqTopic, 1);
  await ensureTopic(kafka, names.erasureTopic, 1, 30_000, ERASURE_TOPIC_SETTINGS);
  await grantAcls(kafka, serviceAcls(names));
}
