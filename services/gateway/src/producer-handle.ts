// Owns one of the gateway's durable producers (a RecordSender: the Kafka seam's
// interface). After a failed or timed-out send the outcome of that request is unknown
// (it may still be written), so the handle is reset and the next batch gets a new
// sender, with a new producer id: an idempotent producer must not reuse sequence
// numbers whose fate it does not know.
import type { RecordSender } from '@otm/shared/kafka';

export class ProducerHandle {
  private sender: RecordSender | undefined;
  private connecting: Promise<RecordSender> | undefined;

  /** @param open connects a new sender (openKafkajsSender, or another client behind the seam). */
  constructor(private readonly open: () => Promise<RecordSender>) {}

  current(): Promise<RecordSender> {
    if (this.sender) return Promise.resolve(this.sender);
    this.connecting ??= (async () => {
      try {
        this.sender = await this.open();
        return this.sender;
      } finally {
        this.connecting = undefined;
      }
    })();
    return this.connecting;
  }

  async reset(): Promise<void> {
    const old = this.sender;
    this.sender = undefined;
    await old?.close().catch(() => undefined);
  }
}
