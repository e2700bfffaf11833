// The erasure routes (docs/privacy.md): `DELETE /v1/admin/users/{userId}/data` starts
// the job (the rollup-maintenance module's ErasureJobs), `GET /v1/admin/erasures/{id}`
// reports its state.
import type { FastifyInstance } from 'fastify';
import type { Environment } from '@otm/schemas';
import { AuditUnavailableError } from '@otm/shared/audit';
import { refuse } from '@otm/shared/errors';
import type { ErasureJob, ErasureJobs } from '@otm/shared/rollups/erasure';
import { erasureParams, erasureQuery } from './admin-route-docs.js';

export function registerErasureRoutes(app: FastifyInstance, jobs: ErasureJobs): void {
  app.delete<{ Params: { userId: string }; Querystring: { environment: Environment } }>(
    '/v1/admin/users/:userId/data',
    {
      schema: { params: erasureParams, querystring: erasureQuery },
    },
    async (request, reply) => {
      let job: ErasureJob;
      try {
        job = await jobs.start(request.query.environment, request.params.userId, `admin-token@${request.ip}`, request.id);
      } catch (error) {
        if (error instanceof AuditUnavailableError) throw refuse('auditUnavailableUnchanged');
        throw refuse('keyStoreUnavailableUnchanged');
      }
      return reply.code(202).send({ ...job, statusUrl: `/v1/admin/erasures/${job.id}` });
    },
  );

  app.get<{ Params: { id: string } }>('/v1/admin/erasures/:id', async (request) => {
    const job = await jobs.get(request.params.id).catch(() => {
      throw refuse('keyStoreUnavailable');
    });
    if (!job) throw refuse('erasureNotFound');
    return job;
  });
}
