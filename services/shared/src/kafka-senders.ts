// The producer clients a RecordSender can be opened on (KAFKA_PRODUCER_CLIENT), apart
// from kafka.ts so that neither client's file imports the other's: kafka-platformatic.ts
// takes the seam's types from kafka.ts, and only this file knows both.
import { murmur2, openKafkajsSender, type Kafka, type KafkaSettings, type RecordSender, type SenderOptions } from './kafka.js';

/** The clients a RecordSender can be opened on (KAFKA_PRODUCER_CLIENT). */
export const PRODUCER_CLIENTS = ['platformatic', 'kafkajs'] as const;
export type ProducerClient = (typeof PRODUCER_CLIENTS)[number];

/**
 * A connected RecordSender on the client named: @platformatic/kafka (about half of
 * kafkajs's CPU per record produced) or kafkajs. Both are idempotent with acks from every
 * in-sync replica and put a keyed record on the partition the Java client would.
 */
export async function openRecordSender(
  client: ProducerClient,
  kafka: Kafka,
  settings: KafkaSettings,
  options: SenderOptions,
): Promise<RecordSender> {
  if (client === 'kafkajs') return openKafkajsSender(kafka, options);
  // Loaded only by a process that produces with it (its modules take some 20 MB of memory).
  const { openPlatformaticSender } = await import('./kafka-platformatic.js');
  return openPlatformaticSender(settings, { ...options, murmur2 });
}
