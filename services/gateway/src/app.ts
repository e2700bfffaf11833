// The ingest endpoint: authenticate (before the body is read) -> parse -> validate
// against the registered schema -> build the queued record -> produce -> 202.
// buildApp() only assembles; server.ts connects the real dependencies and listens.
import { createHash } from 'node:crypto';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import Fastify, { LogController } from 'fastify';
import compress from '@fastify/compress';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { v7 as uuidv7 } from 'uuid';
import {
  checkRecordBounds,
  toFieldErrors,
  type QueuedUsageRecord,
  type RecordBounds,
  type UsageRecord,
  type Validators,
} from '@otm/schemas';
import { errorBody, ServiceError } from '@otm/shared/errors';
import { edgeServerOptions, registerJsonParser, type ConnectionLimits } from '@otm/shared/http-edge';
import type { Logger } from '@otm/shared/logger';
import { encodeWire } from '@otm/shared/registry';
import type { ApiKeyRecord } from '@otm/shared/keys/key-store';
import { hashKey, parseKey } from '@otm/shared/keys/key-format';
import { ProduceUnavailableError, type QueuedMessage } from './produce-batcher.js';
import type { GatewayMetrics } from './metrics.js';

export interface AcceptedReply {
  requestId: string;
  timestamp: string;
  /**
   * SHA-256 of the accepted record as parsed (whitespace and transfer encoding of the
   * body do not matter; member order does): a replay with another record is refused.
   */
  digest: string;
}

export interface GatewayDeps {
  logger: Logger;
  keyCache: { lookup(hash: string): ApiKeyRecord | null | Promise<ApiKeyRecord | null> };
  validators: Pick<Validators, 'usageRecord'>;
  schemaId: number;
  batcher: { enqueue(message: QueuedMessage): Promise<void> };
  metrics: GatewayMetrics;
  /** Answers whether Kafka, Redis and the registry are reachable. */
  ready(): Promise<boolean>;
  /** Recently accepted scoped idempotency keys, to answer retries with the original requestId. */
  replay?: { get(key: string): AcceptedReply | undefined; set(key: string, value: AcceptedReply): unknown };
}

export interface GatewayOptions {
  instanceId: string;
  bodyLimitBytes: number;
  retryAfterSeconds: number;
  /** Records per second per key (0: no limit) and how many may come at once. */
  rateLimit: { perSecond: number; burst: number };
  connectionLimits: ConnectionLimits;
  jsonMaxDepth: number;
  recordBounds: RecordBounds;
  https?: { key: Buffer; cert: Buffer };
}

declare module 'fastify' {
  interface FastifyRequest {
    apiKey: ApiKeyRecord;
  }
}

const IDEMPOTENCY_KEY = /^[\x20-\x7E]{1,255}$/;
const BEARER = /^Bearer[ ]+(\S+)[ ]*$/i;

const acceptedSchema = {
  type: 'object',
  properties: {
    requestId: { type: 'string' },
    status: { type: 'string' },
    message: { type: 'string' },
    timestamp: { type: 'string' },
    usage: {
      type: 'object',
      properties: { inputTokens: { type: 'integer' }, outputTokens: { type: 'integer' }, totalTokens: { type: 'integer' } },
    },
  },
} as const;

export async function buildApp(options: GatewayOptions, deps: GatewayDeps): Promise<FastifyInstance> {
  const serverOptions: FastifyServerOptions = {
    ...edgeServerOptions(options.connectionLimits, options.https),
    loggerInstance: deps.logger,
    // Request lines are logged by our own hooks (without bodies); Fastify's own are off.
    logController: new LogController({ disableRequestLogging: true } as never),
    bodyLimit: options.bodyLimitBytes,
    requestIdHeader: false,
    genReqId: () => uuidv7(),
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  };
  const app = Fastify(serverOptions) as unknown as FastifyInstance;
  app.decorateRequest('apiKey', null as unknown as ApiKeyRecord);
  // JSON only: without its text/plain parser, any other Content-Type is a 415.
  app.removeContentTypeParser('text/plain');
  registerJsonParser(app, options.jsonMaxDepth);
  // Node answers `Expect: 100-continue` itself unless someone listens: we listen, and
  // send the 100 only once the key is known (authenticate), so an unauthenticated
  // client is never invited to send its body.
  app.server.on('checkContinue', (request, response) => app.server.emit('request', request, response));
  // gzip bodies are inflated as they are read; bodyLimit counts the inflated bytes,
  // so a zip bomb stops at the limit (413) and is never inflated whole.
  await app.register(compress, {
    globalCompression: false,
    requestEncodings: ['gzip'],
    onUnsupportedRequestEncoding: (encoding: string) =>
      new ServiceError('UnsupportedMediaType', `Content-Encoding ${encoding} is not supported; send gzip or nothing.`),
  });

  const unavailable = (reply: FastifyReply, message: string) => {
    reply.header('retry-after', String(options.retryAfterSeconds));
    return new ServiceError('Unavailable', message);
  };

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const serviceError = toServiceError(error);
    if (serviceError.errorType === 'Unavailable' || serviceError.errorType === 'RateLimited') {
      if (!reply.hasHeader('retry-after')) reply.header('retry-after', String(options.retryAfterSeconds));
    }
    if (serviceError.statusCode >= 500) request.log.error({ err: error, requestId: request.id }, 'request failed');
    deps.metrics.requests.inc({ status: String(serviceError.statusCode) });
    if (serviceError.errorType === 'ValidationError') deps.metrics.validationFailures.inc();
    return reply.code(serviceError.statusCode).send(serviceError.toBody());
  });

  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send(errorBody('NotFound', `No route for ${request.method} ${request.url.split('?')[0]}.`));
  });

  // Authentication runs on onRequest, before the body is read (as at an edge): a
  // request without a valid key is answered 401 without parsing its body.
  async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const key = credentialsOf(request);
    const environment = parseKey(key);
    if (environment === undefined) throw new ServiceError('AuthError', 'API key missing or incorrect.');
    let record: ApiKeyRecord | null;
    try {
      record = await deps.keyCache.lookup(hashKey(key));
    } catch {
      throw unavailable(reply, 'The key store is unreachable; retry later.');
    }
    if (!record) throw new ServiceError('AuthError', 'API key missing or incorrect.');
    request.apiKey = record;

    if (request.headers.expect?.toLowerCase() === '100-continue') reply.raw.writeContinue();
  }

  // Per key: a fixed window of burst/perSecond seconds holding `burst` records, so a
  // key sustains perSecond and may send a burst at once. In memory, per gateway.
  const { perSecond, burst } = options.rateLimit;
  const limiter =
    perSecond > 0 ? new RateLimiterMemory({ points: burst, duration: Math.max(1, Math.round(burst / perSecond)) }) : undefined;
  async function rateLimited(request: FastifyRequest, reply: FastifyReply, records = 1): Promise<void> {
    if (!limiter) return;
    try {
      await limiter.consume(request.apiKey.id, records);
    } catch (refusal) {
      if (!(refusal instanceof RateLimiterRes)) throw refusal;
      reply.header('retry-after', String(Math.max(1, Math.ceil(refusal.msBeforeNext / 1000))));
      throw new ServiceError('RateLimited', `Rate limit of ${perSecond} records per second (bursts of ${burst}) exceeded for this key.`);
    }
  }

  app.post(
    '/v1/telemetry/usage',
    {
      onRequest: authenticate,
      preHandler: (request, reply) => rateLimited(request, reply),
      schema: { response: { 202: acceptedSchema } },
    },
    async (request, reply) => {
      const receivedAt = new Date();
      const idempotencyKey = idempotencyKeyOf(request);
      const body = request.body;
      if (!deps.validators.usageRecord(body)) {
        throw new ServiceError('ValidationError', 'The usage record does not match the schema.', {
          errors: toFieldErrors(deps.validators.usageRecord.errors),
        });
      }
      const record = body as UsageRecord;
      // What the schema cannot say: the store must be able to hold every value.
      const outOfBounds = checkRecordBounds(record as unknown as Record<string, unknown>, options.recordBounds, receivedAt.getTime());
      if (outOfBounds.length > 0) {
        throw new ServiceError('ValidationError', 'The usage record holds values that cannot be stored.', { errors: outOfBounds });
      }
      const usage = usageOf(record);
      // Two customers using the same idempotency string never collide.
      const eventKey = idempotencyKey ? `${request.apiKey.id}:${idempotencyKey}` : request.id;

      normaliseStack(record);
      // The record is serialised once: for the replay digest and inside the queued value.
      const recordJson = JSON.stringify(record);
      const digest = idempotencyKey && deps.replay ? createHash('sha256').update(recordJson).digest('base64url') : '';
      const previous = idempotencyKey ? deps.replay?.get(eventKey) : undefined;
      if (previous) {
        if (previous.digest !== digest) {
          throw new ServiceError(
            'IdempotencyKeyReused',
            'This Idempotency-Key was used for a different usage record; send a new key for a new record.',
          );
        }
        deps.metrics.requests.inc({ status: '202' });
        deps.metrics.replays.inc();
        return reply.code(202).send(accepted(previous, usage));
      }

      const meta: QueuedUsageRecord['meta'] = {
        requestId: request.id,
        eventKey,
        receivedAt: receivedAt.toISOString(),
        apiKeyId: request.apiKey.id,
        environment: request.apiKey.environment,
        idempotencyKey: idempotencyKey ?? null,
        gatewayId: options.instanceId,
      };
      // The queued value is the envelope {meta, record} of the registered schema.
      const queuedJson = `{"meta":${JSON.stringify(meta)},"record":${recordJson}}`;
      try {
        await deps.batcher.enqueue({ key: eventKey, value: encodeWire(deps.schemaId, queuedJson) });
      } catch (error) {
        if (error instanceof ProduceUnavailableError) {
          request.log.warn({ requestId: request.id, reason: error.message }, 'produce unavailable');
          throw unavailable(reply, 'The queue is unavailable; the record was not accepted. Retry later.');
        }
        throw error;
      }
      const answer = { requestId: request.id, timestamp: meta.receivedAt, digest };
      if (idempotencyKey) deps.replay?.set(eventKey, answer);
      deps.metrics.requests.inc({ status: '202' });
      return reply.code(202).send(accepted(answer, usage));
    },
  );

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const ready = await deps.ready().catch(() => false);
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'unavailable' });
  });

  return app;
}

/** The Idempotency-Key header, checked: one header, 1 to 255 printable ASCII characters. */
function idempotencyKeyOf(request: FastifyRequest): string | undefined {
  // Node joins repeated headers with ", "; the distinct values tell two headers from one.
  const values = request.raw.headersDistinct['idempotency-key'];
  if (values === undefined) return undefined;
  if (values.length !== 1 || !IDEMPOTENCY_KEY.test(values[0]!)) {
    throw new ServiceError('ValidationError', 'Invalid Idempotency-Key header.', {
      errors: [
        {
          path: 'header:Idempotency-Key',
          message: values.length !== 1 ? 'must be sent once' : 'must be 1 to 255 printable ASCII characters',
        },
      ],
    });
  }
  return values[0];
}

/** The one key of the request: form A, form B, or both when they agree. */
function credentialsOf(request: FastifyRequest): string {
  const headerKey = request.headers['x-api-key'];
  const authorization = request.headers.authorization;
  if (Array.isArray(headerKey)) throw new ServiceError('AuthError', 'API key missing or incorrect.');
  let bearer: string | undefined;
  if (authorization !== undefined) {
    const match = BEARER.exec(authorization);
    if (!match) throw new ServiceError('AuthError', 'API key missing or incorrect.');
    bearer = match[1];
  }
  if (headerKey !== undefined && bearer !== undefined && headerKey !== bearer) {
    throw new ServiceError('AuthError', 'Ambiguous credentials: X-API-Key and Authorization carry different keys.');
  }
  const key = headerKey ?? bearer;
  if (key === undefined || key === '') throw new ServiceError('AuthError', 'API key missing or incorrect.');
  return key;
}

function usageOf(record: UsageRecord) {
  const input = record.tokens?.input ?? 0;
  const output = record.tokens?.output ?? 0;
  return { inputTokens: input, outputTokens: output, totalTokens: record.tokens?.total ?? input + output };
}

function accepted(answer: AcceptedReply, usage: ReturnType<typeof usageOf>) {
  return {
    requestId: answer.requestId,
    status: 'accepted',
    message: 'Usage record accepted for processing.',
    timestamp: answer.timestamp,
    usage,
  };
}

/** The stack trace travels as `stack` whichever name the client used. */
function normaliseStack(record: UsageRecord): void {
  const error = record.error;
  if (error && error.stacktrace !== undefined) {
    error.stack = error.stacktrace;
    delete error.stacktrace;
  }
}

function toServiceError(error: FastifyError & { decompressError?: unknown }): ServiceError {
  if (error instanceof ServiceError) return error;
  if (error.decompressError !== undefined) {
    return new ServiceError('ValidationError', 'The request body is not valid gzip (Content-Encoding: gzip).', {
      errors: [{ path: '/', message: 'must be gzip-compressed as Content-Encoding says' }],
    });
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ServiceError('PayloadTooLarge', 'The request body is larger than the limit.');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ServiceError('UnsupportedMediaType', 'Content-Type must be application/json.');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ServiceError('ValidationError', 'Content-Length does not match the body.');
  }
  if (error.statusCode === 400 || error instanceof SyntaxError) {
    return new ServiceError('ValidationError', 'The request body is not valid JSON.', {
      errors: [{ path: '/', message: 'must be valid JSON' }],
    });
  }
  if (error.statusCode === 413) return new ServiceError('PayloadTooLarge', 'The request body is larger than the limit.');
  if (error.statusCode === 415) return new ServiceError('UnsupportedMediaType', 'Content-Type must be application/json.');
  return new ServiceError('InternalError', 'Internal error.');
}
