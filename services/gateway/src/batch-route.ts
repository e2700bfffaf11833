// POST /v1/telemetry/usage/batch: many records in one request (decisions.md, "Batch
// ingest"). Each item goes through the same intake as a single record; the valid
// ones are handed to the produce batcher together, so a batch travels in one
// Produce request (or a few, when it is larger than one may be). An item is answered
// 202 only once Kafka acknowledged it.
import { CAPTURE_HEADER } from './capture.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { v7 as uuidv7 } from 'uuid';
import { ServiceError } from '@otm/shared/errors';
import { parseJsonText, registerJsonParser } from '@otm/shared/http-edge';
import { encodeWireAll } from '@otm/shared/registry';
import { errorBodySchema, ingestRoutes } from './ingest-routes.js';
import { ProduceUnavailableError, type QueuedMessage } from './produce-batcher.js';
import {
  IDEMPOTENCY_KEY,
  prepareRecord,
  previousAnswer,
  queuedJson,
  type IntakeContext,
  type PreparedRecord,
  type Usage,
} from './record-intake.js';
import type { GatewayMetrics } from './metrics.js';

export interface BatchLimits {
  maxRecords: number;
  maxBytes: number;
}

export interface BatchRouteDeps {
  batcher: { enqueue(message: QueuedMessage): Promise<void> };
  metrics: GatewayMetrics;
  authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  rateLimited(request: FastifyRequest, reply: FastifyReply, records: number): Promise<void>;
  idempotencyKeyOf(request: FastifyRequest): string | undefined;
  intakeContext(request: FastifyRequest, receivedAt: Date): IntakeContext;
  retryAfterSeconds: number;
}

export interface BatchItemResult {
  index: number;
  status: 202 | 400 | 422 | 503;
  requestId?: string;
  errorType?: string;
  message?: string;
  errors?: { path: string; message: string }[];
}

/** An NDJSON line that is not a JSON text: its item is refused, the others go on. */
class UnreadableLine {
  constructor(readonly error: ServiceError) {}
}

export function registerBatchRoute(app: FastifyInstance, limits: BatchLimits, jsonMaxDepth: number, deps: BatchRouteDeps): void {
  const route = ingestRoutes.batch;
  void app.register(async (scope) => {
    // The array adds one level: an item may nest as deep as a single record.
    registerJsonParser(scope, jsonMaxDepth + 1);
    scope.addContentTypeParser('application/x-ndjson', { parseAs: 'string' }, (_request, text, done) => {
      const items: unknown[] = [];
      for (const line of (text as string).split('\n')) {
        if (line.trim() === '') continue;
        try {
          items.push(parseJsonText(line, jsonMaxDepth, 'This line'));
        } catch (error) {
          items.push(new UnreadableLine(error as ServiceError));
        }
      }
      done(null, items);
    });

    scope.post(
      route.url,
      {
        bodyLimit: limits.maxBytes,
        onRequest: deps.authenticate,
        preHandler: async (request, reply) => {
          const items = request.body;
          if (!Array.isArray(items)) {
            throw new ServiceError('ValidationError', 'A batch is a JSON array of usage records (or NDJSON).', {
              errors: [{ path: '/', message: 'must be an array' }],
            });
          }
          if (items.length === 0) {
            throw new ServiceError('ValidationError', 'The batch holds no records.', {
              errors: [{ path: '/', message: 'must not be empty' }],
            });
          }
          if (items.length > limits.maxRecords) {
            throw new ServiceError(
              'PayloadTooLarge',
              `A batch holds at most ${limits.maxRecords} records; this one holds ${items.length}.`,
            );
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
        reply.header(CAPTURE_HEADER, context.capture);
        const answer = await ingestBatch(request.body as unknown[], batchKey, context, deps);
        deps.metrics.records.inc({ outcome: 'accepted' }, answer.accepted);
        deps.metrics.records.inc({ outcome: 'refused' }, answer.refused);
        const status = answer.accepted === answer.results.length ? 202 : answer.accepted > 0 ? 207 : undefined;
        if (status !== undefined) {
          return reply.code(status).send({
            status: status === 202 ? 'accepted' : 'partial',
            message:
              status === 202
                ? `All ${answer.accepted} usage records accepted for processing.`
                : `${answer.accepted} of ${answer.results.length} usage records accepted; see results for the others.`,
            timestamp: context.receivedAtIso,
            accepted: answer.accepted,
            refused: answer.refused,
            usage: answer.usage,
            results: answer.results,
          });
        }
        // Nothing accepted: 503 if a valid item could not be queued (retry it all), else 400.
        const unavailable = answer.results.some((result) => result.status === 503);
        const errorType = unavailable ? 'Unavailable' : 'ValidationError';
        const body = new ServiceError(
          errorType,
          unavailable ? 'The queue is unavailable; no record was accepted. Retry later.' : 'No record of the batch is valid; see results.',
          {
            errors: unavailable
              ? undefined
              : answer.results.flatMap((result) =>
                  (result.errors ?? [{ path: '/', message: result.message ?? 'refused' }]).map((error) => ({
                    path: `/${result.index}${error.path === '/' ? '' : error.path}`,
                    message: error.message,
                  })),
                ),
          },
        ).toBody();
        if (unavailable) reply.header('retry-after', String(deps.retryAfterSeconds));
        else deps.metrics.validationFailures.inc();
        return reply.code(unavailable ? 503 : 400).send({ ...body, results: answer.results });
      },
    );
  });
}

interface BatchAnswer {
  accepted: number;
  refused: number;
  usage: Usage;
  results: BatchItemResult[];
}

async function ingestBatch(
  items: unknown[],
  batchKey: string | undefined,
  context: IntakeContext,
  deps: Pick<BatchRouteDeps, 'batcher' | 'metrics'>,
): Promise<BatchAnswer> {
  const results: BatchItemResult[] = new Array(items.length);
  const prepared: (PreparedRecord | undefined)[] = new Array(items.length);
  /** The indexes of the items to queue, in order. */
  const toQueue: number[] = [];
  // The first item of this batch holding each event key: a later item with the same
  // key is the same record (answered as the first) or a reused key (422).
  const firstWithKey = new Map<string, number>();
  const twins: [number, number][] = [];

  for (let index = 0; index < items.length; index++) {
    try {
      const { record, itemKey } = splitItem(items[index]);
      const key = itemKey ?? (batchKey === undefined ? undefined : `${batchKey}:${index}`);
      const item = prepareRecord(record, key, uuidv7(), context);
      const first = firstWithKey.get(item.eventKey);
      if (first !== undefined) {
        if (prepared[first]?.recordJson !== item.recordJson) throw reusedKey();
        twins.push([index, first]);
        prepared[index] = item;
        continue;
      }
      if (key !== undefined) firstWithKey.set(item.eventKey, index);
      const previous = previousAnswer(item, context.replay);
      if (previous) {
        deps.metrics.replays.inc();
        results[index] = { index, status: 202, requestId: previous.requestId };
        prepared[index] = { ...item, requestId: previous.requestId };
        continue;
      }
      prepared[index] = item;
      toQueue.push(index);
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      results[index] = { index, status: error.statusCode as 400 | 422, ...error.toBody() };
      delete (results[index] as { statusCode?: number }).statusCode;
    }
  }
  // Every valid item's message value in one buffer (encodeWireAll), then queued together.
  const values = encodeWireAll(
    context.schemaId,
    toQueue.map((index) => queuedJson(prepared[index]!, context)),
  );
  const sends = toQueue.map((index, position) => {
    const item = prepared[index]!;
    return deps.batcher.enqueue({ key: item.eventKey, value: values[position]!, requestId: item.requestId }).then(
      () => {
        results[index] = { index, status: 202, requestId: item.requestId };
        if (item.idempotencyKey)
          context.replay?.set(item.eventKey, {
            requestId: item.requestId,
            timestamp: context.receivedAtIso,
            digest: item.digest,
          });
      },
      (error: unknown) => {
        if (!(error instanceof ProduceUnavailableError)) throw error;
        results[index] = {
          index,
          status: 503,
          errorType: 'Unavailable',
          message: 'The queue is unavailable; this record was not accepted. Retry it.',
        };
      },
    );
  });
  await Promise.all(sends);
  for (const [index, first] of twins) results[index] = { ...results[first]!, index };

  const answer: BatchAnswer = { accepted: 0, refused: 0, usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 }, results };
  for (const result of results) {
    if (result.status !== 202) {
      answer.refused++;
      continue;
    }
    answer.accepted++;
    const usage = prepared[result.index]!.usage;
    answer.usage.inputTokens += usage.inputTokens;
    answer.usage.outputTokens += usage.outputTokens;
    answer.usage.totalTokens += usage.totalTokens;
  }
  return answer;
}

/** An item is a record, plus optionally its own `idempotencyKey` (removed before validation). */
function splitItem(item: unknown): { record: unknown; itemKey: string | undefined } {
  if (item instanceof UnreadableLine) throw item.error;
  if (item === null || typeof item !== 'object' || Array.isArray(item) || !('idempotencyKey' in item)) {
    return { record: item, itemKey: undefined };
  }
  const { idempotencyKey, ...record } = item as Record<string, unknown>;
  if (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY.test(idempotencyKey)) {
    throw new ServiceError('ValidationError', 'Invalid idempotencyKey.', {
      errors: [{ path: '/idempotencyKey', message: 'must be a string of 1 to 255 printable ASCII characters' }],
    });
  }
  return { record, itemKey: idempotencyKey };
}

function reusedKey(): ServiceError {
  return new ServiceError(
    'IdempotencyKeyReused',
    'This idempotency key is used by another record of the batch; send a new key for a new record.',
  );
}
