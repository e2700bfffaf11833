// The admin service: key management, analytics and the dashboard, all behind the
// admin token except the dashboard's static files (which hold no data).
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { ServiceError, errorBody } from '@otm/shared/errors';
import { edgeServerOptions, registerJsonParser, type ConnectionLimits } from '@otm/shared/http-edge';
import type { Logger } from '@otm/shared/logger';
import type { KeyStore } from '@otm/shared/keys/key-store';
import { adminTokenCheck } from './admin-auth.js';
import { registerKeyRoutes } from './keys-routes.js';

export interface AdminDeps {
  logger: Logger;
  keyStore: KeyStore;
  /** Extra route groups (analytics, dashboard) registered behind or beside the token. */
  protectedRoutes?: ((app: FastifyInstance) => void)[];
  publicRoutes?: ((app: FastifyInstance) => Promise<void> | void)[];
}

export interface AdminOptions {
  adminToken: string;
  connectionLimits: ConnectionLimits;
  jsonMaxDepth: number;
}

export async function buildAdminApp(options: AdminOptions, deps: AdminDeps): Promise<FastifyInstance> {
  const serverOptions: FastifyServerOptions = {
    ...edgeServerOptions(options.connectionLimits),
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

  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof ServiceError) return reply.code(error.statusCode).send(error.toBody());
    if (error.validation) {
      return reply.code(400).send({
        ...errorBody('ValidationError', 'The request does not match the expected parameters.'),
        errors: error.validation.map((issue) => ({
          path:
            `${issue.instancePath || ''}${issue.keyword === 'required' ? `/${(issue.params as { missingProperty: string }).missingProperty}` : ''}${issue.keyword === 'additionalProperties' ? `/${(issue.params as { additionalProperty: string }).additionalProperty}` : ''}` ||
            '/',
          message: issue.message ?? 'is invalid',
        })),
      });
    }
    if (error.statusCode && error.statusCode < 500) {
      const type = error.statusCode === 415 ? 'UnsupportedMediaType' : error.statusCode === 413 ? 'PayloadTooLarge' : 'ValidationError';
      return reply.code(error.statusCode).send(errorBody(type, error.message));
    }
    request.log.error({ err: error }, 'admin request failed');
    return reply.code(503).send(errorBody('Unavailable', 'A dependency is unavailable; retry later.'));
  });
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send(errorBody('NotFound', `No route for ${request.method} ${request.url.split('?')[0]}.`));
  });

  app.get('/healthz', async () => ({ status: 'ok' }));

  const requireAdmin = adminTokenCheck(options.adminToken);
  await app.register(async (secured) => {
    secured.addHook('onRequest', async (request) => requireAdmin(request));
    registerKeyRoutes(secured, deps.keyStore);
    for (const routes of deps.protectedRoutes ?? []) routes(secured);
  });
  for (const routes of deps.publicRoutes ?? []) await routes(app);
  return app;
}
