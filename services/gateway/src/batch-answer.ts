// The batch endpoint's body and answer apart from the route: the items a body holds
// (each with its own idempotency key, or the batch's with its index), each item's
// result as the answer lists it, and the 400 answer when no item was valid.
import { ServiceError, type FieldError, refuse, withinErrorBudget } from '@otm/shared/errors';
import { v7 as uuidv7 } from 'uuid';
import { isDeferredBatch, UnreadableLine, type DeferredBatch } from './batch-body.js';
import type { IntakeEntry, IntakeItem, ItemResult } from './intake.js';
import { IDEMPOTENCY_KEY } from './record-intake.js';

export interface BatchItemResult {
  index: number;
  status: 202 | 400 | 422 | 503;
  requestId?: string;
  errorType?: string;
  message?: string;
  errors?: FieldError[];
  truncated?: boolean;
}

/**
 * The batch's items for the intake: a member `idempotencyKey` is the item's own key, else
 * the batch's key with the item's index. A clean JSON array's items and an NDJSON batch's
 * lines stay deferred: each is parsed when the intake reaches it (DeferredItems, DeferredLines).
 */
export function batchItems(items: unknown[] | DeferredBatch, batchKey: string | undefined): IntakeEntry[] {
  const toItem = (item: unknown, index: number): IntakeItem | ServiceError => {
    try {
      const { record, itemKey } = splitItem(item);
      return { record, idempotencyKey: itemKey ?? (batchKey === undefined ? undefined : `${batchKey}:${index}`), requestId: uuidv7() };
    } catch (error) {
      if (error instanceof ServiceError) return error;
      throw error;
    }
  };
  if (isDeferredBatch(items)) return Array.from({ length: items.length }, (_, index) => () => toItem(items.parse(index), index));
  return items.map(toItem);
}

/** An item's result as the batch answer lists it. */
export function itemResult(result: ItemResult, index: number): BatchItemResult {
  if (result.kind === 'accepted') return { index, status: 202, requestId: result.requestId };
  if (result.kind === 'unavailable') {
    const { errorType, message } = refuse('queueUnavailableItem').toBody();
    return { index, status: 503, errorType, message };
  }
  const { statusCode, ...body } = result.error.toBody();
  return { index, status: statusCode as 400 | 422, ...body };
}

/**
 * The 400 answer when no item of the batch is valid: every item's errors once, pointing
 * into the batch, within the answer's budget; the results then say each item's status
 * and type only.
 */
export function noneValidAnswer(results: BatchItemResult[]) {
  const errors: FieldError[] = [];
  let truncated = false;
  for (const result of results) {
    truncated ||= result.truncated === true;
    for (const error of result.errors ?? [{ path: '/', message: result.message ?? 'refused' }]) {
      errors.push({ path: `/${result.index}${error.path === '/' ? '' : error.path}`, message: error.message });
    }
    delete result.errors;
    delete result.truncated;
  }
  const listed = fitWithin(errors);
  truncated ||= listed.length < errors.length;
  const body = refuse('batchNoneValid').toBody();
  return { ...body, errors: listed, ...(truncated ? { truncated: true } : {}), results };
}

/** An item is a record, plus optionally its own `idempotencyKey` (removed before validation). */
function splitItem(item: unknown): { record: unknown; itemKey: string | undefined } {
  if (item instanceof UnreadableLine) throw item.error;
  if (item === null || typeof item !== 'object' || Array.isArray(item) || !('idempotencyKey' in item)) {
    return { record: item, itemKey: undefined };
  }
  const { idempotencyKey, ...record } = item as Record<string, unknown>;
  if (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY.test(idempotencyKey)) {
    throw refuse('idempotencyKeyMemberInvalid', {
      errors: [{ path: '/idempotencyKey', message: 'must be a string of 1 to 255 printable ASCII characters' }],
    });
  }
  return { record, itemKey: idempotencyKey };
}

/** The first errors of a list whose JSON (brackets, and a comma each) fits the answer's byte budget. */
function fitWithin(errors: FieldError[]): FieldError[] {
  return errors.slice(
    0,
    withinErrorBudget(errors, (error) => JSON.stringify(error).length + 1, 2),
  );
}
