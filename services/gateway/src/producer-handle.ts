// Owns the gateway's durable producer. After a failed or timed-out send the
// outcome of that request is unknown (it may still be written), so the handle is
// reset and the next batch gets a new producer id: an idempotent producer must not
// reuse sequence numbers whose fate it does not know.
import { createDurableProducer, type Kafka, type Producer } from '@otm/shared/kafka';

export class ProducerHandle {
  private producer: Producer | undefined;
  private connecting: Promise<Producer> | undefined;

  constructor(
    private readonly kafka: Kafka,
    private readonly options: { retries: number; maxRetryTimeMs: number },
  ) {}

  current(): Promise<Producer> {
    if (this.producer) return Promise.resolve(this.producer);
    this.connecting ??= (async () => {
      const fresh = createDurableProducer(this.kafka, this.options);
      try {
        await fresh.connect();
      } catch (error) {
        await fresh.disconnect().catch(() => undefined);
        throw error;
      } finally {
        this.connecting = undefined;
      }
      this.producer = fresh;
      return fresh;
    })();
    return this.connecting;
  }

  async reset(): Promise<void> {
    const old = this.producer;
    this.producer = undefined;
    await old?.disconnect().catch(() => undefined);
  }
}
