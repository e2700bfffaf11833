// Usage events generated inside ClickHouse (INSERT … SELECT FROM numbers()), for the
// analytics benchmark and the dashboard's test at scale: no Kafka, no ingester, only
// usage_events, whose materialized views fill every rollup as the ingester's inserts
// do. Deterministic (cityHash64 of the row number): the same N rows every time.
//
// The shape: events spread evenly over `days` days ending at `endMs`; `users` users, each
// in one environment (of prod, qa, dev) and of one type (a tenth internal); `keys` API
// keys, each in one environment; `models` models over 4 providers; 2 % errors (three
// codes); input 0-4,000 tokens, output 0-1,000, latency 0.2-20 s, time to first token
// 50 ms-2 s; a cost from the tokens.
import type { ClickHouseClient } from '@otm/shared/clickhouse';

export interface GeneratedEvents {
  /** Events to generate, spread evenly over the days. */
  count: number;
  /** The number of the first event (its event key and its draws): a second set of events needs its own. */
  offset?: number;
  days: number;
  endMs: number;
  users: number;
  models: number;
  keys: number;
}

/** Rows per INSERT: bounds ClickHouse's memory while the views aggregate. */
const STEP = 2_000_000;

export function generateEventsSql(spec: GeneratedEvents, from: number, count: number): string {
  const spanS = spec.days * 86_400;
  const startS = Math.floor(spec.endMs / 1000) - spanS;
  // i: the event's place in time; n: its identity (key and draws).
  const i = `(number + ${from})`;
  const n = `(number + ${from + (spec.offset ?? 0)})`;
  const user = `(cityHash64(${n}, 3) % ${spec.users})`;
  const env = `(${user} % 3)`;
  const model = `(cityHash64(${n}, 1) % ${spec.models})`;
  const keysPerEnv = Math.max(1, Math.floor(spec.keys / 3));
  const error = `(cityHash64(${n}, 2) % 50 = 0)`;
  const input = `(cityHash64(${n}, 5) % 4000)`;
  const output = `(cityHash64(${n}, 6) % 1000)`;
  const latency = `(200 + cityHash64(${n}, 7) % 19800)`;
  const time = `toDateTime(${startS} + intDiv(${i} * ${spanS}, ${spec.count}))`;
  return `INSERT INTO usage_events (event_key, request_id, event_time, event_date, received_at, received_at_ms, api_key_id, environment,
      gateway_id, model_id, provider, status, user_id, user_type, input_tokens, output_tokens, sent_total_tokens, start_time_ms,
      error_code, error_message, context, total_tokens, latency_ms, ttft_ms, output_tokens_per_sec, cost_usd, price_known,
      price_table_version, ingested_at)
    SELECT
      concat('gen-', toString(${n})), concat('gen-', toString(${n})), ${time}, toDate(${time}), ${time}, toUInt64(${time}) * 1000,
      concat('key_gen', toString(${env} + 3 * (cityHash64(${n}, 4) % ${keysPerEnv}))),
      arrayElement(['prod', 'qa', 'dev'], ${env} + 1),
      'generated', concat('model-', toString(${model})),
      arrayElement(['openai', 'anthropic', 'google', 'mistral'], ${model} % 4 + 1),
      if(${error}, 'error', 'success'),
      concat('user-', toString(${user})),
      if(${user} % 10 = 0, 'internal', 'external'),
      ${input}, ${output}, ${input} + ${output}, toUInt64(${time}) * 1000,
      if(${error}, arrayElement(['rate_limit_exceeded', 'timeout', 'context_length_exceeded'], cityHash64(${n}, 8) % 3 + 1), NULL),
      if(${error}, 'generated error', NULL),
      '{}', ${input} + ${output}, ${latency}, 50 + cityHash64(${n}, 9) % 1950,
      ${output} * 1000 / ${latency}, (${input} * 2.5 + ${output} * 10) / 1000000, 1, 'generated', now()
    FROM numbers(${count})`;
}

/** Inserts the events in steps of 2 million; `progress` after each. */
export async function generateEvents(
  clickhouse: ClickHouseClient,
  spec: GeneratedEvents,
  progress: (done: number) => void = () => {},
): Promise<void> {
  for (let done = 0; done < spec.count; done += STEP) {
    const count = Math.min(STEP, spec.count - done);
    await clickhouse.command({
      query: generateEventsSql(spec, done, count),
      clickhouse_settings: { max_insert_block_size: '1048576' },
    });
    progress(done + count);
  }
}
