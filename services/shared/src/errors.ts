// One catalog of every refusal the HTTP services answer. `errorCatalog`: each error
// type's HTTP status, whether a client may retry, and the gRPC status code an OTLP
// exporter is answered with (google.rpc.Status). `refusals`: each refusal by name, its
// error type and its message (a template when it names a limit or a value); services
// refuse with `refuse(name, …)` and never write a message of their own. Bodies never
// carry stack traces or internal details. docs/api.md's error table is generated from
// these (scripts/gen-openapi.ts).
export const errorCatalog = {
  ValidationError: { statusCode: 400, retriable: false, grpcCode: 3 },
  AuthError: { statusCode: 401, retriable: false, grpcCode: 16 },
  NotFound: { statusCode: 404, retriable: false, grpcCode: 5 },
  RequestTimeout: { statusCode: 408, retriable: true, grpcCode: 4 },
  PayloadTooLarge: { statusCode: 413, retriable: false, grpcCode: 8 },
  UnsupportedMediaType: { statusCode: 415, retriable: false, grpcCode: 3 },
  IdempotencyKeyReused: { statusCode: 422, retriable: false, grpcCode: 3 },
  HeadersTooLarge: { statusCode: 431, retriable: false, grpcCode: 3 },
  RateLimited: { statusCode: 429, retriable: true, grpcCode: 8 },
  Unavailable: { statusCode: 503, retriable: true, grpcCode: 14 },
  QueryTimeout: { statusCode: 504, retriable: false, grpcCode: 4 },
  InternalError: { statusCode: 500, retriable: true, grpcCode: 13 },
} as const;

export type ErrorType = keyof typeof errorCatalog;

export type FieldError = { path: string; message: string };

export interface ErrorBody {
  statusCode: number;
  errorType: ErrorType;
  message: string;
  errors?: FieldError[];
  /** Present (true) when more errors were found than the answer lists. */
  truncated?: boolean;
}

/**
 * What an answer reports of the errors it found: at most `perItem` errors for one
 * record (or one request), each path and message cut at `textChars`, and at most
 * `answerBytes` of error details in one answer (a batch's items together). A record
 * with 100,000 unknown members costs a bounded answer, not a 4 MiB one.
 */
export const errorReportLimits = { perItem: 20, textChars: 256, answerBytes: 64 * 1024 };

/** Sets the limits from a service's configuration (ERROR_DETAILS_PER_ITEM, ERROR_ANSWER_MAX_BYTES). */
export function setErrorReportLimits(limits: { perItem: number; answerBytes: number }): void {
  errorReportLimits.perItem = limits.perItem;
  errorReportLimits.answerBytes = limits.answerBytes;
}

const clipText = (text: string) =>
  text.length <= errorReportLimits.textChars ? text : `${text.slice(0, errorReportLimits.textChars - 1)}…`;

/** The first `perItem` errors, their texts cut; `truncated` when some were left out. */
export function boundErrors(errors: FieldError[]): { errors: FieldError[]; truncated: boolean } {
  const kept = errors
    .slice(0, errorReportLimits.perItem)
    .map((error) => ({ path: clipText(error.path), message: clipText(error.message) }));
  return { errors: kept, truncated: errors.length > kept.length };
}

/**
 * Spends one answer's byte budget on the `errors` of its entries, in order: an entry
 * past the budget loses its `errors` and says `truncated`. Returns whether any was cut.
 */
export function fitErrorBudget(entries: { errors?: FieldError[]; truncated?: boolean }[]): boolean {
  const listing = entries.filter((entry) => entry.errors !== undefined);
  const kept = withinErrorBudget(listing, (entry) => JSON.stringify(entry.errors).length);
  for (const entry of listing.slice(kept)) {
    delete entry.errors;
    entry.truncated = true;
  }
  return kept < listing.length;
}

/**
 * The answer's one byte budget for errors: how many of `items`, from the first, fit in
 * errorReportLimits.answerBytes when each costs `bytes(item)` and `spent` is used already.
 */
export function withinErrorBudget<T>(items: readonly T[], bytes: (item: T) => number, spent = 0): number {
  let total = spent;
  for (let index = 0; index < items.length; index++) {
    total += bytes(items[index]!);
    if (total > errorReportLimits.answerBytes) return index;
  }
  return items.length;
}

export class ServiceError extends Error {
  readonly statusCode: number;
  readonly retriable: boolean;
  constructor(
    readonly errorType: ErrorType,
    message: string,
    readonly details: { errors?: ErrorBody['errors']; truncated?: boolean; retryAfterSeconds?: number } = {},
  ) {
    super(message);
    this.statusCode = errorCatalog[errorType].statusCode;
    this.retriable = errorCatalog[errorType].retriable;
    if (details.errors) {
      const bounded = boundErrors(details.errors);
      this.details = { ...details, errors: bounded.errors, truncated: details.truncated || bounded.truncated };
    }
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { statusCode: this.statusCode, errorType: this.errorType, message: this.message };
    if (this.details.errors) body.errors = this.details.errors;
    if (this.details.truncated) body.truncated = true;
    return body;
  }
}

type Template<P> = (params: P) => string;
interface Refusal {
  errorType: ErrorType;
  message: string | Template<never>;
}

/** Every refusal, by name: its error type and its message. */
export const refusals = {
  // Authentication and rate.
  apiKeyInvalid: { errorType: 'AuthError', message: 'API key missing or incorrect.' },
  apiKeyAmbiguous: { errorType: 'AuthError', message: 'Ambiguous credentials: X-API-Key and Authorization carry different keys.' },
  adminTokenInvalid: { errorType: 'AuthError', message: 'Admin token missing or incorrect.' },
  metricsTokenInvalid: { errorType: 'AuthError', message: 'Metrics token missing or incorrect.' },
  rateLimited: {
    errorType: 'RateLimited',
    message: ({ perSecond, burst }: { perSecond: number; burst: number }) =>
      `Rate limit of ${perSecond} records per second (bursts of ${burst}) exceeded for this key.`,
  },
  authFailuresLimited: {
    errorType: 'RateLimited',
    message: ({ perMinute }: { perMinute: number }) =>
      `Too many failed authentications from this address (${perMinute} a minute); retry later.`,
  },
  // The request as HTTP.
  malformedRequest: { errorType: 'ValidationError', message: 'Malformed HTTP request.' },
  requestTimeout: { errorType: 'RequestTimeout', message: 'The request did not arrive within the time limit.' },
  headersTooLarge: { errorType: 'HeadersTooLarge', message: 'The request headers are too large.' },
  contentLengthMismatch: { errorType: 'ValidationError', message: 'Content-Length does not match the body.' },
  bodyTooLarge: { errorType: 'PayloadTooLarge', message: 'The request body is larger than the limit.' },
  bodyNotJson: { errorType: 'ValidationError', message: 'The request body is not valid JSON.' },
  bodyNotGzip: { errorType: 'ValidationError', message: 'The request body is not valid gzip (Content-Encoding: gzip).' },
  textEmpty: { errorType: 'ValidationError', message: ({ what }: { what: string }) => `${what} is empty.` },
  textNotJson: { errorType: 'ValidationError', message: ({ what }: { what: string }) => `${what} is not valid JSON.` },
  textTooDeep: {
    errorType: 'ValidationError',
    message: ({ what, maxDepth }: { what: string; maxDepth: number }) => `${what} nests deeper than ${maxDepth} levels.`,
  },
  parametersInvalid: { errorType: 'ValidationError', message: 'The request does not match the expected parameters.' },
  clientError: { errorType: 'ValidationError', message: ({ detail }: { detail: string }) => detail },
  mediaTypeUnsupported: {
    errorType: 'UnsupportedMediaType',
    message: 'Content-Type must be application/json (or application/x-ndjson for a batch).',
  },
  encodingUnsupported: {
    errorType: 'UnsupportedMediaType',
    message: ({ encoding }: { encoding: string }) => `Content-Encoding ${encoding} is not supported; send gzip or nothing.`,
  },
  internal: { errorType: 'InternalError', message: 'Internal error.' },
  noRoute: { errorType: 'NotFound', message: ({ method, path }: { method: string; path: string }) => `No route for ${method} ${path}.` },
  malformedUrl: { errorType: 'ValidationError', message: 'Malformed URL.' },
  malformedRequestLine: { errorType: 'ValidationError', message: 'Malformed request.' },
  // Ingest.
  idempotencyKeyHeaderInvalid: { errorType: 'ValidationError', message: 'Invalid Idempotency-Key header.' },
  idempotencyKeyMemberInvalid: { errorType: 'ValidationError', message: 'Invalid idempotencyKey.' },
  captureHeaderInvalid: { errorType: 'ValidationError', message: 'Invalid X-OTM-Capture header.' },
  recordInvalid: { errorType: 'ValidationError', message: 'The usage record does not match the schema.' },
  recordUnstorable: { errorType: 'ValidationError', message: 'The usage record holds values that cannot be stored.' },
  idempotencyKeyReused: {
    errorType: 'IdempotencyKeyReused',
    message: 'This Idempotency-Key was used for a different usage record; send a new key for a new record.',
  },
  idempotencyKeyReusedInRequest: {
    errorType: 'IdempotencyKeyReused',
    message: 'This idempotency key is used by another record of the request; send a new key for a new record.',
  },
  batchNotArray: { errorType: 'ValidationError', message: 'A batch is a JSON array of usage records (or NDJSON).' },
  batchEmpty: { errorType: 'ValidationError', message: 'The batch holds no records.' },
  batchTooManyRecords: {
    errorType: 'PayloadTooLarge',
    message: ({ max, count }: { max: number; count: number | 'more' }) => `A batch holds at most ${max} records; this one holds ${count}.`,
  },
  batchUnreadableLines: {
    errorType: 'ValidationError',
    message: ({ max }: { max: number }) => `More than ${max} lines of the batch are not JSON; no record was accepted.`,
  },
  batchNoneValid: { errorType: 'ValidationError', message: 'No record of the batch is valid; see results.' },
  exportTooManySpans: {
    errorType: 'PayloadTooLarge',
    message: ({ max, count }: { max: number; count: number }) => `An export holds at most ${max} spans; this one holds ${count}.`,
  },
  exportTooManyAttributes: {
    errorType: 'PayloadTooLarge',
    message: ({ max, count }: { max: number; count: number }) => `An export holds at most ${max} attributes; this one holds ${count}.`,
  },
  exportUnreadable: { errorType: 'ValidationError', message: ({ detail }: { detail: string }) => detail },
  queueUnavailable: { errorType: 'Unavailable', message: 'The queue is unavailable; the record was not accepted. Retry later.' },
  queueUnavailableBatch: { errorType: 'Unavailable', message: 'The queue is unavailable; no record was accepted. Retry later.' },
  queueUnavailableItem: { errorType: 'Unavailable', message: 'The queue is unavailable; this record was not accepted. Retry it.' },
  queueUnavailableExport: {
    errorType: 'Unavailable',
    message: 'The queue is unavailable; the spans were not all accepted. Retry the export.',
  },
  keyStoreUnreachable: { errorType: 'Unavailable', message: 'The key store is unreachable; retry later.' },
  // Admin.
  keyNotFound: { errorType: 'NotFound', message: 'No key with this id.' },
  erasureNotFound: { errorType: 'NotFound', message: 'No erasure job with this id.' },
  removalNotFound: { errorType: 'NotFound', message: 'No removal job with this id.' },
  keyNameInvalid: { errorType: 'ValidationError', message: 'The key name cannot be used.' },
  queryInvalid: { errorType: 'ValidationError', message: 'Invalid query parameters.' },
  queryTimeout: { errorType: 'QueryTimeout', message: ({ detail }: { detail: string }) => detail },
  analyticsUnavailable: { errorType: 'Unavailable', message: 'The analytics store is unavailable; retry later.' },
  keyStoreUnavailable: { errorType: 'Unavailable', message: 'The key store is unavailable; retry later.' },
  keyStoreUnavailableUnchanged: { errorType: 'Unavailable', message: 'The key store is unavailable; nothing was changed. Retry later.' },
  auditUnavailable: { errorType: 'Unavailable', message: 'The audit log is unavailable; retry later.' },
  auditUnavailableUnchanged: { errorType: 'Unavailable', message: 'The audit log is unavailable; nothing was changed. Retry later.' },
  kafkaUnavailable: { errorType: 'Unavailable', message: 'Kafka is unavailable; retry later.' },
} as const satisfies Record<string, Refusal>;

export type RefusalName = keyof typeof refusals;
type Details = ConstructorParameters<typeof ServiceError>[2];
type RefusalArgs<K extends RefusalName> =
  (typeof refusals)[K]['message'] extends Template<infer P> ? [params: P, details?: Details] : [details?: Details];

/** The refusal `name` as a ServiceError: its type and message from the catalog, with the details (field errors) given. */
export function refuse<K extends RefusalName>(name: K, ...args: RefusalArgs<K>): ServiceError {
  const refusal: Refusal = refusals[name];
  if (typeof refusal.message === 'string') return new ServiceError(refusal.errorType, refusal.message, args[0] as Details);
  return new ServiceError(refusal.errorType, (refusal.message as Template<unknown>)(args[0]), args[1] as Details);
}
