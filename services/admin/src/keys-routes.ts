// Key management over HTTP: the same operations as the CLI, with the capture
// policies (docs/privacy.md) of keys and environments.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AuditUnavailableError, type AuditEntry, type AuditLog } from '@otm/shared/audit';
import { generateKeyId } from '@otm/shared/keys/key-format';
import { isSafeIdentifier, type CapturePolicy, type Environment } from '@otm/schemas';
import { refuse } from '@otm/shared/errors';
import type { ApiKeyRecord, KeyStore } from '@otm/shared/keys/key-store';
import { auditQuery, captureBody, environmentParams, keyCreateBody } from './admin-route-docs.js';

export type KeyRoutesStore = Pick<KeyStore, 'list' | 'create' | 'delete' | 'setCapture' | 'environmentCaptures' | 'setEnvironmentCapture'>;

const shown = ({ id, name, environment, description, createdAt, capture }: ApiKeyRecord) => ({
  id,
  name,
  environment,
  description,
  createdAt,
  capture,
});

/** The key store (Redis) out of reach is a 503 with Retry-After, not an internal error. */
async function fromStore<T>(operation: Promise<T>): Promise<T> {
  try {
    return await operation;
  } catch {
    throw refuse('keyStoreUnavailable');
  }
}

export type Auditor = Pick<AuditLog, 'around' | 'recent'>;

/**
 * A change through the audit log: its entry is written first (no entry, no change:
 * 503), a failure of the change gets its own entry.
 */
function audited<T>(audit: Auditor, request: FastifyRequest, entry: Omit<AuditEntry, 'actor' | 'requestId'>, change: () => Promise<T>) {
  return audit
    .around({ ...entry, actor: `admin-token@${request.ip}`, requestId: request.id }, () => fromStore(change()))
    .catch((error: unknown) => {
      if (error instanceof AuditUnavailableError) throw refuse('auditUnavailableUnchanged');
      throw error;
    });
}

export function registerKeyRoutes(app: FastifyInstance, store: KeyRoutesStore, audit: Auditor): void {
  app.get('/v1/keys', async () => {
    const keys = await fromStore(store.list());
    return { keys: keys.map(shown) };
  });

  app.post<{ Body: { environment: Environment; name: string; description?: string; capture?: CapturePolicy } }>(
    '/v1/keys',
    { schema: { body: keyCreateBody } },
    async (request, reply) => {
      // A name is shown to operators in lists, logs and the dashboard: no control
      // characters or bidi overrides that could disguise what they read.
      if (!isSafeIdentifier(request.body.name)) {
        throw refuse('keyNameInvalid', {
          errors: [{ path: '/name', message: 'must not contain control characters or bidirectional overrides' }],
        });
      }
      const id = generateKeyId();
      const { environment, name, capture = 'full' } = request.body;
      const created = await audited(audit, request, { action: 'key.create', target: id, details: { environment, name, capture } }, () =>
        store.create({ ...request.body, id }),
      );
      reply.header('cache-control', 'no-store');
      return reply.code(201).send({
        id: created.id,
        key: created.key,
        environment: created.environment,
        name: created.name,
        description: created.description,
        createdAt: created.createdAt,
        capture: created.capture,
      });
    },
  );

  app.delete<{ Params: { id: string } }>('/v1/keys/:id', async (request, reply) => {
    const deleted = await audited(audit, request, { action: 'key.delete', target: request.params.id }, () =>
      store.delete(request.params.id),
    );
    if (!deleted) throw refuse('keyNotFound');
    return reply.code(204).send();
  });

  app.patch<{ Params: { id: string }; Body: { capture: CapturePolicy } }>(
    '/v1/keys/:id',
    { schema: { body: captureBody } },
    async (request) => {
      const updated = await audited(audit, request, { action: 'key.capture', target: request.params.id, details: request.body }, () =>
        store.setCapture(request.params.id, request.body.capture),
      );
      if (!updated) throw refuse('keyNotFound');
      return shown(updated);
    },
  );

  app.get('/v1/capture-policies', async () => ({ environments: await fromStore(store.environmentCaptures()) }));

  app.put<{ Params: { environment: Environment }; Body: { capture: CapturePolicy } }>(
    '/v1/capture-policies/:environment',
    {
      schema: { params: environmentParams, body: captureBody },
    },
    async (request) => {
      await audited(audit, request, { action: 'environment.capture', target: request.params.environment, details: request.body }, () =>
        store.setEnvironmentCapture(request.params.environment, request.body.capture),
      );
      return { environments: await fromStore(store.environmentCaptures()) };
    },
  );

  app.get<{ Querystring: { limit?: number } }>(
    '/v1/audit',
    {
      schema: { querystring: auditQuery },
    },
    async (request) => {
      try {
        return { entries: await audit.recent(request.query.limit ?? 100) };
      } catch {
        throw refuse('auditUnavailable');
      }
    },
  );
}
