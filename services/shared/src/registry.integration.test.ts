// Registering against the real registry. Gateway workers start together (node:cluster)
// and each registers the schema: on a new subject they used to race on the
// subject's compatibility setting (both see none, both set it, the registry answers
// the second with 409) and the losing worker exited.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildQueuedRecordSchema } from '@otm/schemas';
import { testStack, uniqueName } from '../../../test/helpers/stack.js';
import { SchemaType } from '@kafkajs/confluent-schema-registry';
import { createRegistry, registerJsonSchema, SUBJECT_COMPATIBILITY } from './registry.js';

describe('registerJsonSchema', () => {
  it('eight clients registering on a new subject at once, 20 subjects: each gets the same id', async () => {
    const { SCHEMA_REGISTRY_URL } = testStack();
    const schema = buildQueuedRecordSchema();
    for (let round = 0; round < 20; round++) {
      const subject = `${uniqueName('race')}-value`;
      const ids = await Promise.all(
        Array.from({ length: 8 }, () => registerJsonSchema(createRegistry(SCHEMA_REGISTRY_URL), subject, schema)),
      );
      expect(new Set(ids).size).toBe(1);
      expect(ids[0]).toBeGreaterThan(0);
    }
  });

  it('sets the subject to BACKWARD_TRANSITIVE (also on a subject made with the old default) and the registry refuses a breaking version', async () => {
    const { SCHEMA_REGISTRY_URL } = testStack();
    const registry = createRegistry(SCHEMA_REGISTRY_URL);
    const subject = `${uniqueName('compat')}-value`;
    const schema = buildQueuedRecordSchema() as {
      definitions: { queuedRecordMeta: { properties: Record<string, unknown>; required: string[] } };
    };
    // As an older version left it: registered with the client's default, BACKWARD.
    await registry.register({ type: SchemaType.JSON, schema: JSON.stringify(schema) }, { subject });
    const config = async () =>
      ((await (await fetch(`${SCHEMA_REGISTRY_URL}/config/${subject}`)).json()) as { compatibilityLevel: string }).compatibilityLevel;
    expect(await config()).toBe('BACKWARD');
    const id = await registerJsonSchema(registry, subject, schema);
    expect(id).toBeGreaterThan(0);
    expect(await config()).toBe(SUBJECT_COMPATIBILITY);

    // A compatible change (a new optional member of meta) is a new version.
    const added = structuredClone(schema);
    added.definitions.queuedRecordMeta.properties.note = { type: 'string' };
    expect(await registerJsonSchema(registry, subject, added)).toBeGreaterThan(id);
    // A breaking one (the request id becomes a number) is refused.
    const broken = structuredClone(schema);
    broken.definitions.queuedRecordMeta.properties.requestId = { type: 'integer' };
    await expect(registerJsonSchema(registry, subject, broken)).rejects.toThrow();
  });

  it('takes schema v2 (token detail, context rules in standard keywords) as a compatible new version after v1', async () => {
    const { SCHEMA_REGISTRY_URL } = testStack();
    const registry = createRegistry(SCHEMA_REGISTRY_URL);
    const subject = `${uniqueName('v1v2')}-value`;
    const v1 = JSON.parse(fs.readFileSync(new URL('../../../schemas/history/queued-record.v1.schema.json', import.meta.url), 'utf8'));
    const v1Id = await registerJsonSchema(registry, subject, v1);
    const v2Id = await registerJsonSchema(registry, subject, buildQueuedRecordSchema());
    // Ids are the registry's content ids (global): v2 may have one from another subject already.
    expect(v2Id).not.toBe(v1Id);
    const versions = (await (await fetch(`${SCHEMA_REGISTRY_URL}/subjects/${subject}/versions`)).json()) as number[];
    expect(versions).toHaveLength(2);
    const latest = (await (await fetch(`${SCHEMA_REGISTRY_URL}/subjects/${subject}/versions/latest`)).json()) as { id: number };
    expect(latest.id).toBe(v2Id);
  });
});
