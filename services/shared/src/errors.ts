// One catalog of error codes for the HTTP services: each has a stable errorType,
// an HTTP status and whether a client may retry. Bodies never carry stack traces
// or internal details.
export const errorCatalog = {
  ValidationError: { statusCode: 400, retriable: false },
  AuthError: { statusCode: 401, retriable: false },
  NotFound: { statusCode: 404, retriable: false },
  RequestTimeout: { statusCode: 408, retriable: true },
  PayloadTooLarge: { statusCode: 413, retriable: false },
  UnsupportedMediaType: { statusCode: 415, retriable: false },
  IdempotencyKeyReused: { statusCode: 422, retriable: false },
  RateLimited: { statusCode: 429, retriable: true },
  Unavailable: { statusCode: 503, retriable: true },
  QueryTimeout: { statusCode: 504, retriable: false },
  InternalError: { statusCode: 500, retriable: true },
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
  let spent = 0;
  let cut = false;
  for (const entry of entries) {
    if (!entry.errors) continue;
    spent += JSON.stringify(entry.errors).length;
    if (spent > errorReportLimits.answerBytes) {
      delete entry.errors;
      entry.truncated = true;
      cut = true;
    }
  }
  return cut;
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

export function errorBody(errorType: ErrorType, message: string): ErrorBody {
  return { statusCode: errorCatalog[errorType].statusCode, errorType, message };
}
