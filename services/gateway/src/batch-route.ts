// POST /v1/telemetry/usage/batch: many records in one request. The route reads the
// body (a JSON array or NDJSON, counted as it arrives), turns each item into an intake
// item (its own idempotencyKey member, or the batch's key with its index), hands them
// all to the one intake (intake.ts) and answers from the results: 202 when every item
// was accepted, 207 when some were, 503 when a valid item could not be queued and none
// was accepted, 400 otherwise.
import { CAPTURE_HEADER } from './capture.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { fitErrorBudget, refuse } from '@otm/shared/errors';
import type { Readable } from 'node:stream';
import {
  isDeferredBatch,
  JsonArrayItemCounter,
  NdjsonItemCounter,
  parseJsonArrayBody,
  parseNdjson,
  readCountedBody,
  type BatchBodyLimits,
  type DeferredBatch,
} from './batch-body.js';
import { batchItems, itemResult, noneValidAnswer } from './batch-answer.js';
import { errorBodySchema, ingestRoutes } from './ingest-routes.js';
import type { RecordQueue } from './produce-batcher.js';
import type { IntakeContext } from './record-intake.js';
import { accept, acceptedUsage } from './intake.js';
import type { GatewayMetrics } from './metrics.js';
import { countRecords, tallyResults } from './record-count.js';

export type BatchLimits = BatchBodyLimits;

export interface BatchRouteDeps {
  batcher: RecordQueue;
  metrics: GatewayMetrics;
  authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  rateLimited(request: FastifyRequest, reply: FastifyReply, records: number): Promise<void>;
  idempotencyKeyOf(request: FastifyRequest): string | undefined;
  intakeContext(request: FastifyRequest, receivedAt: Date): IntakeContext;
  retryAfterSeconds: number;
}

export function registerBatchRoute(app: FastifyInstance, limits: BatchBodyLimits, jsonMaxDepth: number, deps: BatchRouteDeps): void {
  const route = ingestRoutes.batch;
  void app.register(async (scope) => {
    // Both shapes are read by readCountedBody: items counted while the body arrives and
    // refused at the limit before any is parsed. The array adds one level: an item may
    // nest as deep as a single record.
    scope.removeContentTypeParser('text/plain');
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', async (_request: FastifyRequest, payload: Readable) => {
      const counter = new JsonArrayItemCounter();
      return parseJsonArrayBody(await readCountedBody(payload, counter, limits), counter, jsonMaxDepth);
    });
    scope.addContentTypeParser('application/x-ndjson', async (_request: FastifyRequest, payload: Readable) =>
      parseNdjson(await readCountedBody(payload, new NdjsonItemCounter(), limits), jsonMaxDepth, limits.maxUnreadableLines),
    );

    scope.post(
      route.url,
      {
        bodyLimit: limits.maxBytes,
        onRequest: deps.authenticate,
        preHandler: async (request, reply) => {
          const items = request.body;
          if (!isDeferredBatch(items) && !Array.isArray(items)) {
            throw refuse('batchNotArray', {
              errors: [{ path: '/', message: 'must be an array' }],
            });
          }
          if (items.length === 0) {
            throw refuse('batchEmpty', {
              errors: [{ path: '/', message: 'must not be empty' }],
            });
          }
          if (items.length > limits.maxRecords) {
            throw refuse('batchTooManyRecords', { max: limits.maxRecords, count: items.length });
          }
          await deps.rateLimited(request, reply, items.length);
        },
        schema: {
          response: { 202: route.responses[202].schema, 207: route.responses[207].schema, 400: errorBodySchema, 503: errorBodySchema },
        },
      },
      async (request, reply) => {
        const receivedAt = new Date();
        const batchKey = deps.idempotencyKeyOf(request);
        const context = deps.intakeContext(request, receivedAt);
        // The intake takes the parsed items; the request lets go of them, so that they do
        // not live until the answer (intake.ts, accept()).
        const items = batchItems(request.body as unknown[] | DeferredBatch, batchKey);
        request.body = undefined;
        const intake = await accept(items, context, {
          batcher: deps.batcher,
          onReplay: () => deps.metrics.replays.inc(),
        });
        // Only once the items are read: an item that did not parse refuses the whole body
        // (thrown by accept), answered as it always was, without it.
        reply.header(CAPTURE_HEADER, context.capture);
        const results = intake.map(itemResult);
        const tally = tallyResults(intake);
        countRecords(deps.metrics, 'batch', tally);
        const accepted = tally.accepted + tally.replayed;
        const refused = results.length - accepted;
        const status = accepted === results.length ? 202 : accepted > 0 ? 207 : undefined;
        if (status !== undefined) {
          fitErrorBudget(results);
          return reply.code(status).send({
            status: status === 202 ? 'accepted' : 'partial',
            message:
              status === 202
                ? `All ${accepted} usage records accepted for processing.`
                : `${accepted} of ${results.length} usage records accepted; see results for the others.`,
            timestamp: context.receivedAtIso,
            accepted,
            refused,
            usage: acceptedUsage(intake),
            results,
          });
        }
        // Nothing accepted: 503 if a valid item could not be queued (retry it all), else 400.
        const unavailable = results.some((result) => result.status === 503);
        if (unavailable) {
          reply.header('retry-after', String(deps.retryAfterSeconds));
          const body = refuse('queueUnavailableBatch').toBody();
          return reply.code(body.statusCode as 503).send({ ...body, results }); // the catalogue's status for the refusal
        }
        deps.metrics.validationFailures.inc();
        const answer = noneValidAnswer(results);
        return reply.code(answer.statusCode as 400).send(answer);
      },
    );
  });
}
