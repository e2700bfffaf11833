// The admin service: key management, analytics and the dashboard, all behind the
// admin token except the dashboard's static files (which hold no data).
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';

import { edgeServerOptions, registerEdge, registerJsonParser, type ConnectionLimits } from '@otm/shared/http-edge';
import type { Logger } from '@otm/shared/logger';
import type { Registry } from 'prom-client';
import { adminTokenCheck } from './admin-auth.js';
import { registerKeyRoutes, type Auditor, type KeyRoutesStore } from './keys-routes.js';

export interface AdminDeps {
  logger: Logger;
  keyStore: KeyRoutesStore;
  /** Where every change of keys and policies is written first (admin_audit). */
  audit: Auditor;
  /** Extra route groups (analytics, dashboard) registered behind or beside the token. */
  protectedRoutes?: ((app: FastifyInstance) => void)[];
  publicRoutes?: ((app: FastifyInstance) => Promise<void> | void)[];
  /** Served at `GET /metrics` behind the token; the edge adds otm_admin_requests_total and otm_admin_request_seconds. */
  metrics?: Registry;
  /** Answers whether Redis (keys) and ClickHouse (analytics) are reachable: `/readyz`. */
  ready?: () => Promise<boolean>;
}

export interface AdminOptions {
  /** The admin tokens accepted: ADMIN_TOKEN, and ADMIN_TOKEN_NEXT during a rotation. */
  adminTokens: readonly string[];
  connectionLimits: ConnectionLimits;
  jsonMaxDepth: number;
  /** The analytics queries' execution limit: the connection is never closed before their answer. */
  longestAnswerMs?: number;
  /** HTTPS with this certificate; absent: plain HTTP (loopback, or behind a TLS-terminating proxy). */
  https?: { key: Buffer; cert: Buffer };
}

export async function buildAdminApp(options: AdminOptions, deps: AdminDeps): Promise<FastifyInstance> {
  const serverOptions: FastifyServerOptions = {
    ...edgeServerOptions(options.connectionLimits, options.https, options.longestAnswerMs),
    loggerInstance: deps.logger,
    // Unknown query parameters are a 400, not silently dropped.
    ajv: { customOptions: { removeAdditional: false } },
    logController: new LogController({ disableRequestLogging: true } as never),
  };
  const app = Fastify(serverOptions) as unknown as FastifyInstance;
  registerJsonParser(app, options.jsonMaxDepth);
  // Every answer: never sniffed, never framed. API answers (JSON) are never cached:
  // they carry keys and analytics; the dashboard's static files set their own policy.
  app.addHook('onSend', async (_request, reply, payload) => {
    reply.header('x-content-type-options', 'nosniff');
    if (!reply.hasHeader('content-security-policy')) reply.header('content-security-policy', "default-src 'none'; frame-ancestors 'none'");
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    return payload;
  });

  // Retry-After for the rare 503 (a dependency down): the admin service has no setting of its own.
  registerEdge(app, {
    maxConnections: options.connectionLimits.maxConnections,
    retryAfterSeconds: 5,
    accessLog: 'info',
    ...(deps.metrics && { metrics: { registry: deps.metrics, prefix: 'otm_admin' } }),
    health: { ready: deps.ready ?? (async () => true) },
  });

  const requireAdmin = adminTokenCheck(options.adminTokens);
  await app.register(async (secured) => {
    secured.addHook('onRequest', async (request) => requireAdmin(request));
    registerKeyRoutes(secured, deps.keyStore, deps.audit);
    const { metrics } = deps;
    if (metrics) secured.get('/metrics', async (_request, reply) => reply.type(metrics.contentType).send(await metrics.metrics()));
    for (const routes of deps.protectedRoutes ?? []) routes(secured);
  });
  for (const routes of deps.publicRoutes ?? []) await routes(app);
  return app;
}
