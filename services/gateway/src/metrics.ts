// The gateway's Prometheus metrics.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export function createGatewayMetrics(depth: () => number) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    records: new Counter({
      name: 'otm_gateway_records_total',
      help: 'Usage records by route (single, batch, otlp) and outcome (accepted: queued now; replayed: accepted before, answered again; refused: 400 or 422 for what it holds; unavailable: 503), counted alike for every route',
      labelNames: ['route', 'outcome'],
      registers: [registry],
    }),
    validationFailures: new Counter({
      name: 'otm_gateway_validation_failures_total',
      help: 'Bodies refused with 400',
      registers: [registry],
    }),
    otlpSpans: new Counter({
      name: 'otm_gateway_otlp_spans_total',
      help: 'OTLP spans by outcome (accepted: queued as a usage record; rejected: a GenAI span refused, reported in partial_success; ignored: no gen_ai.* attribute)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    replays: new Counter({
      name: 'otm_gateway_idempotent_replays_total',
      help: 'Retries answered from the replay cache',
      registers: [registry],
    }),
    produceLatency: new Histogram({
      name: 'otm_gateway_produce_seconds',
      help: 'Time from batch send to broker acknowledgement',
      labelNames: ['outcome'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    batchSize: new Histogram({
      name: 'otm_gateway_produce_batch_records',
      help: 'Records per Produce request',
      buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000],
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'otm_gateway_produce_queue_depth',
      help: 'Records waiting for a broker acknowledgement',
      registers: [registry],
      collect() {
        this.set(depth());
      },
    }),
  };
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;
