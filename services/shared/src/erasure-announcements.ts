// Erasures announced on a compacted topic (docs/topic-contract.md, "Erasures"): one
// message per erasure, keyed `<environment>:<userId>`, its value in the registry's wire
// format under the subject `<topic>-value`. The erasure job writes it before it reports
// done, so a downstream store that reads the topic learns of every erasure the
// pipeline has made, and when: it deletes what it holds of the user received at or
// before `erasedAt`, and drops such records that still reach it from the usage topic.
// The topic is compacted and never deletes by time: the latest announcement of every
// erased user stays, for a consumer that starts reading a year from now.
import { erasureAnnouncementSchema, QUEUED_CONTENT_TYPE, type ErasureAnnouncement } from '@otm/schemas';
import { ensureTopic, openKafkajsSender, type Kafka, type RecordSender } from './kafka.js';
import type { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { encodeWire, schemaIdFor } from './registry.js';

/** The compacted topic's settings: one message per key kept, none deleted by age. */
export const ERASURE_TOPIC_CONFIG = { 'cleanup.policy': 'compact', 'min.compaction.lag.ms': '0' } as const;

export const erasureKey = (announcement: Pick<ErasureAnnouncement, 'environment' | 'userId'>) =>
  `${announcement.environment}:${announcement.userId}`;

export class ErasureAnnouncer {
  private ready: Promise<{ sender: RecordSender; schemaId: number }> | undefined;

  constructor(
    private readonly kafka: Kafka,
    private readonly registry: SchemaRegistry,
    private readonly topic: string,
    /** Register the announcement schema (rights to write the registry), else only look it up. */
    private readonly register = true,
  ) {}

  /** Writes the announcement, acknowledged by every in-sync replica; throws when Kafka or the registry is away. */
  async announce(announcement: ErasureAnnouncement): Promise<void> {
    const ready = this.connected();
    const { sender, schemaId } = await ready;
    try {
      await sender.send(this.topic, [
        {
          key: erasureKey(announcement),
          value: encodeWire(schemaId, JSON.stringify(announcement)),
          headers: { 'content-type': QUEUED_CONTENT_TYPE, 'x-schema-id': String(schemaId) },
        },
      ]);
    } catch (error) {
      // The outcome is unknown: the next announcement gets a new sender (RecordSender).
      if (this.ready === ready) this.ready = undefined;
      await sender.close().catch(() => undefined);
      throw error;
    }
  }

  private connected(): Promise<{ sender: RecordSender; schemaId: number }> {
    this.ready ??= (async () => {
      await ensureTopic(this.kafka, this.topic, 1, 30_000, ERASURE_TOPIC_CONFIG);
      const schemaId = await schemaIdFor(this.registry, `${this.topic}-value`, erasureAnnouncementSchema, this.register);
      const sender = await openKafkajsSender(this.kafka, { retries: 5, maxRetryTimeMs: 30_000 });
      return { sender, schemaId };
    })().catch((error: unknown) => {
      this.ready = undefined;
      throw error;
    });
    return this.ready;
  }

  async close(): Promise<void> {
    const ready = this.ready;
    this.ready = undefined;
    if (ready) await (await ready.catch(() => undefined))?.sender.close();
  }
}
