// The record removal routes (docs/privacy.md, "Removing records"):
// `POST /v1/admin/records/removals` starts a job (RemovalJobs), `GET
// /v1/admin/records/removals/{id}` reports its state.
import type { FastifyInstance } from 'fastify';
import { AuditUnavailableError } from '@otm/shared/audit';
import { refuse } from '@otm/shared/errors';
import type { RemovalJob, RemovalJobs } from '@otm/shared/rollups/removal';
import { removalBody } from './admin-route-docs.js';

export function registerRemovalRoutes(app: FastifyInstance, jobs: RemovalJobs): void {
  app.post<{ Body: { eventKeys?: string[]; requestIds?: string[]; reason: string } }>(
    '/v1/admin/records/removals',
    { schema: { body: removalBody } },
    async (request, reply) => {
      const { eventKeys = [], requestIds = [], reason } = request.body;
      let job: RemovalJob;
      try {
        job = await jobs.start({ eventKeys, requestIds }, reason, `admin-token@${request.ip}`, request.id);
      } catch (error) {
        if (error instanceof AuditUnavailableError) throw refuse('auditUnavailableUnchanged');
        throw refuse('keyStoreUnavailableUnchanged');
      }
      return reply.code(202).send({ ...job, statusUrl: `/v1/admin/records/removals/${job.id}` });
    },
  );

  app.get<{ Params: { id: string } }>('/v1/admin/records/removals/:id', async (request) => {
    const job = await jobs.get(request.params.id).catch(() => {
      throw refuse('keyStoreUnavailable');
    });
    if (!job) throw refuse('removalNotFound');
    return job;
  });
}
