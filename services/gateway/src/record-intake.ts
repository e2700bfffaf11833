// One usage record from body to queued message, shared by the single and the batch
// endpoint so both apply exactly the same rules: schema, bounds, scoped key, replay.
// Refusals are thrown as ServiceError (the single endpoint answers them whole; the
// batch endpoint turns each into its item's result).
import { hash } from 'node:crypto';
import {
  checkRecordBounds,
  toFieldErrors,
  type QueuedUsageRecord,
  type CapturePolicy,
  type RecordBounds,
  type UsageRecord,
  type Validators,
} from '@otm/schemas';
import { refuse } from '@otm/shared/errors';
import type { IngestKeyRecord } from '@otm/shared/keys/key-store';
import { Utf8Scratch, type TextPiece } from '@otm/shared/registry';
import { applyCapture, type CaptureMeta } from './capture.js';
import type { Redactor } from './redact.js';

export interface AcceptedReply {
  requestId: string;
  timestamp: string;
  /**
   * SHA-256 of the accepted record as parsed (whitespace and transfer encoding of the
   * body do not matter; member order does): a replay with another record is refused.
   */
  digest: string;
}

export interface ReplayCache {
  get(key: string): AcceptedReply | undefined;
  set(key: string, value: AcceptedReply): unknown;
}

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
}

/** A record that passed every check, not yet changed by a capture policy. */
export interface CheckedRecord {
  requestId: string;
  /** The Kafka key and dedupe key: the idempotency key scoped by the API key id, else the requestId. */
  eventKey: string;
  idempotencyKey: string | null;
  record: UsageRecord;
  /**
   * The record as sent, serialised in UTF-8, computed only when a digest needed it: a
   * view of the intake's scratch, valid until the next record is checked or prepared.
   */
  sentText: Uint8Array | undefined;
  /** Empty when there is no idempotency key (nothing to compare a replay with). */
  digest: string;
  usage: Usage;
}

/** A checked record with its capture policy applied, serialised once, ready to queue. */
export interface PreparedRecord extends Omit<CheckedRecord, 'record' | 'sentText'> {
  /** The record's text in UTF-8: a view of the intake's scratch, to be written into its message before the next record is checked. */
  recordText: Uint8Array;
  /** The capture policy applied to the record, for the queued meta. */
  capture: CaptureMeta;
}

export interface IntakeContext {
  validators: Pick<Validators, 'usageRecord'>;
  recordBounds: RecordBounds;
  schemaId: number;
  instanceId: string;
  apiKey: IngestKeyRecord;
  receivedAt: Date;
  /** receivedAt in RFC 3339 with milliseconds: formatted once per request, shared by its records. */
  receivedAtIso: string;
  replay?: ReplayCache;
  /** The capture policy of the request's records (capture.ts) and the redactor it may need. */
  capture: CapturePolicy;
  redactor: Redactor;
}

export const IDEMPOTENCY_KEY = /^[\x20-\x7E]{1,255}$/;

/**
 * Each record's text is encoded into UTF-8 once, here, and those bytes are hashed for its
 * digest and copied into its message. Records are checked, prepared and written one at a
 * time, without a wait between (intake.ts), so one scratch serves every request.
 */
const scratch = new Utf8Scratch();

/**
 * Validates `body` as a usage record; throws ServiceError when it is refused. The
 * capture policy is not applied yet: redaction costs CPU, so it runs (prepareRecord)
 * only on a record that is going to be queued.
 */
export function checkRecord(body: unknown, idempotencyKey: string | undefined, requestId: string, context: IntakeContext): CheckedRecord {
  // No object of a usage record may hold more than 64 members (context's levels; the
  // others have a few named ones): one with hundreds is refused before the validator,
  // which would build an error object for each of its members.
  const crowded = crowdedObject(body, MAX_MEMBERS_BEFORE_VALIDATION);
  if (crowded) {
    throw refuse('recordInvalid', {
      errors: [{ path: crowded.path || '/', message: `has ${crowded.members} members; no object of a usage record holds more than 64` }],
    });
  }
  if (!context.validators.usageRecord(body)) {
    throw refuse('recordInvalid', {
      errors: toFieldErrors(context.validators.usageRecord.errors),
    });
  }
  const record = body as UsageRecord;
  // What the schema cannot say: the store must be able to hold every value.
  const outOfBounds = checkRecordBounds(record as unknown as Record<string, unknown>, context.recordBounds, context.receivedAt.getTime());
  if (outOfBounds.length > 0) {
    throw refuse('recordUnstorable', { errors: outOfBounds });
  }
  normaliseStack(record);
  // A replay is compared by the record as sent, not by what the policy leaves of it
  // (two records differing only in a redacted e-mail address are different records).
  const sentText = idempotencyKey ? scratch.encode(JSON.stringify(record)) : undefined;
  return {
    requestId,
    // Two customers using the same idempotency string never collide.
    eventKey: idempotencyKey ? `${context.apiKey.id}:${idempotencyKey}` : requestId,
    idempotencyKey: idempotencyKey ?? null,
    record,
    sentText,
    // One-shot hash: half the cost of a Hash object for a few kilobytes.
    digest: sentText === undefined ? '' : hash('sha256', sentText, 'base64url'),
    usage: usageOf(record),
  };
}

/** Applies the capture policy to a checked record and serialises it, once (the record as sent is reused when the policy keeps it whole). */
export function prepareRecord(checked: CheckedRecord, context: IntakeContext): PreparedRecord {
  const { record, sentText, ...rest } = checked;
  const capture = applyCapture(record, context.capture, context.redactor);
  const recordText = context.capture === 'full' && sentText !== undefined ? sentText : scratch.encode(JSON.stringify(record));
  return { ...rest, recordText, capture };
}

/**
 * The answer already given for this record's idempotency key, if the gateway still
 * holds it; a different record under a known key is refused (422).
 */
export function previousAnswer(
  prepared: Pick<CheckedRecord, 'idempotencyKey' | 'eventKey' | 'digest'>,
  replay: ReplayCache | undefined,
): AcceptedReply | undefined {
  if (!prepared.idempotencyKey || !replay) return undefined;
  const previous = replay.get(prepared.eventKey);
  if (previous && previous.digest !== prepared.digest) {
    throw refuse('idempotencyKeyReused');
  }
  return previous;
}

/**
 * The registered envelope {meta, record} as JSON text, in pieces (the intake writes them
 * into the message buffer after the wire header, WireWriter: the record's text is not
 * copied into a string of the whole envelope first).
 */
export function queuedJson(prepared: PreparedRecord, context: IntakeContext): TextPiece[] {
  const meta: QueuedUsageRecord['meta'] = {
    requestId: prepared.requestId,
    eventKey: prepared.eventKey,
    receivedAt: context.receivedAtIso,
    apiKeyId: context.apiKey.id,
    environment: context.apiKey.environment,
    idempotencyKey: prepared.idempotencyKey,
    gatewayId: context.instanceId,
    capture: prepared.capture,
  };
  return ['{"meta":', JSON.stringify(meta), ',"record":', prepared.recordText, '}'];
}

export function usageOf(record: UsageRecord): Usage {
  const input = record.tokens?.input ?? 0;
  const output = record.tokens?.output ?? 0;
  return { inputTokens: input, outputTokens: output, totalTokens: record.tokens?.total ?? input + output };
}

/** Members an object may hold before the validator runs (the schema's own bound is 64; this one only spares the validator). */
export const MAX_MEMBERS_BEFORE_VALIDATION = 256;

/**
 * The first object (JSON pointer) holding more than `max` members, walking the whole
 * value once. Run on every record: it allocates nothing unless it finds one (the path
 * is kept as segments and written out only then). The body's depth is bounded before
 * it is parsed, so the recursion is too.
 */
export function crowdedObject(value: unknown, max: number): { path: string; members: number } | undefined {
  const segments: string[] = [];
  const find = (node: unknown): number => {
    if (node === null || typeof node !== 'object') return 0;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        segments.push(String(i));
        const members = find(node[i]);
        if (members > 0) return members;
        segments.pop();
      }
      return 0;
    }
    const object = node as Record<string, unknown>;
    let members = 0;
    for (const key in object) if (Object.hasOwn(object, key)) members++;
    if (members > max) return members;
    for (const key in object) {
      if (!Object.hasOwn(object, key)) continue;
      const child = object[key];
      if (child === null || typeof child !== 'object') continue;
      segments.push(key);
      const found = find(child);
      if (found > 0) return found;
      segments.pop();
    }
    return 0;
  };
  const members = find(value);
  if (members === 0) return undefined;
  return { path: segments.map((key) => `/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`).join(''), members };
}

/** The stack trace travels as `stack` whichever name the client used. */
function normaliseStack(record: UsageRecord): void {
  const error = record.error;
  if (error && error.stacktrace !== undefined) {
    error.stack = error.stacktrace;
    delete error.stacktrace;
  }
}
