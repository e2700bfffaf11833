// Key management over HTTP: the same three operations as the CLI.
import type { FastifyInstance } from 'fastify';
import { ENVIRONMENTS, isSafeIdentifier, type Environment } from '@otm/schemas';
import { ServiceError } from '@otm/shared/errors';
import type { KeyStore } from '@otm/shared/keys/key-store';

const createBody = {
  type: 'object',
  additionalProperties: false,
  required: ['environment', 'name'],
  properties: {
    environment: { type: 'string', enum: [...ENVIRONMENTS] },
    name: { type: 'string', minLength: 1, maxLength: 200 },
    description: { type: 'string', maxLength: 1000 },
  },
} as const;

/** The key store (Redis) out of reach is a 503 with Retry-After, not an internal error. */
async function fromStore<T>(operation: Promise<T>): Promise<T> {
  try {
    return await operation;
  } catch {
    throw new ServiceError('Unavailable', 'The key store is unavailable; retry later.');
  }
}

export function registerKeyRoutes(app: FastifyInstance, store: Pick<KeyStore, 'list' | 'create' | 'delete'>): void {
  app.get('/v1/keys', async () => {
    const keys = await fromStore(store.list());
    return { keys: keys.map(({ id, name, environment, description, createdAt }) => ({ id, name, environment, description, createdAt })) };
  });

  app.post<{ Body: { environment: Environment; name: string; description?: string } }>(
    '/v1/keys',
    { schema: { body: createBody } },
    async (request, reply) => {
      // A name is shown to operators in lists, logs and the dashboard: no control
      // characters or bidi overrides that could disguise what they read.
      if (!isSafeIdentifier(request.body.name)) {
        throw new ServiceError('ValidationError', 'The key name cannot be used.', {
          errors: [{ path: '/name', message: 'must not contain control characters or bidirectional overrides' }],
        });
      }
      const created = await fromStore(store.create(request.body));
      reply.header('cache-control', 'no-store');
      return reply.code(201).send({
        id: created.id,
        key: created.key,
        environment: created.environment,
        name: created.name,
        description: created.description,
        createdAt: created.createdAt,
      });
    },
  );

  app.delete<{ Params: { id: string } }>('/v1/keys/:id', async (request, reply) => {
    const deleted = await fromStore(store.delete(request.params.id));
    if (!deleted) throw new ServiceError('NotFound', 'No key with this id.');
    return reply.code(204).send();
  });
}
