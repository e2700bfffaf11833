// OTLP traces in, usage records out (docs/ingest-api.md, "OpenTelemetry (OTLP/HTTP)").
// Decoding uses the official protobuf definitions (schemas/otlp/, copied from their
// published jars by `npm run gen:otlp-protos`) through protobufjs; OTLP/JSON, the same
// messages in their JSON mapping, is read into the same spans. Each span carrying GenAI
// attributes (the `gen_ai.*` semantic conventions) becomes one usage record; the others
// are ignored. Everything here is pure: the route (otlp-route.ts) validates and queues.
import path from 'node:path';
import { createRequire } from 'node:module';
import protobuf from 'protobufjs';

export type AttributeValue = string | number | boolean | null | AttributeValue[] | { [key: string]: AttributeValue };
export type Attributes = Map<string, AttributeValue>;

export interface OtlpSpan {
  /** Lower-case hex, as OTLP/JSON writes them. */
  traceId: string;
  spanId: string;
  name: string;
  startNs: bigint;
  endNs: bigint;
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number;
  statusMessage: string;
  attributes: Attributes;
  events: { name: string; timeNs: bigint; attributes: Attributes }[];
  resource: Attributes;
}

/** A request that cannot be read as OTLP: answered 400, nothing of it is kept. */
export class OtlpDecodeError extends Error {}

export const OTLP_TYPES = {
  request: 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest',
  response: 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse',
  status: 'google.rpc.Status',
} as const;

export interface OtlpCodec {
  /** The spans of a protobuf ExportTraceServiceRequest. */
  decodeProtobuf(body: Buffer): OtlpSpan[];
  encodeResponse(response: { partialSuccess?: { rejectedSpans: number; errorMessage: string } }): Uint8Array;
  encodeStatus(status: { code: number; message: string }): Uint8Array;
}

/**
 * The official definitions of the trace service and of google.rpc.Status, from
 * @otm/schemas' otlp folder (google/protobuf/* are protobufjs's own copies).
 */
export function loadOtlpRoot(): protobuf.Root {
  const service = 'opentelemetry/proto/collector/trace/v1/trace_service.proto';
  const anchor = createRequire(import.meta.url).resolve(`@otm/schemas/otlp/${service}`);
  const folder = anchor.slice(0, anchor.length - service.length);
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => (target.startsWith('google/protobuf/') ? target : path.join(folder, target));
  return root.loadSync([service, 'google/rpc/status.proto']);
}

/** Loads the definitions once. */
export function loadOtlpCodec(): OtlpCodec {
  const root = loadOtlpRoot();
  const request = root.lookupType(OTLP_TYPES.request);
  const response = root.lookupType(OTLP_TYPES.response);
  const status = root.lookupType(OTLP_TYPES.status);
  return {
    decodeProtobuf(body) {
      let decoded: protobuf.Message;
      try {
        decoded = request.decode(body);
      } catch {
        // The decoder's own words ("index out of range: 3 + 114 > 20") say nothing useful to a client.
        throw new OtlpDecodeError('The body is not a protobuf ExportTraceServiceRequest.');
      }
      return spansOf(request.toObject(decoded, { longs: String, bytes: String, enums: Number, defaults: false }), 'base64');
    },
    encodeResponse: (value) => response.encode(response.fromObject(value)).finish(),
    encodeStatus: (value) => status.encode(status.fromObject(value)).finish(),
  };
}

/** What an export holds, counted before anything is decoded or mapped. */
export interface OtlpCount {
  /** Every span, GenAI or not. */
  spans: number;
  /** Attributes of resources, scopes, spans, events and links. */
  attributes: number;
}

/**
 * Counts the spans and attributes of a protobuf ExportTraceServiceRequest by walking its
 * wire format (tags and lengths only: nothing is decoded or allocated), so an export of
 * 170,000 tiny spans is refused for what it holds before it costs memory.
 */
export function countProtobuf(body: Uint8Array): OtlpCount {
  const count: OtlpCount = { spans: 0, attributes: 0 };
  // Field numbers of opentelemetry/proto/trace/v1 and resource/common: which fields hold
  // what is counted, and which messages to walk into.
  const event = (field: number) => (field === 3 ? count.attributes++ : undefined);
  const link = (field: number) => (field === 5 ? count.attributes++ : undefined);
  const span = (field: number, inner: Walk) =>
    field === 9 ? count.attributes++ : field === 11 ? inner(event) : field === 13 ? inner(link) : undefined;
  const scope = (field: number) => (field === 3 ? count.attributes++ : undefined);
  const resource = (field: number) => (field === 1 ? count.attributes++ : undefined);
  const scopeSpans = (field: number, inner: Walk) => (field === 1 ? inner(scope) : field === 2 ? (count.spans++, inner(span)) : undefined);
  const resourceSpans = (field: number, inner: Walk) => (field === 1 ? inner(resource) : field === 2 ? inner(scopeSpans) : undefined);
  try {
    walkMessage(body, 0, body.length, (field, inner) => (field === 1 ? inner(resourceSpans) : undefined));
  } catch {
    throw new OtlpDecodeError('The body is not a protobuf ExportTraceServiceRequest.');
  }
  return count;
}

type Walk = (visit: (field: number, inner: Walk) => unknown) => void;

/** Visits each length-delimited field of the message in body[start, end); `inner` walks into it. */
function walkMessage(body: Uint8Array, start: number, end: number, visit: (field: number, inner: Walk) => unknown): void {
  const reader = protobuf.Reader.create(body.subarray(start, end));
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    const wireType = tag & 7;
    if (wireType !== 2) {
      reader.skipType(wireType);
      continue;
    }
    const length = reader.uint32();
    const from = start + reader.pos;
    if (from + length > end) throw new RangeError('length past the end');
    reader.skip(length);
    visit(tag >>> 3, (inner) => walkMessage(body, from, from + length, inner));
  }
}

/** Counts the spans and attributes of an OTLP/JSON export (already parsed; nothing mapped). */
export function countJson(body: unknown): OtlpCount {
  const count: OtlpCount = { spans: 0, attributes: 0 };
  const items = (value: unknown): Json[] => (Array.isArray(value) ? value.filter((item) => item !== null && typeof item === 'object') : []);
  const attributes = (holder: unknown) => {
    if (holder !== null && typeof holder === 'object') count.attributes += items((holder as Json).attributes).length;
  };
  if (body === null || typeof body !== 'object') return count;
  for (const resourceSpans of items((body as Json).resourceSpans)) {
    attributes(resourceSpans.resource);
    for (const scopeSpans of items(resourceSpans.scopeSpans)) {
      attributes(scopeSpans.scope);
      for (const span of items(scopeSpans.spans)) {
        count.spans++;
        attributes(span);
        for (const event of items(span.events)) attributes(event);
        for (const link of items(span.links)) attributes(link);
      }
    }
  }
  return count;
}

/** The spans of an OTLP/JSON ExportTraceServiceRequest (ids in hex, as its JSON mapping says). */
export function decodeJson(body: unknown): OtlpSpan[] {
  return spansOf(body, 'hex');
}

type Json = Record<string, unknown>;

function list(value: unknown, what: string): Json[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new OtlpDecodeError(`${what} must be an array`);
  return value.map((item) => {
    if (item === null || typeof item !== 'object' || Array.isArray(item)) throw new OtlpDecodeError(`${what} must hold objects`);
    return item as Json;
  });
}

function spansOf(body: unknown, ids: 'hex' | 'base64'): OtlpSpan[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new OtlpDecodeError('The body must be an object');
  const spans: OtlpSpan[] = [];
  for (const resourceSpans of list((body as Json).resourceSpans, 'resourceSpans')) {
    const resource = attributesOf((resourceSpans.resource as Json | undefined)?.attributes, 'resource.attributes');
    for (const scopeSpans of list(resourceSpans.scopeSpans, 'scopeSpans')) {
      for (const span of list(scopeSpans.spans, 'spans')) {
        const status = (span.status ?? {}) as Json;
        spans.push({
          traceId: idOf(span.traceId, ids, 16, 'traceId'),
          spanId: idOf(span.spanId, ids, 8, 'spanId'),
          name: typeof span.name === 'string' ? span.name : '',
          startNs: nanos(span.startTimeUnixNano, 'startTimeUnixNano'),
          endNs: nanos(span.endTimeUnixNano, 'endTimeUnixNano'),
          statusCode: statusCodeOf(status.code),
          statusMessage: typeof status.message === 'string' ? status.message : '',
          attributes: attributesOf(span.attributes, 'attributes'),
          events: list(span.events, 'events').map((event) => ({
            name: typeof event.name === 'string' ? event.name : '',
            timeNs: nanos(event.timeUnixNano, 'events.timeUnixNano'),
            attributes: attributesOf(event.attributes, 'events.attributes'),
          })),
          resource,
        });
      }
    }
  }
  return spans;
}

function idOf(value: unknown, encoding: 'hex' | 'base64', bytes: number, what: string): string {
  if (typeof value !== 'string') throw new OtlpDecodeError(`${what} is missing`);
  const hex = encoding === 'hex' ? value.toLowerCase() : Buffer.from(value, 'base64').toString('hex');
  if (!new RegExp(`^[0-9a-f]{${bytes * 2}}$`).test(hex) || /^0+$/.test(hex))
    throw new OtlpDecodeError(`${what} must be ${bytes} bytes, not all zero`);
  return hex;
}

function nanos(value: unknown, what: string): bigint {
  if (value === undefined || value === null) return 0n;
  if (
    (typeof value === 'string' && /^[0-9]{1,20}$/.test(value)) ||
    (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0)
  ) {
    return BigInt(value);
  }
  throw new OtlpDecodeError(`${what} must be an unsigned integer`);
}

const STATUS_CODES: Record<string, number> = { STATUS_CODE_UNSET: 0, STATUS_CODE_OK: 1, STATUS_CODE_ERROR: 2 };

function statusCodeOf(value: unknown): number {
  if (value === undefined || value === null) return 0;
  if (typeof value === 'number' && [0, 1, 2].includes(value)) return value;
  if (typeof value === 'string' && value in STATUS_CODES) return STATUS_CODES[value]!;
  throw new OtlpDecodeError('status.code must be 0, 1 or 2');
}

function attributesOf(value: unknown, what: string): Attributes {
  const attributes: Attributes = new Map();
  for (const entry of list(value, what)) {
    if (typeof entry.key !== 'string') throw new OtlpDecodeError(`${what}: every entry needs a key`);
    attributes.set(entry.key, anyValue(entry.value, 0));
  }
  return attributes;
}

/** An AnyValue as a plain value (nesting bounded like the JSON the gateway accepts). */
function anyValue(value: unknown, depth: number): AttributeValue {
  if (depth > 16) throw new OtlpDecodeError('attribute values nest too deep');
  if (value === null || typeof value !== 'object') return null;
  const any = value as Json;
  if (typeof any.stringValue === 'string') return any.stringValue;
  if (typeof any.boolValue === 'boolean') return any.boolValue;
  if (any.intValue !== undefined) {
    const int = Number(any.intValue);
    if (!Number.isFinite(int)) throw new OtlpDecodeError('intValue must be an integer');
    return int;
  }
  if (any.doubleValue !== undefined) return Number(any.doubleValue);
  if (typeof any.bytesValue === 'string') return any.bytesValue;
  if (any.arrayValue !== undefined)
    return list((any.arrayValue as Json).values, 'arrayValue.values').map((item) => anyValue(item, depth + 1));
  if (any.kvlistValue !== undefined) {
    const object: Record<string, AttributeValue> = {};
    for (const entry of list((any.kvlistValue as Json).values, 'kvlistValue.values')) {
      if (typeof entry.key === 'string') object[entry.key] = anyValue(entry.value, depth + 1);
    }
    return object;
  }
  return null;
}

// ---- spans to usage records -------------------------------------------------------

/** Resource and span attributes copied into the record's `context`, under their own names. */
export const CONTEXT_ATTRIBUTES = [
  'service.name',
  'service.namespace',
  'service.version',
  'service.instance.id',
  'deployment.environment.name',
  'deployment.environment',
  'gen_ai.operation.name',
  'gen_ai.response.id',
  'gen_ai.response.finish_reasons',
  'gen_ai.request.max_tokens',
  'gen_ai.request.temperature',
] as const;

/** Span events whose time is the first token's (no convention names one yet). */
export const FIRST_TOKEN_EVENTS = ['gen_ai.first_token', 'gen_ai.content.first_token', 'first_token'];

/** The attributes read for each record field, first present wins (later ones are older names). */
export const SPAN_MAPPING = {
  model: ['gen_ai.response.model', 'gen_ai.request.model'],
  provider: ['gen_ai.provider.name', 'gen_ai.system'],
  inputTokens: ['gen_ai.usage.input_tokens', 'gen_ai.usage.prompt_tokens'],
  outputTokens: ['gen_ai.usage.output_tokens', 'gen_ai.usage.completion_tokens'],
  cachedInputTokens: ['gen_ai.usage.cache_read.input_tokens', 'gen_ai.usage.cache_read_input_tokens'],
  cacheWriteTokens: ['gen_ai.usage.cache_creation.input_tokens', 'gen_ai.usage.cache_creation_input_tokens'],
  reasoningTokens: ['gen_ai.usage.reasoning.output_tokens'],
  userId: ['user.id', 'enduser.id'],
  userName: ['user.name'],
  errorType: ['error.type'],
  prompt: ['gen_ai.input.messages', 'gen_ai.prompt'],
  response: ['gen_ai.output.messages', 'gen_ai.completion'],
} as const;

export type SpanOutcome =
  { kind: 'ignored' } | { kind: 'refused'; reason: string } | { kind: 'record'; record: Record<string, unknown>; idempotencyKey: string };

const ERROR_TEXT_MAX = 1024;

/** Whether a span records a GenAI call: it has at least one `gen_ai.*` attribute. */
export function isGenAiSpan(span: OtlpSpan): boolean {
  for (const key of span.attributes.keys()) if (key.startsWith('gen_ai.')) return true;
  return false;
}

/** A span's usage record, or why there is none. */
export function usageFromSpan(span: OtlpSpan): SpanOutcome {
  if (!isGenAiSpan(span)) return { kind: 'ignored' };
  const read = (names: readonly string[]) => {
    for (const name of names) {
      const value = span.attributes.get(name) ?? span.resource.get(name);
      if (value !== undefined && value !== null && value !== '') return value;
    }
    return undefined;
  };
  const text = (names: readonly string[]) => {
    const value = read(names);
    return value === undefined ? undefined : typeof value === 'string' ? value : JSON.stringify(value);
  };
  const count = (names: readonly string[]) => {
    const value = read(names);
    return typeof value === 'number' ? value : undefined;
  };

  const modelId = text(SPAN_MAPPING.model);
  if (!modelId) return { kind: 'refused', reason: `span ${span.spanId}: no model (gen_ai.response.model or gen_ai.request.model)` };
  const provider = text(SPAN_MAPPING.provider);
  if (!provider) return { kind: 'refused', reason: `span ${span.spanId}: no provider (gen_ai.provider.name or gen_ai.system)` };
  if (span.startNs === 0n || span.endNs < span.startNs) {
    return { kind: 'refused', reason: `span ${span.spanId}: its start and end times do not make an interval` };
  }

  const errorType = text(SPAN_MAPPING.errorType);
  const failed = span.statusCode === 2 || errorType !== undefined;
  const record: Record<string, unknown> = { request: { modelId, provider, status: failed ? 'error' : 'success' } };

  const userId = text(SPAN_MAPPING.userId);
  const service = text(['service.name']);
  const userName = text(SPAN_MAPPING.userName);
  record.user = userId
    ? { id: userId, type: 'external', ...(userName ? { name: userName } : {}) }
    : // No user: the calling service is the user (internal), as for any machine caller.
      { id: service ?? 'unknown_service', type: 'internal' };

  const input = count(SPAN_MAPPING.inputTokens);
  const output = count(SPAN_MAPPING.outputTokens);
  // A successful call's record must say what it used (the schema requires tokens then);
  // zeros would be a guess, so such a span is refused, saying why.
  if (input === undefined && output === undefined && !failed) {
    return { kind: 'refused', reason: `span ${span.spanId}: no token usage (gen_ai.usage.input_tokens or gen_ai.usage.output_tokens)` };
  }
  if (input !== undefined || output !== undefined) {
    const tokens: Record<string, number> = { input: input ?? 0, output: output ?? 0 };
    const detail = {
      cachedInput: SPAN_MAPPING.cachedInputTokens,
      cacheWrite: SPAN_MAPPING.cacheWriteTokens,
      reasoning: SPAN_MAPPING.reasoningTokens,
    };
    for (const [field, names] of Object.entries(detail)) {
      const value = count(names);
      if (value !== undefined) tokens[field] = value;
    }
    record.tokens = tokens;
  }

  const firstToken = span.events.find((event) => FIRST_TOKEN_EVENTS.includes(event.name) && event.timeNs >= span.startNs);
  record.timing = {
    startTime: rfc3339(span.startNs),
    // Without a first-token event the answer came whole at the end (not streamed).
    firstTokenTime: rfc3339(firstToken && firstToken.timeNs <= span.endNs ? firstToken.timeNs : span.endNs),
    lastTokenTime: rfc3339(span.endNs),
    latencyMs: Number((span.endNs - span.startNs) / 1_000_000n),
  };

  if (failed) {
    const message = span.statusMessage || errorType || 'error';
    record.error = { code: clip(errorType ?? 'error'), message: clip(message) };
  }

  const prompt = text(SPAN_MAPPING.prompt) ?? eventText(span, 'gen_ai.content.prompt', 'gen_ai.prompt');
  const response = text(SPAN_MAPPING.response) ?? eventText(span, 'gen_ai.content.completion', 'gen_ai.completion');
  // Present even when empty: an empty io says the content was not captured.
  record.io = { ...(prompt !== undefined ? { prompt } : {}), ...(response !== undefined ? { response } : {}) };

  const context: Record<string, AttributeValue> = {
    'otel.trace_id': span.traceId,
    'otel.span_id': span.spanId,
    'otel.span_name': span.name,
  };
  for (const name of CONTEXT_ATTRIBUTES) {
    const value = span.attributes.get(name) ?? span.resource.get(name);
    if (value !== undefined && value !== null) context[name] = value;
  }
  record.context = context;

  // A retried export sends the same span again: trace and span id make its key.
  return { kind: 'record', record, idempotencyKey: `otlp:${span.traceId}:${span.spanId}` };
}

function eventText(span: OtlpSpan, eventName: string, attribute: string): string | undefined {
  const value = span.events.find((event) => event.name === eventName)?.attributes.get(attribute);
  return value === undefined || value === null ? undefined : typeof value === 'string' ? value : JSON.stringify(value);
}

function clip(text: string): string {
  return [...text].slice(0, ERROR_TEXT_MAX).join('');
}

/** Unix nanoseconds as RFC 3339 with nine fraction digits and Z. */
export function rfc3339(ns: bigint): string {
  const ms = ns / 1_000_000n;
  const iso = new Date(Number(ms)).toISOString(); // …ss.mmmZ
  const fraction = (ns % 1_000_000_000n).toString().padStart(9, '0');
  return `${iso.slice(0, 19)}.${fraction}Z`;
}
