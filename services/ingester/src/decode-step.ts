// Decode: wire header -> the schema id picks the registered schema (so a record
// written with an older registered version still decodes) -> JSON -> validated
// queued record. A message that can never decode is a dead letter; an unreachable
// registry is an infrastructure failure (thrown, retried). Lengths are the gateway's
// to enforce (the same schema id): the ingester checks everything else again.
import { compileValidators, type QueuedUsageRecord } from '@otm/schemas';
import { decodeWire, fetchJsonSchema } from '@otm/shared/registry';
import type { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import type { ValidateFunction } from 'ajv';
import { deadLetter, deadLetterReason, ok, type StepOutcome } from './outcome.js';

export class SchemaCache {
  private readonly validators = new Map<number, ValidateFunction | null>();

  constructor(private readonly registry: SchemaRegistry) {}

  /** The validator for a schema id asked before (null: the registry did not know it); undefined when not asked yet. */
  known(schemaId: number): ValidateFunction | null | undefined {
    return this.validators.get(schemaId);
  }

  /** The validator for a schema id; null when the registry does not know the id. */
  async get(schemaId: number): Promise<ValidateFunction | null> {
    if (this.validators.has(schemaId)) return this.validators.get(schemaId)!;
    let validator: ValidateFunction | null;
    try {
      validator = compileValidators(await fetchJsonSchema(this.registry, schemaId), { maxLengths: false }).queuedRecord;
    } catch (error) {
      const status = (error as { status?: number }).status;
      if (status !== 404) throw error;
      validator = null;
    }
    this.validators.set(schemaId, validator);
    return validator;
  }
}

export async function decodeStep(value: Buffer | null, schemas: SchemaCache): Promise<StepOutcome<QueuedUsageRecord>> {
  const wire = decodeWire(value);
  if (!wire.ok) return deadLetter('no_wire_header', { detail: wire.reason });
  return checkDocument(wire.schemaId, wire.json, await schemas.get(wire.schemaId));
}

/**
 * decodeStep without waiting, for a message whose schema id was asked before (every
 * message but the first of each schema): undefined when the registry must be asked.
 * A record costs no promise and no turn of the microtask queue.
 */
export function decodeKnown(value: Buffer | null, schemas: SchemaCache): StepOutcome<QueuedUsageRecord> | undefined {
  const wire = decodeWire(value);
  if (!wire.ok) return deadLetter('no_wire_header', { detail: wire.reason });
  const validate = schemas.known(wire.schemaId);
  return validate === undefined ? undefined : checkDocument(wire.schemaId, wire.json, validate);
}

function checkDocument(schemaId: number, json: string, validate: ValidateFunction | null): StepOutcome<QueuedUsageRecord> {
  if (!validate) return deadLetter('unknown_schema', { schemaId });
  let document: unknown;
  try {
    document = JSON.parse(json);
  } catch {
    return deadLetter('not_json', undefined);
  }
  if (!validate(document)) {
    const first = validate.errors?.[0];
    return deadLetter('schema_mismatch', { schemaId, path: first?.instancePath || '/', message: first?.message ?? '' });
  }
  const queued = document as QueuedUsageRecord;
  return scopeProblem(queued.meta) ? deadLetter('foreign_key_scope', { eventKey: queued.meta.eventKey }) : ok(queued);
}

/**
 * An event key that claims another API key's scope (`<apiKeyId>:<idempotencyKey>` is
 * how gateways form keys) could shadow that key's records in dedupe; only a direct
 * producer can write one. Keys without a colon (a direct producer's own, a request id)
 * are never a gateway's scoped key.
 */
export function scopeProblem(meta: QueuedUsageRecord['meta']): string | undefined {
  const colon = meta.eventKey.indexOf(':');
  if (colon === -1 || meta.eventKey.slice(0, colon) === meta.apiKeyId) return undefined;
  return deadLetterReason('foreign_key_scope', { eventKey: meta.eventKey });
}
