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
  InternalError: { statusCode: 500, retriable: true },
} as const;

export type ErrorType = keyof typeof errorCatalog;

export interface ErrorBody {
  statusCode: number;
  errorType: ErrorType;
  message: string;
  errors?: { path: string; message: string }[];
}

export class ServiceError extends Error {
  readonly statusCode: number;
  readonly retriable: boolean;
  constructor(
    readonly errorType: ErrorType,
    message: string,
    readonly details: { errors?: ErrorBody['errors']; retryAfterSeconds?: number } = {},
  ) {
    super(message);
    this.statusCode = errorCatalog[errorType].statusCode;
    this.retriable = errorCatalog[errorType].retriable;
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { statusCode: this.statusCode, errorType: this.errorType, message: this.message };
    if (this.details.errors) body.errors = this.details.errors;
    return body;
  }
}

export function errorBody(errorType: ErrorType, message: string): ErrorBody {
  return { statusCode: errorCatalog[errorType].statusCode, errorType, message };
}
