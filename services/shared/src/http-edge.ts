// What both HTTP services (gateway and admin) do the same way at the edge: bounded
// connections (a slow or idle client cannot hold a socket), the documented error
// body for what Node and Fastify would otherwise answer in their own words (a
// malformed request line, a bad URL), and a JSON parser that refuses deep nesting
// before it parses.
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import secureJson from 'secure-json-parse';
import { exceedsJsonDepth } from '@otm/schemas';
import { errorBody, ServiceError, type ErrorType } from './errors.js';
import { nonNegativeInt, positiveInt } from './config.js';

export interface ConnectionLimits {
  /** The whole request, headers and body, must arrive within this. */
  requestTimeoutMs: number;
  /** The headers (and the TLS handshake) must arrive within this. */
  headersTimeoutMs: number;
  /** An idle keep-alive connection closes after this. */
  keepAliveTimeoutMs: number;
}

/** The environment variables of ConnectionLimits, for each service's config spec. */
export const connectionLimitsSpec = {
  REQUEST_TIMEOUT_MS: positiveInt({ default: 10_000, desc: 'A request (headers and body) must arrive whole within this' }),
  HEADERS_TIMEOUT_MS: positiveInt({ default: 5_000, desc: 'Headers (and the TLS handshake) must arrive within this' }),
  KEEP_ALIVE_TIMEOUT_MS: nonNegativeInt({ default: 5_000, desc: 'An idle keep-alive connection closes after this' }),
  JSON_MAX_DEPTH: positiveInt({ default: 32, desc: 'Deepest JSON nesting accepted in a body (checked before parsing)' }),
};

export function connectionLimitsFrom(config: {
  REQUEST_TIMEOUT_MS: number;
  HEADERS_TIMEOUT_MS: number;
  KEEP_ALIVE_TIMEOUT_MS: number;
}): ConnectionLimits {
  if (config.HEADERS_TIMEOUT_MS > config.REQUEST_TIMEOUT_MS) throw new Error('HEADERS_TIMEOUT_MS: must not exceed REQUEST_TIMEOUT_MS');
  return {
    requestTimeoutMs: config.REQUEST_TIMEOUT_MS,
    headersTimeoutMs: config.HEADERS_TIMEOUT_MS,
    keepAliveTimeoutMs: config.KEEP_ALIVE_TIMEOUT_MS,
  };
}

/**
 * Fastify options bounding every connection. Node checks its header and request
 * timeouts on a timer (30 s by default): the check runs every second here so a limit
 * of 5 s means about 5 s. A TLS handshake has the header limit; a socket that sends
 * nothing at all is closed by the idle timeout.
 */
export function edgeServerOptions(limits: ConnectionLimits, tls?: { key: Buffer; cert: Buffer }): FastifyServerOptions & object {
  const node = {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1000, limits.headersTimeoutMs),
  };
  return {
    requestTimeout: limits.requestTimeoutMs,
    connectionTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    ...(tls ? { https: { ...tls, minVersion: 'TLSv1.2', handshakeTimeout: limits.headersTimeoutMs, ...node } } : { http: node }),
    clientErrorHandler: answerClientError,
    frameworkErrors: (error: Error & { code?: string }, _request: FastifyRequest, reply: FastifyReply) => {
      void reply.code(400).send(errorBody('ValidationError', error.code === 'FST_ERR_BAD_URL' ? 'Malformed URL.' : 'Malformed request.'));
    },
  } as FastifyServerOptions & object;
}

/** Requests Node refuses before Fastify sees them, answered with the documented body. */
function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [status, type, message]: [number, ErrorType, string] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'RequestTimeout', 'The request did not arrive within the time limit.']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'ValidationError', 'The request headers are too large.']
        : [400, 'ValidationError', 'Malformed HTTP request.'];
  const body = JSON.stringify({ statusCode: status, errorType: type, message });
  const reason = status === 408 ? 'Request Timeout' : status === 431 ? 'Request Header Fields Too Large' : 'Bad Request';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * Parses one JSON text: nesting deeper than `maxDepth` is refused by a scan before
 * parsing (a hostile body costs one pass over its text), then parsed with prototype
 * poisoning refused, as Fastify's own parser does. Throws ServiceError (400).
 */
export function parseJsonText(text: string, maxDepth: number, what = 'The request body'): unknown {
  if (exceedsJsonDepth(text, maxDepth)) {
    throw new ServiceError('ValidationError', `${what} nests deeper than ${maxDepth} levels.`, {
      errors: [{ path: '/', message: `must not nest deeper than ${maxDepth} levels` }],
    });
  }
  if (text.length === 0) {
    throw new ServiceError('ValidationError', `${what} is empty.`, { errors: [{ path: '/', message: 'is required' }] });
  }
  try {
    return secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch {
    throw new ServiceError('ValidationError', `${what} is not valid JSON.`, { errors: [{ path: '/', message: 'must be valid JSON' }] });
  }
}

/** application/json bodies, parsed by parseJsonText. */
export function registerJsonParser(app: FastifyInstance, maxDepth: number): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, text, done) => {
    try {
      done(null, parseJsonText(text as string, maxDepth));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
}
