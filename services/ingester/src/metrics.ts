import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** What the lag gauges read at scrape time (server.ts wires them to Kafka and the consumer). */
export interface LagSources {
  /** Messages not committed, per partition of the usage topic. */
  lag(): Promise<{ partition: number; lag: number }[]>;
  /** Kafka timestamp (ms) of the oldest message taken but not yet loaded, if any. */
  oldestPendingMs(): number | undefined;
  /** The least interval between the starts of two load units now, ms (it follows the load). */
  unitIntervalMs?(): number;
  /** The records taken and not yet loaded: how many, and their bytes as fetched. */
  pending?(): { rows: number; bytes: number };
}

export function createIngesterMetrics(sources?: LagSources) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  if (sources) {
    new Gauge({
      name: 'otm_ingester_consumer_lag_messages',
      help: 'Messages of the usage topic the consumer group has not committed, per partition (read from Kafka at scrape time)',
      labelNames: ['partition'],
      registers: [registry],
      async collect() {
        try {
          const partitions = await sources.lag();
          this.reset();
          for (const { partition, lag } of partitions) this.set({ partition: String(partition) }, lag);
        } catch {
          // Kafka not answering: the series go stale rather than report a guess.
          this.reset();
        }
      },
    });
    /** A gauge read from the consumer at scrape time. */
    const sampled = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          this.set(read());
        },
      });
    sampled(
      'otm_ingester_oldest_unloaded_age_seconds',
      'Age of the oldest record the ingester has taken and not yet loaded (0 when none waits)',
      () => {
        const oldest = sources.oldestPendingMs();
        return oldest === undefined ? 0 : Math.max(0, (Date.now() - oldest) / 1000);
      },
    );
    const unitIntervalMs = sources.unitIntervalMs?.bind(sources);
    if (unitIntervalMs) {
      sampled(
        'otm_ingester_unit_interval_seconds',
        "The least time between the starts of two load units now: the recent units' load time divided by INGEST_UNIT_LOAD_SHARE, and at least INGEST_UNIT_INTERVAL_MS times the recent rows a second divided by INGEST_UNIT_FULL_RATE, between INGEST_UNIT_INTERVAL_MIN_MS and INGEST_UNIT_INTERVAL_MS",
        () => unitIntervalMs() / 1000,
      );
    }
    const pending = sources.pending?.bind(sources);
    if (pending) {
      sampled(
        'otm_ingester_pending_records',
        'Records taken from the usage topic and not yet loaded (at most INGEST_MAX_PENDING_ROWS, but for a single chunk larger than the window)',
        () => pending().rows,
      );
      sampled(
        'otm_ingester_pending_bytes',
        'Bytes of the records taken and not yet loaded, as fetched (at most INGEST_MAX_PENDING_BYTES, but for a single record larger than the window)',
        () => pending().bytes,
      );
    }
  }
  return {
    registry,
    records: new Counter({
      name: 'otm_ingester_records_total',
      help: 'Records taken from the usage topic, by how each left the pipeline (loaded, probe, duplicate, erased, deadLetter)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    rowsLoaded: new Counter({ name: 'otm_ingester_rows_loaded_total', help: 'Rows inserted into ClickHouse', registers: [registry] }),
    keyCollisions: new Counter({
      name: 'otm_ingester_event_key_collisions_total',
      help: 'Records dead-lettered because their event key was loaded with a different record',
      registers: [registry],
    }),
    duplicatesDropped: new Counter({
      name: 'otm_ingester_duplicates_dropped_total',
      help: 'Records dropped as already loaded',
      registers: [registry],
    }),
    erasedDropped: new Counter({
      name: 'otm_ingester_erased_dropped_total',
      help: 'Records of an erased user received before the erasure, dropped instead of loaded',
      registers: [registry],
    }),
    deadLetters: new Counter({
      name: 'otm_ingester_dead_letters_total',
      help: 'Messages sent to the dead-letter topic',
      registers: [registry],
    }),
    undecodableBatches: new Counter({
      name: 'otm_ingester_undecodable_batches_total',
      help: 'Record batches the ingester could not decode; each stops its partition until it is skipped (docs/operations.md)',
      labelNames: ['topic', 'partition'],
      registers: [registry],
    }),
    stoppedPartitions: new Gauge({
      name: 'otm_ingester_stopped_partitions',
      help: 'Partitions this ingester holds stopped at a batch it cannot decode (1 per partition)',
      labelNames: ['topic', 'partition'],
      registers: [registry],
    }),
    rollupRecounts: new Counter({
      name: 'otm_ingester_rollup_recounts_total',
      help: 'Rollup groups recounted after an insert into usage_events ended without an answer, by table and what was done (appended: the group lacked exactly those records; rebuilt: any other difference)',
      labelNames: ['table', 'action'] as const,
      registers: [registry],
    }),
    unknownPrice: new Counter({
      name: 'otm_ingester_unknown_price_total',
      help: 'Loaded records whose model has no price',
      registers: [registry],
    }),
    retries: new Counter({
      name: 'otm_ingester_dependency_retries_total',
      help: 'Retried dependency calls, by dependency and reason (full, overloaded, unreachable, timeout, error)',
      labelNames: ['dependency', 'reason'],
      registers: [registry],
    }),
    redisDegraded: new Gauge({
      name: 'otm_ingester_redis_degraded',
      help: "1 while the ingester loads without Redis (dedupe by ClickHouse's key look-up, the erasure fence read from ClickHouse); 0 otherwise",
      registers: [registry],
    }),
    degradedLoads: new Counter({
      name: 'otm_ingester_degraded_loads_total',
      help: 'Load units checked or fenced without Redis, by step (dedupe, lease, mark)',
      labelNames: ['step'] as const,
      registers: [registry],
    }),
    pendingMarks: new Gauge({
      name: 'otm_ingester_pending_dedupe_marks',
      help: 'Dedupe marks of records loaded without Redis, waiting to be written when it answers again',
      registers: [registry],
    }),
    droppedMarks: new Counter({
      name: 'otm_ingester_dedupe_marks_dropped_total',
      help: "Dedupe marks not kept over a long Redis outage (past INGEST_PENDING_MARKS_MAX); ClickHouse's key look-up still drops their replays",
      registers: [registry],
    }),
    batchSeconds: new Histogram({
      name: 'otm_ingester_batch_seconds',
      help: 'Time to dedupe and load one load unit',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    canaryFreshness: new Histogram({
      name: 'otm_canary_freshness_seconds',
      help: 'Freshness canary: time from sending a probe record to the ingest endpoint until it is queryable in ClickHouse',
      buckets: [0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300],
      registers: [registry],
    }),
    canaryProbes: new Counter({
      name: 'otm_canary_probes_total',
      help: 'Freshness canary probes by outcome (loaded, timeout, refused, send_failed, key_unknown)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    batchRows: new Histogram({
      name: 'otm_ingester_batch_rows',
      help: 'Rows inserted per load unit',
      buckets: [10, 100, 500, 1000, 2500, 5000, 10_000, 20_000],
      registers: [registry],
    }),
  };
}

export type IngesterMetrics = ReturnType<typeof createIngesterMetrics>;
