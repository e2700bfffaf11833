// Who may ingest, and how much: the API key of a request (X-API-Key or a bearer
// token, checked before the body is read, as at an edge) and the per-key rate limit.
// Both run as route hooks of the ingest endpoints (app.ts, batch-route.ts).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { ServiceError, refuse } from '@otm/shared/errors';
import type { IngestKeyRecord } from '@otm/shared/keys/key-store';
import { hashKey, parseKey } from '@otm/shared/keys/key-format';

declare module 'fastify' {
  interface FastifyRequest {
    /** The key of an authenticated ingest request (set by authenticate). */
    apiKey: IngestKeyRecord;
  }
}

const BEARER = /^Bearer[ ]+(\S+)[ ]*$/i;

export interface IngestAuth {
  /** onRequest hook: sets request.apiKey or throws 401 (503 when the key store is unreachable). */
  authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** preHandler: takes `records` from the key's allowance or throws 429 with Retry-After. */
  rateLimited(request: FastifyRequest, reply: FastifyReply, records?: number): Promise<void>;
}

export interface KeyLookup {
  lookup(hash: string): IngestKeyRecord | null | Promise<IngestKeyRecord | null>;
  /** The cached answer without asking the store; undefined when none is held. */
  peek?(hash: string): IngestKeyRecord | null | undefined;
}

export function createIngestAuth(
  keyCache: KeyLookup,
  rateLimit: { perSecond: number; burst: number },
  unavailable: (reply: FastifyReply, refusal: 'keyStoreUnreachable') => ServiceError,
  /** Failed authentications per client address per minute before look-ups of uncached keys are refused (0: no limit). */
  authFailuresPerMinute = 0,
): IngestAuth {
  const failures = authFailuresPerMinute > 0 ? new RateLimiterMemory({ points: authFailuresPerMinute, duration: 60 }) : undefined;

  // Authentication runs on onRequest, before the body is read (as at an edge): a
  // request without a valid key is answered 401 without parsing its body.
  async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    try {
      request.apiKey = await authenticated(request, reply);
    } catch (error) {
      if (failures && error instanceof ServiceError && error.errorType === 'AuthError') await failures.penalty(request.ip, 1);
      throw error;
    }
    if (request.headers.expect?.toLowerCase() === '100-continue') reply.raw.writeContinue();
  }

  async function authenticated(request: FastifyRequest, reply: FastifyReply): Promise<IngestKeyRecord> {
    const key = credentialsOf(request);
    const environment = parseKey(key);
    if (environment === undefined) throw refuse('apiKeyInvalid');
    const hash = hashKey(key);
    // An address past its failed authentications is not given another look-up in the key
    // store: only keys the gateway holds are still answered for it (a valid key behind
    // the same address keeps working; a flood of guessed keys costs no round trip).
    if (failures && keyCache.peek?.(hash) === undefined) {
      const spent = await failures.get(request.ip);
      if (spent && spent.remainingPoints <= 0) {
        reply.header('retry-after', String(Math.max(1, Math.ceil(spent.msBeforeNext / 1000))));
        throw refuse('authFailuresLimited', { perMinute: authFailuresPerMinute });
      }
    }
    let record: IngestKeyRecord | null;
    try {
      record = await keyCache.lookup(hash);
    } catch {
      throw unavailable(reply, 'keyStoreUnreachable');
    }
    if (!record) throw refuse('apiKeyInvalid');
    return record;
  }

  // Per key: a fixed window of burst/perSecond seconds holding `burst` records, so a
  // key sustains perSecond and may send a burst at once. In memory, per gateway.
  const { perSecond, burst } = rateLimit;
  const limiter =
    perSecond > 0 ? new RateLimiterMemory({ points: burst, duration: Math.max(1, Math.round(burst / perSecond)) }) : undefined;
  async function rateLimited(request: FastifyRequest, reply: FastifyReply, records = 1): Promise<void> {
    if (!limiter) return;
    try {
      await limiter.consume(request.apiKey.id, records);
    } catch (refusal) {
      if (!(refusal instanceof RateLimiterRes)) throw refusal;
      reply.header('retry-after', String(Math.max(1, Math.ceil(refusal.msBeforeNext / 1000))));
      throw refuse('rateLimited', { perSecond, burst });
    }
  }

  return { authenticate, rateLimited };
}

/** The one key of the request: form A, form B, or both when they agree. */
function credentialsOf(request: FastifyRequest): string {
  const headerKey = request.headers['x-api-key'];
  const authorization = request.headers.authorization;
  if (Array.isArray(headerKey)) throw refuse('apiKeyInvalid');
  let bearer: string | undefined;
  if (authorization !== undefined) {
    const match = BEARER.exec(authorization);
    if (!match) throw refuse('apiKeyInvalid');
    bearer = match[1];
  }
  if (headerKey !== undefined && bearer !== undefined && headerKey !== bearer) {
    throw refuse('apiKeyAmbiguous');
  }
  const key = headerKey ?? bearer;
  if (key === undefined || key === '') throw refuse('apiKeyInvalid');
  return key;
}
