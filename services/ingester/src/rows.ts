// The rows the ingester writes, as they pass from step to step: enrich makes a
// record's usage_events and usage_io rows (EnrichedRecord), encode turns them into
// RowBinary once (EncodedRow), and the load unit carries only that to ClickHouse.
// Types only; the columns and their ClickHouse types are listed in encode-step.ts.

export interface UsageEventRow {
  event_key: string;
  request_id: string;
  event_time: string;
  event_date: string;
  received_at: string;
  received_at_ms: number;
  api_key_id: string;
  environment: string;
  gateway_id: string;
  idempotency_key: string | null;
  model_id: string;
  provider: string;
  status: string;
  user_id: string;
  user_type: string;
  user_name: string | null;
  input_tokens: number | null;
  output_tokens: number | null;
  sent_total_tokens: number | null;
  cached_input_tokens: number | null;
  cache_write_tokens: number | null;
  reasoning_tokens: number | null;
  start_time_ms: number | null;
  first_token_time_ms: number | null;
  last_token_time_ms: number | null;
  sent_latency_ms: number | null;
  error_code: string | null;
  error_message: string | null;
  error_stack: string | null;
  context: string;
  total_tokens: number;
  /** input_tokens when the record reports cache reads, else 0: the cache hit ratio's denominator. */
  cache_reported_input_tokens: number;
  latency_ms: number | null;
  ttft_ms: number | null;
  output_tokens_per_sec: number | null;
  cost_usd: number | null;
  price_known: 0 | 1;
  price_table_version: string;
  flag_out_of_order: 0 | 1;
  flag_total_mismatch: 0 | 1;
  flag_latency_mismatch: 0 | 1;
  /** What the ingester had to change to store the record (`field:problem`), empty when nothing. */
  anomalies: string[];
  /** The capture policy the gateway applied (full for records queued before policies existed). */
  capture_policy: string;
  prompt_chars: number | null;
  response_chars: number | null;
  redactions: number;
  ingested_at: string;
}

export interface UsageIoRow {
  event_key: string;
  event_date: string;
  prompt: string | null;
  response: string | null;
  ingested_at: string;
}

export interface EnrichedRecord {
  event: UsageEventRow;
  io: UsageIoRow | null;
  /** SHA-1 of the record as queued (JSON.stringify of `record`): the same event key with another digest is a collision. */
  digest: string;
}

/**
 * A record as it travels to ClickHouse: each row already encoded in RowBinary
 * (row-binary.ts), right after enrich, and the objects let go. A decoded record
 * waiting for its load unit holds its rows as about 360 bytes plus its text (JSON
 * lines took about three times that, objects more), the insert only concatenates
 * them, and ClickHouse reads binary values instead of parsing text.
 */
export interface EncodedRow {
  eventKey: string;
  priceKnown: boolean;
  /** Whose record it is and when the gateway received it: erasures drop it by these. */
  environment: string;
  userId: string;
  receivedAtMs: number;
  /** The event time the rollups bucket the record by (epoch ms; ClickHouse runs in UTC). */
  eventMs: number;
  isError: boolean;
  /** EnrichedRecord.digest */
  digest: string;
  /** The usage_events row, in RowBinary. */
  event: Buffer;
  /** The usage_io row in RowBinary, or null when the record carries no prompt or response. */
  io: Buffer | null;
}
