// The contract in one place: the usage record's JSON Schema (usage-record.schema.json),
// the envelope the gateway queues on Kafka around it, and the AJV compilation both
// the gateway and the ingester use. TypeScript types are generated from the same
// files (npm run gen:types) into ./generated.
import { createRequire } from 'node:module';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { parseTimestamp, type FieldError } from './bounds.js';
export * from './bounds.js';
export type { UsageRecord } from './generated/usage-record.js';
export type { QueuedUsageRecord, QueuedRecordMeta } from './generated/queued-usage-record.js';

const require = createRequire(import.meta.url);
export const usageRecordSchema = require('../usage-record.schema.json') as Record<string, unknown> & { $id: string };

export const QUEUED_RECORD_SCHEMA_ID = 'https://otm-telemetry.dev/schemas/queued-usage-record.v1.json';
export const ENVIRONMENTS = ['prod', 'qa', 'preview', 'dev'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

/**
 * What of a record's free text is kept (docs/privacy.md), from most to least:
 * `full` as sent; `redact` with personal data and credentials replaced by typed
 * placeholders; `metadata-only` without prompt and response (their lengths kept).
 */
export const CAPTURE_POLICIES = ['full', 'redact', 'metadata-only'] as const;
export type CapturePolicy = (typeof CAPTURE_POLICIES)[number];

/** The stricter of two policies: a key, its environment and a request header can each only lower what is kept. */
export function stricterCapture(a: CapturePolicy, b: CapturePolicy): CapturePolicy {
  return CAPTURE_POLICIES.indexOf(a) >= CAPTURE_POLICIES.indexOf(b) ? a : b;
}

/**
 * The schema registered for the topic's values: what the gateway knows about the
 * request (`meta`) beside the client's record (`record`), which is embedded
 * unchanged from usage-record.schema.json under definitions.usageRecord.
 */
export function buildQueuedRecordSchema(): Record<string, unknown> {
  const { $schema, $id, definitions, ...usageRecord } = usageRecordSchema as Record<string, unknown>;
  void $id;
  const refs = JSON.parse(JSON.stringify(usageRecord).replaceAll('"#/definitions/', '"#/definitions/usageRecord/definitions/'));
  return {
    $schema,
    $id: QUEUED_RECORD_SCHEMA_ID,
    title: 'QueuedUsageRecord',
    description: 'The message value on the usage topic: gateway metadata plus the validated client record.',
    type: 'object',
    additionalProperties: false,
    required: ['meta', 'record'],
    properties: {
      meta: { $ref: '#/definitions/queuedRecordMeta' },
      record: { $ref: '#/definitions/usageRecord' },
    },
    definitions: {
      queuedRecordMeta: {
        title: 'QueuedRecordMeta',
        type: 'object',
        additionalProperties: false,
        required: ['requestId', 'eventKey', 'receivedAt', 'apiKeyId', 'environment', 'idempotencyKey', 'gatewayId'],
        properties: {
          requestId: { type: 'string', description: 'UUIDv7 assigned by the gateway' },
          eventKey: { type: 'string', description: 'Scoped idempotency key: Kafka message key and dedupe key' },
          receivedAt: { type: 'string', format: 'date-time', description: 'Gateway receive time, RFC 3339 with ms' },
          apiKeyId: { type: 'string' },
          environment: { type: 'string', enum: [...ENVIRONMENTS] },
          idempotencyKey: { type: ['string', 'null'] },
          gatewayId: { type: 'string' },
          capture: {
            type: 'object',
            additionalProperties: false,
            required: ['policy'],
            description: 'The capture policy applied at the gateway; absent on records queued before policies existed (full)',
            properties: {
              policy: { type: 'string', enum: [...CAPTURE_POLICIES] },
              promptChars: { type: 'integer', minimum: 0, description: 'metadata-only: length of the dropped prompt (UTF-16 units)' },
              responseChars: { type: 'integer', minimum: 0, description: 'metadata-only: length of the dropped response (UTF-16 units)' },
              redactions: { type: 'integer', minimum: 0, description: 'spans replaced by placeholders' },
            },
          },
        },
      },
      usageRecord: { ...refs, definitions },
    },
  };
}

export interface ContextLimits {
  maxDepth: number;
  maxKeys: number;
  maxStringLength: number;
}

/** Walks `context` once; returns the first limit it breaks, or undefined. */
export function checkContextLimits(value: unknown, limits: ContextLimits): string | undefined {
  const walk = (node: unknown, depth: number): string | undefined => {
    if (depth > limits.maxDepth) return `must be at most ${limits.maxDepth} levels deep`;
    if (typeof node === 'string') {
      return node.length > limits.maxStringLength ? `strings must be at most ${limits.maxStringLength} characters` : undefined;
    }
    if (node === null || typeof node !== 'object') return undefined;
    const children = Array.isArray(node) ? node : Object.values(node);
    if (!Array.isArray(node)) {
      if (children.length > limits.maxKeys) return `objects must have at most ${limits.maxKeys} keys`;
      for (const key of Object.keys(node)) {
        if (key.length > limits.maxStringLength) return `keys must be at most ${limits.maxStringLength} characters`;
      }
    }
    for (const child of children) {
      const problem = walk(child, depth + 1);
      if (problem) return problem;
    }
    return undefined;
  };
  return walk(value, 1);
}

/** An AJV instance that knows our date-time format and the contextLimits keyword. */
export function createAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false, strictRequired: false, allowUnionTypes: true });
  // date-time is read by the one parser the ingester uses too (bounds.ts): a leap
  // second, 30 February or an offset written `+01` is refused, where RFC 3339's
  // grammar alone would let them through to a store that cannot hold them.
  ajv.addFormat('date-time', { type: 'string', validate: (text: string) => parseTimestamp(text) !== null });
  ajv.addKeyword({
    keyword: 'contextLimits',
    schemaType: 'object',
    errors: true,
    validate: function contextLimits(this: unknown, limits: ContextLimits, data: unknown) {
      const problem = checkContextLimits(data, limits);
      if (problem === undefined) return true;
      (contextLimits as unknown as { errors: Partial<ErrorObject>[] }).errors = [
        { keyword: 'contextLimits', message: problem, params: {} },
      ];
      return false;
    },
  });
  return ajv;
}

export interface Validators {
  /** Validates a client body (the usage record). */
  usageRecord: ValidateFunction;
  /** Validates a whole queued record (envelope). */
  queuedRecord: ValidateFunction;
}

export interface CompileOptions {
  /**
   * false leaves out every maxLength. The ingester re-checks what the gateway checked
   * under the same schema id; counting the characters of every prompt and response
   * again (AJV counts code points, a walk over the whole string) was 4 % of its CPU
   * and a length can never make a row unloadable.
   */
  maxLengths?: boolean;
}

/** Compiles validators from the schema as the registry holds it. */
export function compileValidators(registeredQueuedSchema: Record<string, unknown>, options: CompileOptions = {}): Validators {
  const ajv = createAjv();
  ajv.addSchema(options.maxLengths === false ? withoutKeyword(registeredQueuedSchema, 'maxLength') : registeredQueuedSchema);
  const id = registeredQueuedSchema.$id as string;
  const usageRecord = ajv.getSchema(`${id}#/definitions/usageRecord`);
  const queuedRecord = ajv.getSchema(id);
  if (!usageRecord || !queuedRecord) throw new Error('registered schema lacks definitions.usageRecord');
  return { usageRecord, queuedRecord };
}

/** A deep copy of a schema without one keyword wherever it appears as a keyword. */
function withoutKeyword(schema: Record<string, unknown>, keyword: string): Record<string, unknown> {
  const strip = (node: unknown, inProperties: boolean): unknown => {
    if (Array.isArray(node)) return node.map((item) => strip(item, false));
    if (node === null || typeof node !== 'object') return node;
    const copy: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(node)) {
      // Under "properties" (and the like) the names are field names, not keywords.
      if (!inProperties && name === keyword) continue;
      copy[name] = strip(value, !inProperties && MAPS_OF_SCHEMAS.has(name));
    }
    return copy;
  };
  return strip(schema, false) as Record<string, unknown>;
}

const MAPS_OF_SCHEMAS = new Set(['properties', 'patternProperties', 'definitions', '$defs', 'dependentSchemas']);

/** AJV errors as the documented `errors` list: a JSON pointer and a message each. */
export function toFieldErrors(errors: readonly ErrorObject[] | null | undefined): FieldError[] {
  const result: FieldError[] = [];
  const seen = new Set<string>();
  for (const error of errors ?? []) {
    // The if/then wrappers only repeat what the `required` error under them says.
    if (error.keyword === 'if') continue;
    let path = error.instancePath;
    let message = error.message ?? 'is invalid';
    if (error.keyword === 'required') {
      path = `${path}/${(error.params as { missingProperty: string }).missingProperty}`;
      message = 'is required';
    } else if (error.keyword === 'additionalProperties') {
      path = `${path}/${(error.params as { additionalProperty: string }).additionalProperty}`;
      message = 'is not allowed';
    } else if (error.keyword === 'not' && path === '/error') {
      message = 'must not carry both stack and stacktrace';
    } else if (error.keyword === 'enum') {
      message = `must be one of: ${(error.params as { allowedValues: unknown[] }).allowedValues.join(', ')}`;
    }
    const entry = `${path || '/'}\u0000${message}`;
    if (seen.has(entry)) continue;
    seen.add(entry);
    result.push({ path: path || '/', message });
  }
  return result;
}
