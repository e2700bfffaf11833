// What both HTTP services (gateway and admin) do the same way at the edge: bounded
// connections (a slow or idle client cannot hold a socket), the documented error
// body for what Node and Fastify would otherwise answer in their own words (a
// malformed request line, a bad URL), and a JSON parser that refuses deep nesting
// before it parses.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import secureJson from 'secure-json-parse';
import { Counter, Histogram, type Registry } from 'prom-client';
import { v7 as uuidv7 } from 'uuid';
import { exceedsJsonDepth } from '@otm/schemas';
import { ServiceError, refuse } from './errors.js';
import { nonNegativeInt, positiveInt } from './config.js';

export interface ConnectionLimits {
  /** The whole request, headers and body, must arrive within this. */
  requestTimeoutMs: number;
  /** The headers (and the TLS handshake) must arrive within this. */
  headersTimeoutMs: number;
  /** An idle keep-alive connection closes after this. */
  keepAliveTimeoutMs: number;
  /** Open connections at most; past it a new connection is closed at once (0: no cap). */
  maxConnections: number;
}

/** The environment variables of ConnectionLimits, for each service's config spec. */
export const connectionLimitsSpec = {
  REQUEST_TIMEOUT_MS: positiveInt({ default: 10_000, desc: 'A request (headers and body) must arrive whole within this' }),
  HEADERS_TIMEOUT_MS: positiveInt({ default: 5_000, desc: 'Headers (and the TLS handshake) must arrive within this' }),
  KEEP_ALIVE_TIMEOUT_MS: nonNegativeInt({ default: 5_000, desc: 'An idle keep-alive connection closes after this' }),
  MAX_CONNECTIONS: nonNegativeInt({
    default: 10_000,
    desc: 'Open connections at most; past it a new connection is closed at once and counted (0: no cap)',
  }),
  JSON_MAX_DEPTH: positiveInt({ default: 32, desc: 'Deepest JSON nesting accepted in a body (checked before parsing)' }),
};

export function connectionLimitsFrom(config: {
  REQUEST_TIMEOUT_MS: number;
  HEADERS_TIMEOUT_MS: number;
  KEEP_ALIVE_TIMEOUT_MS: number;
  MAX_CONNECTIONS: number;
}): ConnectionLimits {
  if (config.HEADERS_TIMEOUT_MS > config.REQUEST_TIMEOUT_MS) throw new Error('HEADERS_TIMEOUT_MS: must not exceed REQUEST_TIMEOUT_MS');
  return {
    requestTimeoutMs: config.REQUEST_TIMEOUT_MS,
    headersTimeoutMs: config.HEADERS_TIMEOUT_MS,
    keepAliveTimeoutMs: config.KEEP_ALIVE_TIMEOUT_MS,
    maxConnections: config.MAX_CONNECTIONS,
  };
}

/**
 * Fastify options bounding every connection. Node checks its header and request
 * timeouts on a timer (30 s by default): the check runs every second here so a limit
 * of 5 s means about 5 s. A TLS handshake has the header limit; a socket that sends
 * nothing at all is closed by the idle timeout.
 */
export function edgeServerOptions(
  limits: ConnectionLimits,
  tls?: { key: Buffer; cert: Buffer },
  /** The longest a route may take to answer (the admin service's analytics limit): the socket's idle limit stays above it. */
  longestAnswerMs = 0,
): FastifyServerOptions & object {
  const node = {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1000, limits.headersTimeoutMs),
  };
  return {
    // Every request gets an id of ours (a UUIDv7, time-ordered), never one a client sent.
    requestIdHeader: false,
    genReqId: () => uuidv7(),
    requestTimeout: limits.requestTimeoutMs,
    // A socket silent this long is destroyed without an answer: never while a route is still
    // within its own limit, nor before the request limit's 408 (checked every second: a
    // request whose body stopped arriving is answered RequestTimeout, not dropped).
    connectionTimeout: Math.max(limits.requestTimeoutMs + 2 * Math.min(1000, limits.headersTimeoutMs), longestAnswerMs + 5000),
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    ...(tls ? { https: { ...tls, minVersion: 'TLSv1.2', handshakeTimeout: limits.headersTimeoutMs, ...node } } : { http: node }),
    clientErrorHandler: answerClientError,
    frameworkErrors: (error: Error & { code?: string }, _request: FastifyRequest, reply: FastifyReply) => {
      const body = refuse(error.code === 'FST_ERR_BAD_URL' ? 'malformedUrl' : 'malformedRequestLine').toBody();
      void reply.code(body.statusCode).send(body);
    },
  } as FastifyServerOptions & object;
}

/**
 * How long a connection closed after an error answer may linger, whatever the client
 * keeps sending: the answer is flushed, then the socket is destroyed (a client that
 * ignores the FIN and trickles bytes cannot hold a file descriptor).
 */
export const ERROR_LINGER_MS = 2_000;

/** What is still read and thrown away of a body after an early answer, at most. */
export const earlyAnswerDiscard = { bytes: 64 * 1024 * 1024, ms: ERROR_LINGER_MS };

/**
 * The rest of a body that was answered early (a 413 at the size limit, a zip bomb
 * stopped while inflating, a 401 before the body) is read off the wire and thrown
 * away, raw and never inflated, so a client still sending its body reads the answer
 * instead of a connection reset (the race that makes clients report EPIPE instead of
 * the 413). Bounded, like a web server's lingering close: past `earlyAnswerDiscard`
 * bytes or milliseconds the connection is closed.
 */
function discardRestOfBody(raw: IncomingMessage, closing: boolean): void {
  raw.unpipe();
  raw.removeAllListeners('data');
  const close = () => raw.socket?.destroy();
  const timer = setTimeout(close, earlyAnswerDiscard.ms);
  timer.unref();
  let discarded = 0;
  raw.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > earlyAnswerDiscard.bytes) close();
  });
  raw.once('close', () => clearTimeout(timer));
  const socket = raw.socket;
  if (closing && socket) {
    // The answer closes the connection (the client sent Connection: close). Node does
    // that with destroySoon() once the answer is written, which resets a connection
    // still receiving: here it only half-closes (FIN after the answer) and reads on;
    // the connection ends when the client has sent its body and closed (or at the bound).
    socket.destroySoon = function halfClose(this: Socket) {
      this.end();
    };
    // Once the body has all arrived (and the answer is out: end() flushes first).
    raw.once('end', () => socket.end());
    // And gone within the linger however the client behaves.
    destroyAfterLinger(socket);
  }
  raw.resume();
}

/** Requests Node refuses before Fastify sees them, answered with the documented body. */
function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const refusal = refuse(
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? 'requestTimeout'
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? 'headersTooLarge'
        : 'malformedRequest',
  );
  const status = refusal.statusCode;
  const body = JSON.stringify(refusal.toBody());
  const reason = status === 408 ? 'Request Timeout' : status === 431 ? 'Request Header Fields Too Large' : 'Bad Request';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
  destroyAfterLinger(socket);
}

/** end() only half-closes: a client that ignores the FIN keeps the socket. Destroyed after ERROR_LINGER_MS whatever it sends. */
function destroyAfterLinger(socket: Socket): void {
  const timer = setTimeout(() => socket.destroy(), ERROR_LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}

/**
 * Parses one JSON text: nesting deeper than `maxDepth` is refused by a scan before
 * parsing (a hostile body costs one pass over its text), then parsed with prototype
 * poisoning refused, as Fastify's own parser does. Throws ServiceError (400).
 */
export function parseJsonText(text: string, maxDepth: number, what = 'The request body'): unknown {
  if (exceedsJsonDepth(text, maxDepth)) {
    throw refuse(
      'textTooDeep',
      { what, maxDepth },
      {
        errors: [{ path: '/', message: `must not nest deeper than ${maxDepth} levels` }],
      },
    );
  }
  if (text.length === 0) {
    throw refuse('textEmpty', { what }, { errors: [{ path: '/', message: 'is required' }] });
  }
  try {
    // secure-json-parse refuses a "__proto__" or "constructor" key, spelled with escapes
    // or not, by two regular expressions over the whole text after parsing it: about
    // 5 us for a record of a few kilobytes. A text without either word and without any
    // \u escape cannot hold such a key, and is parsed as it would have been (a byte
    // order mark dropped first), without them.
    if (!text.includes('\\u') && !text.includes('__proto__') && !text.includes('constructor')) {
      return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    }
    return secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch {
    throw refuse('textNotJson', { what }, { errors: [{ path: '/', message: 'must be valid JSON' }] });
  }
}

/**
 * application/json bodies, parsed by parseJsonText. JSON only: Fastify's text/plain
 * parser is removed, so any other Content-Type is a 415 on both services (the admin
 * service used to take text/plain and answer 400).
 */
export function registerJsonParser(app: FastifyInstance, maxDepth: number): void {
  app.removeContentTypeParser('text/plain');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, text, done) => {
    try {
      done(null, parseJsonText(text as string, maxDepth));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
}

/**
 * Any error out of a route or of Fastify itself, as the documented error: ours pass
 * through; Fastify's (body too large, wrong media type, schema validation of a query,
 * unparsable JSON, bad gzip) get their catalog type; anything else is an internal error
 * (500), its details logged and never sent.
 */
export function toServiceError(error: FastifyError & { decompressError?: unknown }): ServiceError {
  if (error instanceof ServiceError) return error;
  if (error.decompressError !== undefined) {
    return refuse('bodyNotGzip', {
      errors: [{ path: '/', message: 'must be gzip-compressed as Content-Encoding says' }],
    });
  }
  if (error.validation) {
    return refuse('parametersInvalid', {
      errors: error.validation.map((issue) => ({ path: issuePath(issue), message: issue.message ?? 'is invalid' })),
    });
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return refuse('bodyTooLarge');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return refuse('mediaTypeUnsupported');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return refuse('contentLengthMismatch');
  }
  if (error.statusCode === 400 || error instanceof SyntaxError) {
    return refuse('bodyNotJson', {
      errors: [{ path: '/', message: 'must be valid JSON' }],
    });
  }
  if (error.statusCode === 413) return refuse('bodyTooLarge');
  if (error.statusCode === 415) return refuse('mediaTypeUnsupported');
  if (error.statusCode !== undefined && error.statusCode > 400 && error.statusCode < 500) {
    return refuse('clientError', { detail: error.message });
  }
  return refuse('internal');
}

/** Where a schema-validation issue is: the instance path, with the missing or extra member named. */
function issuePath(issue: NonNullable<FastifyError['validation']>[number]): string {
  const params = issue.params as { missingProperty?: string; additionalProperty?: string };
  const member =
    issue.keyword === 'required'
      ? `/${params.missingProperty}`
      : issue.keyword === 'additionalProperties'
        ? `/${params.additionalProperty}`
        : '';
  return `${issue.instancePath || ''}${member}` || '/';
}

export interface EdgeOptions {
  /** Retry-After (seconds) of a 503 or 429 answer that did not set its own. */
  retryAfterSeconds: number;
  /** Sees every error answer before it is sent (the gateway counts them). */
  onErrorAnswer?: (error: ServiceError, request: FastifyRequest) => void;
  /**
   * Level of the access log line written for every answered request (request id,
   * method, route, status, milliseconds; never a body or a credential). The gateway
   * logs at debug (thousands a second), the admin service at info.
   */
  accessLog: 'info' | 'debug';
  /**
   * The one request metric, counted once per answer in onResponse:
   * `<prefix>_requests_total{route,status}` and `<prefix>_request_seconds{route}`.
   */
  metrics?: { registry: Registry; prefix: string };
  /** `GET /healthz` (the process answers) and `GET /readyz` (200 while `ready()`, else 503), without a key. */
  health?: { ready: () => Promise<boolean> };
  /** The cap on open connections (ConnectionLimits.maxConnections); a connection past it is closed and counted. */
  maxConnections?: number;
}

/**
 * The one edge of both HTTP services: every answer carries its request id
 * (`x-request-id`, the id the logs and the Kafka header carry); every error is
 * answered with the documented body (errors.ts), Retry-After on 503 and 429, a 5xx
 * logged with its request id, and an unknown route a 404 with the same body.
 */
export function registerEdge(app: FastifyInstance, options: EdgeOptions): void {
  const answered = options.metrics && requestMetrics(options.metrics.registry, options.metrics.prefix);
  if (options.maxConnections) {
    app.server.maxConnections = options.maxConnections;
    const dropped =
      options.metrics &&
      new Counter({
        name: `${options.metrics.prefix}_connections_dropped_total`,
        help: 'Connections closed on arrival because the server held its maximum (MAX_CONNECTIONS)',
        registers: [options.metrics.registry],
      });
    app.server.on('drop', () => dropped?.inc());
  }
  // HTTP/0.9 has no headers and no status line: nothing of ours can be said in it.
  app.addHook('onRequest', async (request, reply) => {
    if (request.raw.httpVersionMajor < 1) {
      reply.header('connection', 'close');
      throw refuse('malformedRequest');
    }
  });
  app.addHook('onSend', async (request, reply, payload) => {
    reply.header('x-request-id', request.id);
    // No answer is ever to be sniffed as something else (a 404 repeats the path).
    reply.header('x-content-type-options', 'nosniff');
    // A request with a body (a bodiless GET can be answered before Node marks it complete).
    const hasBody = request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0;
    if (hasBody && request.raw.complete === false) {
      // Answered before the body has all arrived (413, or 401 before the body): the
      // connection stays open while the rest is thrown away (see discardRestOfBody).
      reply.removeHeader('connection');
      discardRestOfBody(request.raw, !reply.raw.shouldKeepAlive);
    }
    return payload;
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? '(no route)';
    answered?.count.inc({ route, status: String(reply.statusCode) });
    answered?.seconds.observe({ route }, reply.elapsedTime / 1000);
    request.log[options.accessLog](
      { requestId: request.id, method: request.method, route, status: reply.statusCode, ms: Math.round(reply.elapsedTime) },
      'answered',
    );
  });
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const serviceError = toServiceError(error);
    if ((serviceError.errorType === 'Unavailable' || serviceError.errorType === 'RateLimited') && !reply.hasHeader('retry-after')) {
      reply.header('retry-after', String(options.retryAfterSeconds));
    }
    if (serviceError.statusCode >= 500) request.log.error({ err: error, requestId: request.id }, 'request failed');
    options.onErrorAnswer?.(serviceError, request);
    return reply.code(serviceError.statusCode).send(serviceError.toBody());
  });
  app.setNotFoundHandler((request, reply) => {
    const body = refuse('noRoute', { method: request.method, path: request.url.split('?')[0]! }).toBody();
    reply.code(body.statusCode).send(body);
  });
  if (options.health) {
    const { ready } = options.health;
    app.get('/healthz', async () => ({ status: 'ok' }));
    app.get('/readyz', async (_request, reply) => {
      const isReady = await ready().catch(() => false);
      return reply.code(isReady ? 200 : 503).send({ status: isReady ? 'ready' : 'unavailable' });
    });
  }
}

/** A check of one dependency; `onFailure` runs when it rejects or times out (to replace a broken client). */
export type ReadinessCheck = (() => Promise<unknown>) | { check: () => Promise<unknown>; onFailure: () => void };

/**
 * A `/readyz` answer from checks of the dependencies: ready when every check resolves
 * within `timeoutMs`; the answer is kept `cacheMs`, so probes cost the dependencies
 * at most one round of checks a second.
 */
export function readinessOf(checks: ReadinessCheck[], timeoutMs = 1000, cacheMs = 1000): () => Promise<boolean> {
  let last = { at: 0, ready: false };
  const bounded = (entry: ReadinessCheck) => {
    const { check, onFailure } = typeof entry === 'function' ? { check: entry, onFailure: undefined } : entry;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), timeoutMs)));
    return Promise.race([check(), timeout])
      .catch((error: unknown) => {
        onFailure?.();
        throw error;
      })
      .finally(() => clearTimeout(timer));
  };
  return async () => {
    if (Date.now() - last.at < cacheMs) return last.ready;
    const results = await Promise.allSettled(checks.map(bounded));
    last = { at: Date.now(), ready: results.every((result) => result.status === 'fulfilled') };
    return last.ready;
  };
}

/** The edge's request metrics, registered on `registry` (exported for the alert-rule check). */
export function requestMetrics(registry: Registry, prefix: string) {
  return {
    count: new Counter({
      name: `${prefix}_requests_total`,
      help: 'Answered HTTP requests by route (the route pattern; "(no route)" for a 404) and status',
      labelNames: ['route', 'status'],
      registers: [registry],
    }),
    seconds: new Histogram({
      name: `${prefix}_request_seconds`,
      help: 'Time from request to answer, by route',
      labelNames: ['route'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
  };
}
