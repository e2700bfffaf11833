// POST /v1/telemetry/usage/batch: many records in one request (decisions.md, "Batch
// ingest"). Each item goes through the same intake as a single record; the valid
// ones are handed to the produce batcher together, so a batch travels in one
// Produce request (or a few, when it is larger than one may be). An item is answered
// 202 only once Kafka acknowledged it.
import { CAPTURE_HEADER } from './capture.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { v7 as uuidv7 } from 'uuid';
import { errorReportLimits, fitErrorBudget, ServiceError, type FieldError } from '@otm/shared/errors';
import type { Readable } from 'node:stream';
import { parseJsonText } from '@otm/shared/http-edge';
import { parseNdjson, readCountedBody, UnreadableLine, type BatchBodyLimits } from './batch-body.js';
import { encodeWireAll } from '@otm/shared/registry';
import { errorBodySchema, ingestRoutes } from './ingest-routes.js';
import { ProduceUnavailableError, type QueuedMessage } from './produce-batcher.js';
import {
  checkRecord,
  IDEMPOTENCY_KEY,
  prepareRecord,
  previousAnswer,
  queuedJson,
  type CheckedRecord,
  type IntakeContext,
  type PreparedRecord,
  type Usage,
} from './record-intake.js';
import { EventLoopTurn } from './event-loop-turn.js';
import type { GatewayMetrics } from './metrics.js';

export type BatchLimits = BatchBodyLimits;

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
  errors?: FieldError[];
  truncated?: boolean;
}

export function registerBatchRoute(app: FastifyInstance, limits: BatchBodyLimits, jsonMaxDepth: number, deps: BatchRouteDeps): void {
  const route = ingestRoutes.batch;
  void app.register(async (scope) => {
    // Both shapes are read by readCountedBody: items counted while the body arrives and
    // refused at the limit before any is parsed. The array adds one level: an item may
    // nest as deep as a single record.
    scope.removeContentTypeParser('text/plain');
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', async (_request: FastifyRequest, payload: Readable) =>
      parseJsonText(await readCountedBody(payload, false, limits), jsonMaxDepth + 1),
    );
    scope.addContentTypeParser('application/x-ndjson', async (_request: FastifyRequest, payload: Readable) =>
      parseNdjson(await readCountedBody(payload, true, limits), jsonMaxDepth, limits.maxUnreadableLines),
    );

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
          fitErrorBudget(answer.results);
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
        if (unavailable) {
          reply.header('retry-after', String(deps.retryAfterSeconds));
          const body = new ServiceError('Unavailable', 'The queue is unavailable; no record was accepted. Retry later.').toBody();
          return reply.code(503).send({ ...body, results: answer.results });
        }
        deps.metrics.validationFailures.inc();
        // Every item's errors once, pointing into the batch, within the answer's budget;
        // the results then say each item's status and type only.
        const errors: FieldError[] = [];
        let truncated = false;
        for (const result of answer.results) {
          truncated ||= result.truncated === true;
          for (const error of result.errors ?? [{ path: '/', message: result.message ?? 'refused' }]) {
            errors.push({ path: `/${result.index}${error.path === '/' ? '' : error.path}`, message: error.message });
          }
          delete result.errors;
          delete result.truncated;
        }
        const listed = fitWithin(errors);
        truncated ||= listed.length < errors.length;
        const body = new ServiceError('ValidationError', 'No record of the batch is valid; see results.').toBody();
        return reply.code(400).send({ ...body, errors: listed, ...(truncated ? { truncated: true } : {}), results: answer.results });
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
  const checked: (CheckedRecord | undefined)[] = new Array(items.length);
  const prepared: (PreparedRecord | undefined)[] = new Array(items.length);
  /** The indexes of the items to queue, in order. */
  const toQueue: number[] = [];
  // The first item of this batch holding each event key: a later item with the same
  // key is the same record (answered as the first) or a reused key (422).
  const firstWithKey = new Map<string, number>();
  const twins: [number, number][] = [];
  const turn = new EventLoopTurn();

  for (let index = 0; index < items.length; index++) {
    // A large batch is checked in slices, so other requests are answered between them.
    await turn.yieldIfLong();
    try {
      const { record, itemKey } = splitItem(items[index]);
      const key = itemKey ?? (batchKey === undefined ? undefined : `${batchKey}:${index}`);
      const item = checkRecord(record, key, uuidv7(), context);
      checked[index] = item;
      const first = firstWithKey.get(item.eventKey);
      if (first !== undefined) {
        if (checked[first]?.digest !== item.digest) throw reusedKey();
        twins.push([index, first]);
        continue;
      }
      if (key !== undefined) firstWithKey.set(item.eventKey, index);
      const previous = previousAnswer(item, context.replay);
      if (previous) {
        deps.metrics.replays.inc();
        results[index] = { index, status: 202, requestId: previous.requestId };
        continue;
      }
      toQueue.push(index);
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      checked[index] = undefined;
      results[index] = { index, status: error.statusCode as 400 | 422, ...error.toBody() };
      delete (results[index] as { statusCode?: number }).statusCode;
    }
  }
  // The capture policy (redaction) only on the records that will be queued.
  for (const index of toQueue) {
    await turn.yieldIfLong();
    prepared[index] = prepareRecord(checked[index]!, context);
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
    const usage = checked[result.index]!.usage;
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

/** The first errors of a list whose JSON fits the answer's byte budget. */
function fitWithin(errors: FieldError[]): FieldError[] {
  let spent = 2;
  let count = 0;
  for (const error of errors) {
    spent += JSON.stringify(error).length + 1;
    if (spent > errorReportLimits.answerBytes) break;
    count++;
  }
  return errors.slice(0, count);
}
