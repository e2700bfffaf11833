// The freshness canary: every interval, one record sent through the public ingest
// endpoint with the canary's own API key, then ClickHouse asked until the record is
// there. The time from send to queryable is the pipeline's freshness as a user sees
// it (gateway, Kafka, the consumer's backlog, the load), exported as a histogram.
// Canary records load into canary_probes, never usage_events (consumer.ts), so no
// analytics query or rollup counts them.
import https from 'node:https';
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import type { Logger } from '@otm/shared/logger';
import type { Histogram, Counter } from 'prom-client';
import { formatDateTime, sqlString } from '@otm/shared/clickhouse-values';
import type { QueuedUsageRecord } from '@otm/schemas';

export interface CanaryOptions {
  /** The gateway's base URL (https://host:port). */
  gatewayUrl: string;
  apiKey: string;
  /** PEM certificates to trust instead of the system's (the local stack's self-signed one). */
  ca?: string;
  intervalMs: number;
  /** A probe not queryable after this long counts as a timeout. */
  timeoutMs: number;
  /** True once the consumer recognises the canary's records (its key id is known); no probe is sent before. */
  ready: () => Promise<boolean>;
}

export interface CanaryMetrics {
  freshness: Histogram;
  probes: Counter<'outcome'>;
}

/** The record a probe sends: a minimal valid usage record, marked as the canary's. */
export function probeRecord(now: Date): string {
  const at = now.toISOString();
  return JSON.stringify({
    request: { modelId: 'otm-canary', provider: 'otm', status: 'success' },
    user: { id: 'otm-canary', type: 'internal' },
    tokens: { input: 0, output: 0 },
    timing: { startTime: at, firstTokenTime: at, lastTokenTime: at },
    io: { prompt: 'otm freshness canary', response: 'ok' },
    context: { canary: true },
  });
}

/** Whether ClickHouse holds the probe (canary_probes, loaded by the consumer). */
export async function probeArrived(clickhouse: ClickHouseClient, probeId: string): Promise<boolean> {
  const result = await clickhouse.query({
    query: `SELECT count() AS n FROM canary_probes WHERE probe_id = ${sqlString(probeId)}`,
    format: 'JSONEachRow',
  });
  const [row] = await result.json<{ n: string }>();
  return Number(row?.n ?? 0) > 0;
}

/** How long the gateway may not answer the canary before it is a warning (at start it comes up a moment after the ingester). */
export const GATEWAY_SILENCE_WARN_MS = 60_000;

/**
 * The gateway not answering the canary: said at info while it has been so for less than
 * GATEWAY_SILENCE_WARN_MS (a start, a restart), at warn after that.
 */
export class GatewaySilence {
  private since: number | undefined;

  constructor(private readonly now: () => number = Date.now) {}

  /** A probe found no gateway: the level to say it at. */
  unanswered(): 'info' | 'warn' {
    this.since ??= this.now();
    return this.now() - this.since >= GATEWAY_SILENCE_WARN_MS ? 'warn' : 'info';
  }

  answered(): void {
    this.since = undefined;
  }
}

export class FreshnessCanary {
  private readonly silence = new GatewaySilence();
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private probing: Promise<void> | undefined;

  constructor(
    private readonly options: CanaryOptions,
    private readonly clickhouse: ClickHouseClient,
    private readonly metrics: CanaryMetrics,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.running = true;
    const tick = () => {
      if (!this.running) return;
      this.probing = this.probe().finally(() => {
        if (this.running) this.timer = setTimeout(tick, this.options.intervalMs);
      });
    };
    this.timer = setTimeout(tick, Math.min(this.options.intervalMs, 1000));
  }

  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    await this.probing;
  }

  /** One probe: send, then ask ClickHouse every 250 ms until it is there or the timeout. */
  async probe(): Promise<void> {
    if (!(await this.options.ready())) {
      this.metrics.probes.inc({ outcome: 'key_unknown' });
      this.logger.warn('canary: its API key is not in the key store; no probe sent');
      return;
    }
    const probeId = `otm-canary-${randomUUID()}`;
    const started = performance.now();
    let answer: { status: number; body: string };
    try {
      answer = await this.send(probeId);
    } catch (error) {
      this.metrics.probes.inc({ outcome: 'send_failed' });
      const level = this.silence.unanswered();
      this.logger[level](
        { err: (error as Error).message },
        level === 'warn' ? 'canary: the gateway did not answer' : 'canary: the gateway did not answer (yet); probing again',
      );
      return;
    }
    this.silence.answered();
    if (answer.status !== 202) {
      this.metrics.probes.inc({ outcome: 'refused' });
      this.logger.warn({ status: answer.status, answer: answer.body.slice(0, 500) }, 'canary: the gateway refused the probe');
      return;
    }
    while (performance.now() - started < this.options.timeoutMs) {
      if (await this.arrived(probeId)) {
        const seconds = (performance.now() - started) / 1000;
        this.metrics.freshness.observe(seconds);
        this.metrics.probes.inc({ outcome: 'loaded' });
        this.logger.debug({ probeId, seconds }, 'canary loaded');
        return;
      }
      if (!this.running) return;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    this.metrics.probes.inc({ outcome: 'timeout' });
    this.logger.warn({ probeId, timeoutMs: this.options.timeoutMs }, 'canary: probe not queryable within the timeout');
  }

  private async arrived(probeId: string): Promise<boolean> {
    try {
      return await probeArrived(this.clickhouse, probeId);
    } catch {
      return false; // ClickHouse down: the probe is late, which is what it measures
    }
  }

  private send(probeId: string): Promise<{ status: number; body: string }> {
    const url = new URL('/v1/telemetry/usage', this.options.gatewayUrl);
    const body = probeRecord(new Date());
    const transport = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      const request = transport.request(
        url,
        {
          method: 'POST',
          headers: {
            authorization: `Bearer ${this.options.apiKey}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            'idempotency-key': probeId,
          },
          ...(this.options.ca ? { ca: this.options.ca } : {}),
          timeout: 10_000,
        },
        (response) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (text = (text + chunk).slice(0, 2000)));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
          response.on('error', reject);
        },
      );
      request.on('timeout', () => request.destroy(new Error('timed out after 10 s')));
      request.on('error', reject);
      request.end(body);
    });
  }
}

/** The canary_probes row (a JSON line) of a probe record the ingester took from the topic. */
export function probeRow(queued: QueuedUsageRecord): string {
  const receivedMs = Date.parse(queued.meta.receivedAt);
  return JSON.stringify({
    probe_id: queued.meta.idempotencyKey ?? queued.meta.requestId,
    received_at_ms: Number.isFinite(receivedMs) && receivedMs > 0 ? receivedMs : 0,
    loaded_at: formatDateTime(Date.now()),
  });
}

/**
 * The freshness canary's key id, looked up by the key's hash: the key may be created
 * after the ingester starts, and until it is found nothing is treated as a probe.
 */
export class CanaryKey {
  id: string | undefined;
  constructor(private readonly find: () => Promise<string | undefined>) {}
  /** Looks the key up unless it is known; whether it is known now. */
  async found(): Promise<boolean> {
    this.id ??= await this.find().catch(() => undefined);
    return this.id !== undefined;
  }
}
