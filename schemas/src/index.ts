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

/** The value of the erasure topic's messages (docs/topic-contract.md, "Erasures"). */
export const erasureAnnouncementSchema = require('../erasure-announcement.schema.json') as Record<string, unknown> & { $id: string };

/** One erasure, as announced on the erasure topic. */
export interface ErasureAnnouncement {
  environment: Environment;
  userId: string;
  /** RFC 3339: records of the user received at or before it are erased. */
  erasedAt: string;
  requestedAt: string;
  jobId: string;
}

export const QUEUED_RECORD_SCHEMA_ID = 'https://otm-telemetry.dev/schemas/queued-usage-record.v2.json';
/** The `content-type` header of messages on the usage topic: JSON behind the registry's 5-byte frame (magic byte 0, schema id). */
export const QUEUED_CONTENT_TYPE = 'application/json; framing=schema-registry';

/** The headers a gateway sets on every message of the usage topic, and what each holds (docs/topic-contract.md is generated from this). */
export const QUEUED_MESSAGE_HEADERS = {
  'content-type': `\`${QUEUED_CONTENT_TYPE}\`: the value's format, readable without decoding it`,
  'x-schema-id': 'the registry id of the schema the value was written with (the same id the value carries)',
  'x-request-id': "the gateway's request id (UUIDv7), the one in its answer and its logs",
} as const;
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
 * The record as a reader of the topic may rely on it: usage-record.schema.json without
 * the admission rules that only narrow which text is accepted (the `pattern`s of
 * identifiers and timestamps, the per-level bounds of `context`). The gateway admits
 * by the full file; the topic's schema states the shape, so the registry's
 * BACKWARD_TRANSITIVE check holds from schema v1 on (docs/topic-contract.md, "Schema
 * versions"), and a stricter admission rule never breaks a reader's old messages.
 */
export function recordReaderSchema(): Record<string, unknown> {
  const loose = withoutKeyword(withoutKeyword(usageRecordSchema, 'pattern'), 'propertyNames') as {
    properties: Record<string, Record<string, unknown>>;
    definitions: Record<string, unknown>;
  };
  const { description, type, maxProperties } = loose.properties.context!;
  loose.properties.context = { description, type, maxProperties, additionalProperties: true };
  for (const name of Object.keys(loose.definitions)) if (name.startsWith('context')) delete loose.definitions[name];
  return loose;
}

/**
 * The schema registered for the topic's values: what the gateway knows about the
 * request (`meta`) beside the client's record (`record`), embedded as a reader sees
 * it (recordReaderSchema) under definitions.usageRecord.
 */
export function buildQueuedRecordSchema(): Record<string, unknown> {
  const { $schema, $id, ...usageRecord } = recordReaderSchema();
  void $id;
  // Refs inside the embedded record (its definitions refer to each other too) point into it.
  const embedded = JSON.parse(JSON.stringify(usageRecord).replaceAll('"#/definitions/', '"#/definitions/usageRecord/definitions/'));
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
          apiKeyId: {
            type: 'string',
            description: 'Id of the API key that sent the record (never the key); a direct producer names itself',
          },
          environment: { type: 'string', enum: [...ENVIRONMENTS], description: "The API key's environment" },
          idempotencyKey: { type: ['string', 'null'], description: "The client's Idempotency-Key (or a batch item's), null without one" },
          gatewayId: { type: 'string', description: 'The gateway instance (GATEWAY_INSTANCE_ID); `direct:<name>` for a direct producer' },
          capture: {
            type: 'object',
            additionalProperties: false,
            required: ['policy'],
            description: 'The capture policy applied at the gateway; absent on records queued before policies existed (full)',
            properties: {
              policy: { type: 'string', enum: [...CAPTURE_POLICIES], description: 'What of the free text was kept (docs/privacy.md)' },
              promptChars: { type: 'integer', minimum: 0, description: 'metadata-only: length of the dropped prompt (UTF-16 units)' },
              responseChars: { type: 'integer', minimum: 0, description: 'metadata-only: length of the dropped response (UTF-16 units)' },
              redactions: { type: 'integer', minimum: 0, description: 'spans replaced by placeholders' },
            },
          },
        },
      },
      usageRecord: embedded,
    },
  };
}

// Schema v1 bounded `context` with a keyword of its own, `contextLimits`; v2 says the
// same in standard keywords. Messages queued under v1 stay on the topic (and in the
// registry) until retention ends, so the keyword is still known when reading them.
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

/**
 * An AJV instance that knows our date-time format (and v1's `contextLimits`). Every other rule of the schema is
 * a standard keyword, so an independent validator (Python's jsonschema with format
 * checking, test/validator-parity.integration.test.ts) accepts and refuses the same records.
 */
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
  /** Validates a client body (the usage record) by every admission rule of usage-record.schema.json. */
  usageRecord: ValidateFunction;
  /** Validates a whole queued record (envelope) by the schema it was written with. */
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

/**
 * Compiles the body validator from usage-record.schema.json (the admission rules this
 * release enforces) and the envelope validator from the schema as the registry holds
 * it (what a message written under that id was checked against).
 */
export function compileValidators(registeredQueuedSchema: Record<string, unknown>, options: CompileOptions = {}): Validators {
  const lengths = (schema: Record<string, unknown>) => (options.maxLengths === false ? withoutKeyword(schema, 'maxLength') : schema);
  const ajv = createAjv();
  ajv.addSchema(lengths(registeredQueuedSchema));
  ajv.addSchema(lengths(usageRecordSchema));
  const usageRecord = ajv.getSchema(usageRecordSchema.$id);
  const queuedRecord = ajv.getSchema(registeredQueuedSchema.$id as string);
  if (!usageRecord || !queuedRecord) throw new Error('schema without $id');
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

const definitions = (usageRecordSchema as unknown as { definitions: Record<string, { pattern?: string }> }).definitions;
/** The schema's own patterns, said in words (a key's name: the same words after `key `). */
const PATTERN_MESSAGES = new Map([
  [definitions.identifier!.pattern!, 'must not contain control characters or bidirectional overrides'],
  [definitions.contextKey!.pattern!, 'must not contain control characters or bidirectional overrides'],
  [definitions.timestamp!.pattern!, 'must be an RFC 3339 date-time: upper-case T, offset Z or ±hh:mm'],
]);

function escapeKey(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** AJV errors as the documented `errors` list: a JSON pointer and a message each. */
export function toFieldErrors(errors: readonly ErrorObject[] | null | undefined): FieldError[] {
  const result: FieldError[] = [];
  const seen = new Set<string>();
  for (const error of errors ?? []) {
    // The if/then wrappers only repeat what the `required` error under them says.
    if (error.keyword === 'if') continue;
    let path = error.instancePath;
    // An error about a key's name (under propertyNames) names the key itself.
    if (error.propertyName !== undefined) path = `${path}/${escapeKey(error.propertyName)}`;
    let message = error.message ?? 'is invalid';
    if (error.keyword === 'required') {
      path = `${path}/${(error.params as { missingProperty: string }).missingProperty}`;
      message = 'is required';
    } else if (error.keyword === 'additionalProperties') {
      path = `${path}/${(error.params as { additionalProperty: string }).additionalProperty}`;
      message = 'is not allowed';
    } else if (error.keyword === 'not' && path === '/error') {
      message = 'must not carry both stack and stacktrace';
    } else if (error.keyword === 'pattern' && PATTERN_MESSAGES.has((error.params as { pattern: string }).pattern)) {
      message = PATTERN_MESSAGES.get((error.params as { pattern: string }).pattern)!;
      if (error.propertyName !== undefined) message = `key ${message}`;
    } else if (error.keyword === 'format' && (error.params as { format: string }).format === 'date-time') {
      message = 'must be a real RFC 3339 date-time (no leap second, a real calendar day)';
    } else if (error.keyword === 'propertyNames') {
      continue; // the error under it (the key's own pattern or length) names the key
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
