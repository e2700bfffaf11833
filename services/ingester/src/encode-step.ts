// Encode: a record's usage_events and usage_io rows in ClickHouse's RowBinary, once,
// right after enrich (docs/ingester.md, "Rows in RowBinary"). The columns and their
// types are listed here, in the order they are written and named in the INSERT; the
// encoding itself is services/shared/src/row-binary.ts.
import { RowBinaryEncoder, type RowSchema } from '@otm/shared/row-binary';
import type { EncodedRow, EnrichedRecord, UsageEventRow, UsageIoRow } from './rows.js';

/** usage_events' columns as the ingester writes them (every column of UsageEventRow, in this order). */
export const USAGE_EVENT_COLUMNS = {
  event_key: 'String',
  request_id: 'String',
  event_time: 'DateTime',
  event_date: 'Date',
  received_at: 'DateTime',
  received_at_ms: 'UInt64',
  api_key_id: 'String',
  environment: 'String',
  gateway_id: 'String',
  idempotency_key: 'Nullable(String)',
  model_id: 'String',
  provider: 'String',
  status: 'String',
  user_id: 'String',
  user_type: 'String',
  user_name: 'Nullable(String)',
  input_tokens: 'Nullable(UInt64)',
  output_tokens: 'Nullable(UInt64)',
  sent_total_tokens: 'Nullable(UInt64)',
  cached_input_tokens: 'Nullable(UInt64)',
  cache_write_tokens: 'Nullable(UInt64)',
  reasoning_tokens: 'Nullable(UInt64)',
  start_time_ms: 'Nullable(UInt64)',
  first_token_time_ms: 'Nullable(UInt64)',
  last_token_time_ms: 'Nullable(UInt64)',
  sent_latency_ms: 'Nullable(UInt64)',
  error_code: 'Nullable(String)',
  error_message: 'Nullable(String)',
  error_stack: 'Nullable(String)',
  context: 'String',
  total_tokens: 'UInt64',
  cache_reported_input_tokens: 'UInt64',
  latency_ms: 'Nullable(UInt64)',
  ttft_ms: 'Nullable(UInt64)',
  output_tokens_per_sec: 'Nullable(Float64)',
  cost_usd: 'Nullable(Float64)',
  price_known: 'UInt8',
  price_table_version: 'String',
  flag_out_of_order: 'UInt8',
  flag_total_mismatch: 'UInt8',
  flag_latency_mismatch: 'UInt8',
  anomalies: 'Array(String)',
  capture_policy: 'String',
  prompt_chars: 'Nullable(UInt64)',
  response_chars: 'Nullable(UInt64)',
  redactions: 'UInt32',
  ingested_at: 'DateTime',
} as const satisfies RowSchema<UsageEventRow>;

/** usage_io's columns as the ingester writes them. */
export const USAGE_IO_COLUMNS = {
  event_key: 'String',
  event_date: 'Date',
  prompt: 'Nullable(String)',
  response: 'Nullable(String)',
  ingested_at: 'DateTime',
} as const satisfies RowSchema<UsageIoRow>;

const eventEncoder = new RowBinaryEncoder<UsageEventRow>(USAGE_EVENT_COLUMNS);
const ioEncoder = new RowBinaryEncoder<UsageIoRow>(USAGE_IO_COLUMNS);

/** The INSERT statements the encoded rows are sent with. */
export const INSERT_EVENTS = `INSERT INTO usage_events ${eventEncoder.columnList} FORMAT RowBinary`;
export const INSERT_IO = `INSERT INTO usage_io ${ioEncoder.columnList} FORMAT RowBinary`;

/** The record's rows encoded; throws RowBinaryError when a value does not fit its column (a dead letter). */
export function encodeRow(record: EnrichedRecord): EncodedRow {
  return {
    digest: record.digest,
    eventKey: record.event.event_key,
    priceKnown: record.event.price_known === 1,
    environment: record.event.environment,
    userId: record.event.user_id,
    receivedAtMs: record.event.received_at_ms,
    // event_time is this instant (start, else receipt) formatted to the second: the same minute.
    eventMs: record.event.start_time_ms ?? record.event.received_at_ms,
    isError: record.event.status === 'error',
    event: eventEncoder.encode(record.event),
    io: record.io ? ioEncoder.encode(record.io) : null,
  };
}
