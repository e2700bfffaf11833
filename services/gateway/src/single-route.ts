// POST /v1/telemetry/usage: one record. Authenticated before the body is read, limited
// per key, handed to the one intake (intake.ts) with the other routes, and answered 202
// with the record's request id (the first answer's, for a replay); refused 400 or 422
// for what it holds, 503 with Retry-After when the queue did not take it.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceError } from '@otm/shared/errors';
import { CAPTURE_HEADER } from './capture.js';
import { ingestRoutes } from './ingest-routes.js';
import { accept, type ItemResult } from './intake.js';
import type { GatewayMetrics } from './metrics.js';
import type { RecordQueue } from './produce-batcher.js';
import { countRecords, tallyResults } from './record-count.js';
import type { IntakeContext } from './record-intake.js';

export interface SingleRouteDeps {
  batcher: RecordQueue;
  metrics: GatewayMetrics;
  authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  rateLimited(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  idempotencyKeyOf(request: FastifyRequest): string | undefined;
  intakeContext(request: FastifyRequest, receivedAt: Date): IntakeContext;
  /** The 503 of a queue that did not take the record, with its Retry-After. */
  unavailable(reply: FastifyReply): ServiceError;
}

export function registerSingleRoute(app: FastifyInstance, deps: SingleRouteDeps): void {
  const route = ingestRoutes.single;
  app.post(
    route.url,
    {
      onRequest: deps.authenticate,
      preHandler: (request, reply) => deps.rateLimited(request, reply),
      schema: { response: { 202: route.responses[202].schema } },
    },
    async (request, reply) => {
      const context = deps.intakeContext(request, new Date());
      reply.header(CAPTURE_HEADER, context.capture);
      const results = await accept(
        [{ record: request.body, idempotencyKey: deps.idempotencyKeyOf(request), requestId: request.id }],
        context,
        {
          batcher: deps.batcher,
          onReplay: () => deps.metrics.replays.inc(),
        },
      );
      countRecords(deps.metrics, 'single', tallyResults(results));
      const result = results[0]!;
      if (result.kind === 'refused') throw result.error;
      if (result.kind === 'unavailable') {
        request.log.warn({ requestId: request.id, reason: result.reason }, 'produce unavailable');
        throw deps.unavailable(reply);
      }
      return reply.code(202).send(accepted(result));
    },
  );
}

function accepted(result: Extract<ItemResult, { kind: 'accepted' }>) {
  return {
    requestId: result.requestId,
    status: 'accepted',
    message: 'Usage record accepted for processing.',
    timestamp: result.timestamp,
    usage: result.usage,
  };
}
