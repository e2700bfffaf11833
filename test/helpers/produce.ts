// Produces queued records in the gateway's exact format (registry wire format with
// the registered schema id), for ingester tests that need volume without HTTP.
import { buildQueuedRecordSchema, type QueuedUsageRecord } from '@otm/schemas';
import { COMPRESSION_TYPES, createDurableProducer, createKafka, ensureTopic, type CompressionName } from '@otm/shared/kafka';
import { createRegistry, encodeWire, registerJsonSchema } from '@otm/shared/registry';
import { testStack } from './stack.js';

export async function registeredSchemaId(): Promise<number> {
  return registerJsonSchema(createRegistry(testStack().SCHEMA_REGISTRY_URL), 'telemetry.usage.v1-value', buildQueuedRecordSchema());
}

export async function produceQueued(
  topic: string,
  records: QueuedUsageRecord[],
  options: {
    partitions?: number;
    raw?: { key: string; value: Buffer }[];
    brokers?: string;
    /** Headers of each record's message, as the gateway sets `x-request-id`. */
    headers?: (record: QueuedUsageRecord) => Record<string, string>;
    /** The record batches' codec (none by default; the gateway's is snappy). */
    compression?: CompressionName;
  } = {},
): Promise<void> {
  const kafka = createKafka({ brokers: (options.brokers ?? testStack().KAFKA_BROKERS).split(','), clientId: 'test-producer' });
  await ensureTopic(kafka, topic, options.partitions ?? 3);
  const schemaId = await registeredSchemaId();
  const producer = createDurableProducer(kafka, { retries: 5, maxRetryTimeMs: 30_000 });
  await producer.connect();
  try {
    const messages = [
      ...records.map((record) => ({
        key: record.meta.eventKey,
        value: encodeWire(schemaId, JSON.stringify(record)),
        headers: options.headers?.(record),
      })),
      ...(options.raw ?? []),
    ];
    for (let start = 0; start < messages.length; start += 500) {
      await producer.send({
        topic,
        acks: -1,
        compression: COMPRESSION_TYPES[options.compression ?? 'none'],
        messages: messages.slice(start, start + 500),
      });
    }
  } finally {
    await producer.disconnect();
  }
}
