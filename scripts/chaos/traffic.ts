// The chaos suite's producer: offers a fixed rate of records, about a third through
// the single endpoint and the rest in batches of 50, every record with an idempotency
// key of its own, and keeps account of each key: acknowledged (a 202, or a 202 item
// of a 207), attempted, and every answer that was not. A key that was not
// acknowledged is sent again (same key, same body) after a pause, as a careful client
// does; some acknowledged keys are sent again on purpose (replays), and the store must
// still hold each once. Loopback only.
import { Agent, request, type Dispatcher } from 'undici';
import type { UsageRecord } from '@otm/schemas';
import { sampleUsageRecords, seededRandom } from '../../test/fixtures/sample-records.js';

export interface TrafficOptions {
  /** The gateway's base URL (https://127.0.0.1:port). */
  url: string;
  apiKey: string;
  /** PEM of the gateway's certificate (self-signed on the local stack). */
  ca: string;
  rate: number;
  /** Prefix of every idempotency key this traffic sends. */
  keyPrefix: string;
  seed: number;
  /** Requests in flight at most; beyond it the offered rate is not met (and reported so). */
  maxInFlight?: number;
}

export interface TrafficCounts {
  offered: number;
  acknowledged: number;
  attempted: number;
  replays: number;
  /** Answers that were not 202, by kind: `http 503`, `item 503`, `network ECONNRESET`... */
  refusals: Record<string, number>;
  /** Seconds of the longest stretch in which every answer was a refusal. */
  longestRefusalSeconds: number;
  /** Seconds the slowest request waited for its answer (a gateway waiting on Kafka holds requests up to its produce timeout). */
  slowestAnswerSeconds: number;
  requests: number;
}

const BATCH_SIZE = 50;
const SINGLE_SHARE = 0.3;
const REPLAY_SHARE = 0.03;
const RETRY_DELAY_MS = 1000;

export class Traffic {
  readonly acknowledged = new Set<string>();
  readonly attempted = new Set<string>();
  /** The acknowledged keys in order, for picking replays. */
  private readonly acknowledgedList: string[] = [];
  private readonly refusals = new Map<string, number>();
  private readonly agent: Agent;
  private readonly bodies: string[];
  private readonly random: () => number;
  private readonly retries: { key: string; at: number }[] = [];
  private offered = 0;
  private replays = 0;
  private requests = 0;
  private inFlight = 0;
  private running = false;
  private loop: Promise<void> | undefined;
  private readonly settled = new Set<Promise<void>>();
  private refusingSince: number | undefined;
  private longestRefusalMs = 0;
  private slowestMs = 0;

  constructor(private readonly options: TrafficOptions) {
    if (!/^https?:\/\/(127\.0\.0\.1|localhost|\[::1\])[:/]/.test(options.url)) throw new Error('chaos traffic targets loopback only');
    this.agent = new Agent({ connect: { ca: options.ca }, connections: 64, pipelining: 1 });
    // Timestamps an hour back: inside the gateway's bounds for the whole run.
    this.bodies = sampleUsageRecords(1000, { seed: options.seed, startMs: Date.now() - 3600_000 }).map((record: UsageRecord) =>
      JSON.stringify(record),
    );
    this.random = seededRandom(options.seed);
  }

  start(): void {
    this.running = true;
    this.loop = this.offer();
  }

  /** Stops offering and retrying; waits for the requests in flight to be answered. */
  async stop(): Promise<TrafficCounts> {
    this.running = false;
    await this.loop;
    await Promise.allSettled([...this.settled]);
    await this.agent.close();
    this.closeRefusal(performance.now());
    return this.counts();
  }

  counts(): TrafficCounts {
    return {
      offered: this.offered,
      acknowledged: this.acknowledged.size,
      attempted: this.attempted.size,
      replays: this.replays,
      refusals: Object.fromEntries([...this.refusals].sort(([a], [b]) => a.localeCompare(b))),
      longestRefusalSeconds: this.longestRefusalMs / 1000,
      slowestAnswerSeconds: this.slowestMs / 1000,
      requests: this.requests,
    };
  }

  private bodyOf(key: string): string {
    const index = Number(key.slice(key.lastIndexOf('-') + 1));
    return this.bodies[index % this.bodies.length]!;
  }

  /**
   * Open loop: every 10 ms the records due by the clock join a queue, whatever the
   * gateway is doing; the queue is sent while fewer than maxInFlight requests wait.
   * A slow gateway lengthens the queue (the offered count stays on schedule), and
   * the achieved rate says what it took.
   */
  private async offer(): Promise<void> {
    const started = performance.now();
    const maxInFlight = this.options.maxInFlight ?? 48;
    const queue: string[] = [];
    while (this.running) {
      const due = Math.floor((this.options.rate * (performance.now() - started)) / 1000);
      const now = performance.now();
      while (this.retries.length > 0 && this.retries[0]!.at <= now) queue.push(this.retries.shift()!.key);
      while (this.offered < due) {
        queue.push(`${this.options.keyPrefix}-${this.offered++}`);
        if (this.acknowledgedList.length > 0 && this.random() < REPLAY_SHARE) {
          // A replay of a key already acknowledged: must be answered 202 and stored once.
          queue.push(this.acknowledgedList[Math.floor(this.random() * this.acknowledgedList.length)]!);
          this.replays++;
        }
      }
      while (queue.length > 0 && this.inFlight < maxInFlight) {
        if (this.random() < SINGLE_SHARE) this.send([queue.shift()!], false);
        else this.send(queue.splice(0, BATCH_SIZE), true);
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  private send(keys: string[], asBatch: boolean): void {
    for (const key of keys) this.attempted.add(key);
    this.inFlight++;
    this.requests++;
    const sentAt = performance.now();
    const done = (asBatch ? this.postBatch(keys) : this.postSingle(keys[0]!))
      .catch((error: Error & { code?: string }) => {
        this.refuse(`network ${error.code ?? error.name}`, keys);
      })
      .finally(() => {
        this.slowestMs = Math.max(this.slowestMs, performance.now() - sentAt);
        this.inFlight--;
        this.settled.delete(done);
      });
    this.settled.add(done);
  }

  private async postSingle(key: string): Promise<void> {
    const response = await request(`${this.options.url}/v1/telemetry/usage`, {
      method: 'POST',
      dispatcher: this.agent,
      headers: { authorization: `Bearer ${this.options.apiKey}`, 'content-type': 'application/json', 'idempotency-key': key },
      body: this.bodyOf(key),
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    if (response.statusCode === 202) {
      await response.body.dump();
      this.acknowledge([key]);
    } else this.refuse(await refusalKind(response), [key]);
  }

  private async postBatch(keys: string[]): Promise<void> {
    const items = keys.map((key) => `{"idempotencyKey":${JSON.stringify(key)},${this.bodyOf(key).slice(1)}`);
    const response = await request(`${this.options.url}/v1/telemetry/usage/batch`, {
      method: 'POST',
      dispatcher: this.agent,
      headers: { authorization: `Bearer ${this.options.apiKey}`, 'content-type': 'application/json' },
      body: `[${items.join(',')}]`,
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    if (response.statusCode === 202) {
      await response.body.dump();
      this.acknowledge(keys);
    } else if (response.statusCode === 207) {
      const { results } = (await response.body.json()) as { results: { index: number; status: number }[] };
      const accepted = keys.filter((_, index) => results[index]?.status === 202);
      if (accepted.length > 0) this.acknowledge(accepted);
      for (const [index, key] of keys.entries()) {
        const status = results[index]?.status;
        if (status !== 202) this.refuse(`item ${status ?? 'missing'}`, [key]);
      }
    } else {
      this.refuse(await refusalKind(response), keys);
    }
  }

  private acknowledge(keys: string[]): void {
    for (const key of keys) {
      if (this.acknowledged.has(key)) continue;
      this.acknowledged.add(key);
      this.acknowledgedList.push(key);
    }
    this.closeRefusal(performance.now());
  }

  private refuse(kind: string, keys: string[]): void {
    this.refusals.set(kind, (this.refusals.get(kind) ?? 0) + keys.length);
    this.refusingSince ??= performance.now();
    if (!this.running) return;
    const at = performance.now() + RETRY_DELAY_MS;
    for (const key of keys) if (!this.acknowledged.has(key)) this.retries.push({ key, at });
  }

  private closeRefusal(now: number): void {
    if (this.refusingSince === undefined) return;
    this.longestRefusalMs = Math.max(this.longestRefusalMs, now - this.refusingSince);
    this.refusingSince = undefined;
  }
}

/** `http 503: The key store is unreachable; retry later.`: the status and the error body's message, so a refusal says what it was. */
async function refusalKind(response: Dispatcher.ResponseData): Promise<string> {
  const text = await response.body.text().catch(() => '');
  let message = '';
  try {
    message = String((JSON.parse(text) as { message?: unknown }).message ?? '');
  } catch {
    // Not the documented error body: the status alone.
  }
  return message ? `http ${response.statusCode}: ${message.slice(0, 80)}` : `http ${response.statusCode}`;
}
