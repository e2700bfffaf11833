// Registering against the real registry. Gateway workers start together (node:cluster)
// and each registers the schema: on a new subject they used to race on the
// subject's compatibility setting (both see none, both set it, the registry answers
// the second with 409) and the losing worker exited.
import { describe, expect, it } from 'vitest';
import { buildQueuedRecordSchema } from '@otm/schemas';
import { testStack, uniqueName } from '../../../test/helpers/stack.js';
import { createRegistry, registerJsonSchema } from './registry.js';

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
});
