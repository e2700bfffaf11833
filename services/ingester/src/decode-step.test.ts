import { describe, expect, it } from 'vitest';
import { scopeProblem } from './decode-step.js';

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
