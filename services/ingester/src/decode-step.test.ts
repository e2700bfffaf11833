import { describe, expect, it } from 'vitest';
import { buildQueuedRecordSchema } from '@otm/schemas';
import { encodeWire } from '@otm/shared/registry';
import { queuedRecords, sampleUsageRecords } from '../../../test/fixtures/sample-records.js';
import { decodeKnown, decodeStep, SchemaCache, scopeProblem } from './decode-step.js';

const meta = (eventKey: string, apiKeyId = 'key_abc') => ({
  requestId: 'r',
  eventKey,
  receivedAt: '2026-11-23T00:00:00Z',
  apiKeyId,
  environment: 'prod' as const,
  idempotencyKey: null,
  gatewayId: 'direct:backfill',
});

describe('scopeProblem (direct producers)', () => {
  it("accepts a gateway's scoped key, a request id and a key without a scope", () => {
    expect(scopeProblem(meta('key_abc:order-17'))).toBeUndefined();
    expect(scopeProblem(meta('key_abc:batch-1:3'))).toBeUndefined();
    expect(scopeProblem(meta('0193a0e2-7c1d-7000-8000-000000000001'))).toBeUndefined();
    expect(scopeProblem(meta('backfill-2026-11-01-000017'))).toBeUndefined();
  });

  it("refuses a key scoped by another API key (it could shadow that key's records)", () => {
    expect(scopeProblem(meta('key_other:order-17'))).toBe(
      'meta.eventKey "key_other:order-17" is scoped by another API key than meta.apiKeyId',
    );
    expect(scopeProblem(meta(':order-17'))).toMatch(/another API key/);
  });
});

describe('decodeKnown: the answer of decodeStep without waiting, once the schema id was asked', () => {
  const schema = JSON.stringify(buildQueuedRecordSchema());
  // A registry that knows schema 7 only, as the client asks it (fetchJsonSchema).
  let asked = 0;
  const registry = {
    getSchemaOriginRequest: async (id: number) => {
      asked++;
      if (id !== 7) throw Object.assign(new Error('not found'), { status: 404 });
      return { data: () => ({ schema }) };
    },
  };
  const [record] = queuedRecords(sampleUsageRecords(1, { seed: 5 }), { eventKey: () => 'key_sample0:order-1', apiKeyId: 'key_sample0' });
  const messages = {
    ok: encodeWire(7, JSON.stringify(record)),
    unknownSchema: encodeWire(8, JSON.stringify(record)),
    noHeader: Buffer.from('{}'),
    empty: null,
    notJson: encodeWire(7, '{"meta":'),
    mismatch: encodeWire(7, JSON.stringify({ ...record, meta: { ...record!.meta, environment: 'nowhere' } })),
    foreignScope: encodeWire(7, JSON.stringify({ ...record, meta: { ...record!.meta, eventKey: 'key_other:order-1' } })),
  };

  it('is undefined until the schema id was asked, then answers as decodeStep does, for every kind of message', async () => {
    const schemas = new SchemaCache(registry as never);
    expect(decodeKnown(messages.ok, schemas)).toBeUndefined();
    expect(decodeKnown(messages.unknownSchema, schemas)).toBeUndefined();
    // Without a wire header no schema is needed: a dead letter at once.
    expect(decodeKnown(messages.noHeader, schemas)).toEqual(await decodeStep(messages.noHeader, schemas));
    for (const [name, value] of Object.entries(messages)) {
      const waited = await decodeStep(value, schemas);
      expect(decodeKnown(value, schemas), name).toEqual(waited);
    }
    expect(decodeKnown(messages.ok, schemas)).toMatchObject({ kind: 'ok' });
    expect(decodeKnown(messages.unknownSchema, schemas)).toMatchObject({ kind: 'deadLetter', code: 'unknown_schema' });
    expect(decodeKnown(messages.foreignScope, schemas)).toMatchObject({ kind: 'deadLetter', code: 'foreign_key_scope' });
    // Each schema id was asked once.
    expect(asked).toBe(2);
  });
});
