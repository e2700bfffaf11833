// Enrich: turns a queued record into the usage_events and usage_io rows. Pure: no
// I/O. What the client sent is stored as sent; every derived value has its own
// column (total_tokens, latency_ms, ttft_ms, output_tokens_per_sec, cost_usd, flags).
// Runs after decode (needs a schema-valid record), before dedupe and load.
import type { QueuedUsageRecord } from '@otm/schemas';
import type { PriceTable } from './prices.js';
import { formatDateTime } from './migrate.js';

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
  start_time_ms: number | null;
  first_token_time_ms: number | null;
  last_token_time_ms: number | null;
  sent_latency_ms: number | null;
  error_code: string | null;
  error_message: string | null;
  error_stack: string | null;
  context: string;
  total_tokens: number;
  latency_ms: number | null;
  ttft_ms: number | null;
  output_tokens_per_sec: number | null;
  cost_usd: number | null;
  price_known: 0 | 1;
  price_table_version: string;
  flag_out_of_order: 0 | 1;
  flag_total_mismatch: 0 | 1;
  flag_latency_mismatch: 0 | 1;
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
}

/** A sent latency further than this from the timestamps' span is flagged. */
export function latencyDisagrees(sentMs: number, spanMs: number): boolean {
  return Math.abs(sentMs - spanMs) > 100 + 0.05 * Math.max(sentMs, spanMs);
}

export function enrich(queued: QueuedUsageRecord, prices: PriceTable, now = Date.now()): EnrichedRecord {
  const { meta, record } = queued;
  const receivedMs = Date.parse(meta.receivedAt);
  const start = record.timing ? Date.parse(record.timing.startTime) : null;
  const first = record.timing ? Date.parse(record.timing.firstTokenTime) : null;
  const last = record.timing ? Date.parse(record.timing.lastTokenTime) : null;
  const input = record.tokens?.input ?? null;
  const output = record.tokens?.output ?? null;
  const sentTotal = record.tokens?.total ?? null;
  const sentLatency = record.timing?.latencyMs ?? null;

  const outOfOrder = start !== null && first !== null && last !== null && (first < start || last < first || last < start);
  const span = start !== null && last !== null && last >= start ? last - start : null;
  const latency = sentLatency ?? span;
  const ttft = start !== null && first !== null && first >= start ? first - start : null;
  const streamSeconds = first !== null && last !== null && last > first ? (last - first) / 1000 : null;
  const tokensPerSecond = output !== null && streamSeconds !== null ? output / streamSeconds : null;

  const price = prices.find(record.request.provider, record.request.modelId);
  const cost = price && input !== null && output !== null ? (input * price.input + output * price.output) / 1_000_000 : null;

  // Bucketing time: when the call started, else when the gateway received it.
  const eventMs = start ?? receivedMs;
  const ingestedAt = formatDateTime(now);
  const eventDate = formatDateTime(eventMs).slice(0, 10);
  const event: UsageEventRow = {
    event_key: meta.eventKey,
    request_id: meta.requestId,
    event_time: formatDateTime(eventMs),
    event_date: eventDate,
    received_at: formatDateTime(receivedMs),
    received_at_ms: receivedMs,
    api_key_id: meta.apiKeyId,
    environment: meta.environment,
    gateway_id: meta.gatewayId,
    idempotency_key: meta.idempotencyKey,
    model_id: record.request.modelId,
    provider: record.request.provider,
    status: record.request.status,
    user_id: record.user.id,
    user_type: record.user.type,
    user_name: record.user.name ?? null,
    input_tokens: input,
    output_tokens: output,
    sent_total_tokens: sentTotal,
    start_time_ms: start,
    first_token_time_ms: first,
    last_token_time_ms: last,
    sent_latency_ms: sentLatency,
    error_code: record.error?.code ?? null,
    error_message: record.error?.message ?? null,
    error_stack: record.error?.stack ?? null,
    context: record.context ? JSON.stringify(record.context) : '{}',
    total_tokens: sentTotal ?? (input ?? 0) + (output ?? 0),
    latency_ms: latency,
    ttft_ms: ttft,
    output_tokens_per_sec: tokensPerSecond,
    cost_usd: cost,
    price_known: price ? 1 : 0,
    price_table_version: prices.version,
    flag_out_of_order: outOfOrder ? 1 : 0,
    flag_total_mismatch: sentTotal !== null && input !== null && output !== null && sentTotal !== input + output ? 1 : 0,
    flag_latency_mismatch: sentLatency !== null && span !== null && latencyDisagrees(sentLatency, span) ? 1 : 0,
    ingested_at: ingestedAt,
  };
  const io = record.io
    ? {
        event_key: meta.eventKey,
        event_date: eventDate,
        prompt: record.io.prompt ?? null,
        response: record.io.response ?? null,
        ingested_at: ingestedAt,
      }
    : null;
  return { event, io };
}
