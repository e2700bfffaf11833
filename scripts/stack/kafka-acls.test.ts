// What the stack's Kafka set-up repeats of the services (it cannot import them: the test
// setup loads it before any workspace is built) stays what the services use.
import { describe, expect, it } from 'vitest';
import { ERASURE_TOPIC_CONFIG } from '../../services/shared/src/erasure-announcements.js';
import { ingesterSpec } from '../../services/ingester/src/config.js';
import { DEFAULT_PIPELINE_NAMES, ERASURE_TOPIC_SETTINGS, serviceAcls } from './kafka-acls.js';

describe("the stack's Kafka set-up", () => {
  it("names the ingester's default group and makes the erasure topic as the services would", () => {
    expect(DEFAULT_PIPELINE_NAMES.ingestGroup).toBe(ingesterSpec.INGEST_GROUP_ID.default);
    expect(ERASURE_TOPIC_SETTINGS).toEqual(ERASURE_TOPIC_CONFIG);
  });

  it('gives no service a right on a topic it does not use, and the gateway none to read', () => {
    const grants = serviceAcls(DEFAULT_PIPELINE_NAMES);
    const gateway = grants.filter((grant) => grant.principal === 'User:otm-gateway');
    expect(gateway).toEqual([
      { principal: 'User:otm-gateway', resource: 'topic', name: 'telemetry.usage.v1', operations: ['describe', 'write'] },
    ]);
    expect(grants.every((grant) => !grant.prefixed)).toBe(true);
  });
});
