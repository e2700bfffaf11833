// The ingest routes as data: paths, media types, answers and the errors each can
// give. app.ts and batch-route.ts register from these (the response schemas also
// drive Fastify's serializer) and scripts/gen-openapi.ts documents them, so the
// OpenAPI document cannot drift from what the gateway does.
import type { ErrorType } from '@otm/shared/errors';

const usage = {
  type: 'object',
  required: ['inputTokens', 'outputTokens', 'totalTokens'],
  properties: { inputTokens: { type: 'integer' }, outputTokens: { type: 'integer' }, totalTokens: { type: 'integer' } },
} as const;

export const acceptedSchema = {
  type: 'object',
  required: ['requestId', 'status', 'message', 'timestamp', 'usage'],
  properties: {
    requestId: { type: 'string', description: 'UUIDv7 of the record (the original one when a retry is answered from the replay cache)' },
    status: { type: 'string', enum: ['accepted'] },
    message: { type: 'string' },
    timestamp: { type: 'string', format: 'date-time', description: "The gateway's receive time, RFC 3339 with milliseconds and Z" },
    usage,
  },
} as const;

const fieldErrors = {
  type: 'array',
  items: {
    type: 'object',
    required: ['path', 'message'],
    properties: { path: { type: 'string', description: 'JSON pointer into the item, or header:<name>' }, message: { type: 'string' } },
  },
} as const;

/** One entry per item of a batch, in order. */
export const batchItemResultSchema = {
  type: 'object',
  required: ['index', 'status'],
  properties: {
    index: { type: 'integer', description: 'Position of the item in the batch (for NDJSON: among the non-blank lines), from 0' },
    status: {
      type: 'integer',
      enum: [202, 400, 422, 503],
      description:
        '202 durably queued (acknowledged by Kafka); 400 refused (fix the item); 422 its idempotency key was used for another record; 503 not queued (retry the item)',
    },
    requestId: { type: 'string', description: 'Present when status is 202' },
    errorType: { type: 'string', enum: ['ValidationError', 'IdempotencyKeyReused', 'Unavailable'] },
    message: { type: 'string' },
    errors: fieldErrors,
    truncated: { type: 'boolean', description: 'Present (true) when the item had more errors than are listed' },
  },
} as const;

const batchCounts = {
  accepted: { type: 'integer', description: 'Items answered 202' },
  refused: { type: 'integer', description: 'Items answered 400, 422 or 503' },
} as const;

export const batchAnsweredSchema = {
  type: 'object',
  required: ['status', 'message', 'timestamp', 'accepted', 'refused', 'usage', 'results'],
  properties: {
    status: { type: 'string', enum: ['accepted', 'partial'] },
    message: { type: 'string' },
    timestamp: acceptedSchema.properties.timestamp,
    ...batchCounts,
    usage: { ...usage, description: 'Token totals over the accepted items' },
    results: { type: 'array', items: batchItemResultSchema },
  },
} as const;

/** The error body of the specification; 400 and 503 of a batch add `results`. */
export const errorBodySchema = {
  type: 'object',
  required: ['statusCode', 'errorType', 'message'],
  properties: {
    statusCode: { type: 'integer' },
    errorType: { type: 'string' },
    message: { type: 'string' },
    errors: fieldErrors,
    truncated: {
      type: 'boolean',
      description: 'Present (true) when more errors were found than are listed (20 per record, 64 KiB per answer)',
    },
    results: { type: 'array', items: batchItemResultSchema, description: 'Batch only: one entry per item' },
  },
} as const;

/** ExportTraceServiceResponse in its JSON mapping (protobuf requests get the same message in protobuf). */
export const otlpResponseSchema = {
  type: 'object',
  properties: {
    partialSuccess: {
      type: 'object',
      properties: {
        rejectedSpans: { type: 'integer', description: 'GenAI spans refused (each reason in errorMessage, the first five)' },
        errorMessage: { type: 'string' },
      },
    },
  },
} as const;

export interface RouteDoc {
  method: 'GET' | 'POST';
  url: string;
  summary: string;
  description: string;
  /** Request media types and what their body holds. */
  requestBody?: { mediaTypes: string[]; body: 'usageRecord' | 'usageRecordBatch' | 'otlpTraces' };
  headers?: { name: string; required: boolean; description: string }[];
  /** Answers other than errors, by status. */
  responses: Record<number, { description: string; schema: object }>;
  /** The documented error answers (errorType), each with the catalog's status. */
  errors: ErrorType[];
  /** Whether the route needs an ingest key. */
  authenticated: boolean;
}

const ingestHeaders = [
  {
    name: 'Content-Encoding',
    required: false,
    description:
      'gzip, or absent. Size limits apply to the inflated bytes and are enforced while inflating (413 at the limit). Not gzip although announced: 400. Any other encoding: 415.',
  },
  {
    name: 'X-OTM-Capture',
    required: false,
    description:
      'full, redact or metadata-only, sent once: lowers what is kept of these records below the policy of the key and its environment (it never raises it). The answer carries the policy applied in the same header. Any other value: 400.',
  },
];

const ingestErrors: ErrorType[] = [
  'ValidationError',
  'AuthError',
  'RequestTimeout',
  'PayloadTooLarge',
  'UnsupportedMediaType',
  'RateLimited',
  'Unavailable',
];

export const ingestRoutes = {
  single: {
    method: 'POST',
    url: '/v1/telemetry/usage',
    summary: 'Ingest one usage record',
    description:
      'Answered 202 only after Kafka acknowledged the record (acks=all). A retry with the same Idempotency-Key answers 202 again with the original requestId; the same key with another record is 422 while the gateway remembers the key.',
    requestBody: { mediaTypes: ['application/json'], body: 'usageRecord' },
    headers: [
      {
        name: 'Idempotency-Key',
        required: false,
        description: '1 to 255 printable ASCII characters, sent once. Scoped by the API key: duplicates within 24 h are stored once.',
      },
      ...ingestHeaders,
    ],
    responses: { 202: { description: 'Durably queued', schema: acceptedSchema } },
    errors: [...ingestErrors, 'IdempotencyKeyReused'],
    authenticated: true,
  },
  batch: {
    method: 'POST',
    url: '/v1/telemetry/usage/batch',
    summary: 'Ingest a batch of usage records',
    description:
      'A JSON array of records or NDJSON, at most BATCH_MAX_RECORDS items (1,000) and BATCH_BODY_LIMIT_BYTES (5 MiB) after decompression. Each item meets every rule of a single record and may carry `idempotencyKey` beside its members; otherwise item i uses `<Idempotency-Key>:<i>`, otherwise its own requestId. 202 when every item is durably queued; 207 with per-item results when some are not; 400 when no item is valid; 503 with Retry-After when no valid item could be queued. The rate limit counts items.',
    requestBody: { mediaTypes: ['application/json', 'application/x-ndjson'], body: 'usageRecordBatch' },
    headers: [
      {
        name: 'Idempotency-Key',
        required: false,
        description:
          'Key of the batch: item i without its own idempotencyKey uses `<Idempotency-Key>:<i>`, so a replayed batch is stored once.',
      },
      ...ingestHeaders,
    ],
    responses: {
      202: { description: 'Every item durably queued', schema: batchAnsweredSchema },
      207: { description: 'Some items durably queued, the others refused or not queued: see results', schema: batchAnsweredSchema },
    },
    errors: ingestErrors,
    authenticated: true,
  },
  otlpTraces: {
    method: 'POST',
    url: '/v1/otlp/v1/traces',
    summary: 'Ingest OpenTelemetry GenAI spans (OTLP/HTTP)',
    description:
      "An OTLP/HTTP trace export (ExportTraceServiceRequest), protobuf or JSON, gzip or not; an exporter needs only the base URL `<gateway>/v1/otlp` and the API key as a header. Each span with `gen_ai.*` attributes becomes one usage record (mapping: docs/ingest-api.md), keyed by trace and span id so a retried export is stored once; other spans are ignored. 200 with an ExportTraceServiceResponse in the request's encoding, with `partialSuccess` (rejectedSpans, errorMessage) when GenAI spans were refused; 503 or 429 with Retry-After: retry the export. Error bodies are a google.rpc.Status ({code, message}) in the request's encoding. At most BATCH_MAX_RECORDS spans (every span counts, GenAI or not, toward this limit and the key's rate), OTLP_MAX_ATTRIBUTES attributes and BATCH_BODY_LIMIT_BYTES after decompression.",
    requestBody: { mediaTypes: ['application/x-protobuf', 'application/json'], body: 'otlpTraces' },
    headers: ingestHeaders,
    responses: {
      200: {
        description: 'Exported: every GenAI span queued, or partialSuccess says how many were rejected and why',
        schema: otlpResponseSchema,
      },
    },
    errors: ingestErrors,
    authenticated: true,
  },
} as const satisfies Record<string, RouteDoc>;
