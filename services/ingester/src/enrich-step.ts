// Enrich: turns a queued record into the usage_events and usage_io rows. Pure: no
// I/O. What the client sent is stored as sent; every derived value has its own
// column (total_tokens, latency_ms, ttft_ms, output_tokens_per_sec, cost_usd, flags).
// Runs after decode (needs a schema-valid record), before dedupe and load.
//
// Total: the gateway refuses what the store cannot hold, but records also come from
// older gateways and direct producers. A timestamp that does not denote an instant
// ClickHouse's DateTime can hold becomes null, a string that is not well-formed
// Unicode has its lone surrogates replaced (U+FFFD), and each such change is named in
// `anomalies`; nothing here throws on a schema-valid record.
import { isUtf8 } from 'node:buffer';
import { hash } from 'node:crypto';
import { DEFAULT_PLAUSIBLE_BOUNDS, parseTimestamp, tokenBound, type PlausibleBounds, type QueuedUsageRecord } from '@otm/schemas';
import { costUsd, priceAt, pricesTokens, type PriceTable } from './prices.js';
import { formatDateTime } from '@otm/shared/clickhouse-values';
import { HEADER_BYTES } from '@otm/shared/registry';
import type { EnrichedRecord, UsageEventRow } from './rows.js';

/** `}` */
const CLOSING_BRACE = 0x7d;

/**
 * SHA-1 (base64url) of JSON.stringify(queued.record), from the message's own bytes when
 * they hold it: a gateway writes `{"meta":<JSON.stringify(meta)>,"record":<JSON.stringify(record)>}`
 * (record-intake.ts, queuedJson), and JSON.stringify gives back unchanged the text it
 * wrote once parsed, so the bytes between `"record":` and the last brace are the text
 * serialising the record again would make (the envelope holds these two members only:
 * additionalProperties is false in queued-record.schema.json, whose validation comes
 * first). That spares serialising and encoding a record of a few kilobytes again. A
 * message laid out otherwise (another producer's spacing or member order) or not valid
 * UTF-8 is serialised again, as before.
 */
export function recordDigest(queued: QueuedUsageRecord, wire?: Buffer | null): string {
  if (wire) {
    const head = `{"meta":${JSON.stringify(queued.meta)},"record":`;
    const start = HEADER_BYTES + Buffer.byteLength(head);
    const end = wire.length - 1;
    if (
      end > start &&
      wire[end] === CLOSING_BRACE &&
      wire[end - 1] === CLOSING_BRACE &&
      isUtf8(wire.subarray(HEADER_BYTES)) &&
      wire.toString('utf8', HEADER_BYTES, start) === head
    ) {
      return hash('sha1', wire.subarray(start, end), 'base64url');
    }
  }
  return hash('sha1', JSON.stringify(queued.record), 'base64url');
}

/** A sent latency further than this from the timestamps' span is flagged. */
export function latencyDisagrees(sentMs: number, spanMs: number): boolean {
  return Math.abs(sentMs - spanMs) > 100 + 0.05 * Math.max(sentMs, spanMs);
}

/** DateTime and Date hold 1970-01-01 up to early 2106 (2149 for Date); past that nothing is stored. */
const STORABLE_UNTIL_MS = Date.parse('2106-01-01T00:00:00Z');

/** An instant ClickHouse can hold, or null with the reason added to `anomalies`. */
function storableInstant(text: string | undefined, field: string, anomalies: string[]): number | null {
  if (text === undefined) return null;
  const at = parseTimestamp(text);
  if (at === null) anomalies.push(`${field}:unreadable`);
  else if (at < 0 || at >= STORABLE_UNTIL_MS) anomalies.push(`${field}:out_of_range`);
  else return at;
  return null;
}

/** The text, well-formed: lone surrogates (which ClickHouse refuses) become U+FFFD. */
function wellFormed<T extends string | null | undefined>(text: T, field: string, anomalies: string[]): T {
  if (typeof text !== 'string' || text.isWellFormed()) return text;
  anomalies.push(`${field}:not_well_formed`);
  return text.toWellFormed() as T;
}

/**
 * `wire`: the Kafka message `queued` was decoded from, when there is one (its digest is
 * then read from it: recordDigest). `plausible`: the bounds the gateway refuses beyond; a
 * record that came another way is stored with such a value nulled, named in `anomalies`.
 */
export function enrich(
  queued: QueuedUsageRecord,
  prices: PriceTable,
  now = Date.now(),
  wire?: Buffer | null,
  plausible: PlausibleBounds = DEFAULT_PLAUSIBLE_BOUNDS,
): EnrichedRecord {
  const { meta, record } = queued;
  const anomalies: string[] = [];
  const text = <T extends string | null | undefined>(value: T, field: string) => wellFormed(value, field, anomalies);
  const atMost = (value: number | null, max: number, field: string) => {
    if (value === null || value <= max) return value;
    anomalies.push(`${field}:implausible`);
    return null;
  };
  const receivedMs = storableInstant(meta.receivedAt, 'meta.receivedAt', anomalies) ?? now;
  const start = storableInstant(record.timing?.startTime, 'timing.startTime', anomalies);
  // A first or last token further after the start than any call lasts is not kept (nor what it would derive).
  const sinceStart = (at: number | null, field: string) =>
    at !== null && start !== null && atMost(at - start, plausible.maxCallMs, field) === null ? null : at;
  const first = sinceStart(storableInstant(record.timing?.firstTokenTime, 'timing.firstTokenTime', anomalies), 'timing.firstTokenTime');
  const last = sinceStart(storableInstant(record.timing?.lastTokenTime, 'timing.lastTokenTime', anomalies), 'timing.lastTokenTime');
  const tokens = (value: number | undefined, field: 'input' | 'output' | 'total' | 'cachedInput' | 'cacheWrite' | 'reasoning') =>
    atMost(value ?? null, tokenBound(field, plausible.maxTokens), `tokens.${field}`);
  const input = tokens(record.tokens?.input, 'input');
  const output = tokens(record.tokens?.output, 'output');
  const sentTotal = tokens(record.tokens?.total, 'total');
  const cachedInput = tokens(record.tokens?.cachedInput, 'cachedInput');
  const cacheWrite = tokens(record.tokens?.cacheWrite, 'cacheWrite');
  const reasoning = tokens(record.tokens?.reasoning, 'reasoning');
  // The gateway refuses detail larger than its whole; a direct producer's is stored as sent, named here, capped in the cost.
  if (input !== null && (cachedInput ?? 0) + (cacheWrite ?? 0) > input) anomalies.push('tokens.cachedInput:exceeds_input');
  if (output !== null && (reasoning ?? 0) > output) anomalies.push('tokens.reasoning:exceeds_output');
  const sentLatency = atMost(record.timing?.latencyMs ?? null, plausible.maxCallMs, 'timing.latencyMs');

  const outOfOrder = start !== null && first !== null && last !== null && (first < start || last < first || last < start);
  const span = start !== null && last !== null && last >= start ? last - start : null;
  const latency = sentLatency ?? span;
  const ttft = start !== null && first !== null && first >= start ? first - start : null;
  const streamSeconds = first !== null && last !== null && last > first ? (last - first) / 1000 : null;
  const tokensPerSecond = atMost(
    output !== null && streamSeconds !== null ? output / streamSeconds : null,
    plausible.maxOutputTokensPerSec,
    'output_tokens_per_sec',
  );

  // Bucketing time: when the call started, else when the gateway received it.
  const eventMs = start ?? receivedMs;

  // Priced at the price in force at the event time, in the whole seconds event_time keeps
  // (re-costing reads that column: both pick the same entry).
  const eventS = Math.floor(eventMs / 1000);
  const schedule = prices.find(record.request.provider, record.request.modelId);
  const priced = schedule !== undefined && pricesTokens(priceAt(schedule, eventS));
  const cost =
    priced && input !== null && output !== null ? costUsd(schedule, { input, output, cachedInput, cacheWrite, reasoning }, eventS) : null;
  const ingestedAt = formatDateTime(now);
  const eventDate = formatDateTime(eventMs).slice(0, 10);
  const eventKey = text(meta.eventKey, 'meta.eventKey');
  const event: UsageEventRow = {
    event_key: eventKey,
    request_id: text(meta.requestId, 'meta.requestId'),
    event_time: formatDateTime(eventMs),
    event_date: eventDate,
    received_at: formatDateTime(receivedMs),
    received_at_ms: receivedMs,
    api_key_id: text(meta.apiKeyId, 'meta.apiKeyId'),
    environment: meta.environment,
    gateway_id: text(meta.gatewayId, 'meta.gatewayId'),
    idempotency_key: text(meta.idempotencyKey, 'meta.idempotencyKey'),
    model_id: text(record.request.modelId, 'request.modelId'),
    provider: text(record.request.provider, 'request.provider'),
    status: record.request.status,
    user_id: text(record.user.id, 'user.id'),
    user_type: record.user.type,
    user_name: text(record.user.name ?? null, 'user.name'),
    input_tokens: input,
    output_tokens: output,
    sent_total_tokens: sentTotal,
    cached_input_tokens: cachedInput,
    cache_write_tokens: cacheWrite,
    reasoning_tokens: reasoning,
    start_time_ms: start,
    first_token_time_ms: first,
    last_token_time_ms: last,
    sent_latency_ms: sentLatency,
    error_code: text(record.error?.code ?? null, 'error.code'),
    error_message: text(record.error?.message ?? null, 'error.message'),
    error_stack: text(record.error?.stack ?? null, 'error.stack'),
    context: record.context ? JSON.stringify(record.context) : '{}',
    total_tokens: sentTotal ?? (input ?? 0) + (output ?? 0),
    cache_reported_input_tokens: cachedInput !== null ? (input ?? 0) : 0,
    latency_ms: latency,
    ttft_ms: ttft,
    output_tokens_per_sec: tokensPerSecond,
    cost_usd: cost,
    price_known: priced ? 1 : 0,
    price_table_version: prices.version,
    flag_out_of_order: outOfOrder ? 1 : 0,
    flag_total_mismatch: sentTotal !== null && input !== null && output !== null && sentTotal !== input + output ? 1 : 0,
    flag_latency_mismatch: sentLatency !== null && span !== null && latencyDisagrees(sentLatency, span) ? 1 : 0,
    anomalies,
    capture_policy: meta.capture?.policy ?? 'full',
    prompt_chars: meta.capture?.promptChars ?? record.io?.prompt?.length ?? null,
    response_chars: meta.capture?.responseChars ?? record.io?.response?.length ?? null,
    redactions: meta.capture?.redactions ?? 0,
    ingested_at: ingestedAt,
  };
  // No usage_io row without text (metadata-only records keep an empty io).
  const io =
    record.io && (record.io.prompt !== undefined || record.io.response !== undefined)
      ? {
          event_key: eventKey,
          event_date: eventDate,
          prompt: text(record.io.prompt ?? null, 'io.prompt'),
          response: text(record.io.response ?? null, 'io.response'),
          ingested_at: ingestedAt,
        }
      : null;
  return { event, io, digest: recordDigest(queued, wire) };
}
