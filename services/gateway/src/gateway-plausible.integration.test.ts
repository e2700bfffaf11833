// Plausible values (docs/limits.md): a record one past a bound is refused on every
// route, naming the field; one at the bound is accepted. The bounds are the defaults
// (TOKENS_MAX 100,000,000; CALL_DURATION_MAX_HOURS 48).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PLAUSIBLE_BOUNDS } from '@otm/schemas';
import {
  createTestKey,
  fixture,
  httpRequest,
  postUsage,
  startGateway,
  uniqueName,
  type ServiceProcess,
} from '../../../test/helpers/stack.js';

const topic = uniqueName('gw-plausible');
const keyPrefix = `${uniqueName('gwp')}:`;
let gateway: ServiceProcess;
let apiKey: string;

beforeAll(async () => {
  gateway = await startGateway({ topic, keyPrefix });
  apiKey = (await createTestKey(keyPrefix, 'qa', 'plausible')).key;
});
afterAll(async () => {
  await gateway?.stop();
});

const MAX = DEFAULT_PLAUSIBLE_BOUNDS.maxTokens;
const CALL = DEFAULT_PLAUSIBLE_BOUNDS.maxCallMs;
const START = Date.parse('2026-11-22T10:00:00.000Z');
const at = (ms: number) => new Date(START + ms).toISOString();

/** A valid record with `change` applied. */
function record(change: (body: any) => void = () => undefined) {
  const body = fixture('valid/success.json');
  change(body);
  return body;
}

/** One past each bound, and the path that must be named. */
const PAST: [string, (body: any) => void][] = [
  ['/tokens/input', (b) => (b.tokens = { input: MAX + 1, output: 1 })],
  ['/tokens/output', (b) => (b.tokens = { input: 1, output: MAX + 1 })],
  ['/tokens/total', (b) => (b.tokens = { input: MAX, output: MAX, total: 2 * MAX + 1 })],
  ['/tokens/cachedInput', (b) => (b.tokens = { input: MAX, output: 1, cachedInput: MAX + 1 })],
  ['/tokens/cacheWrite', (b) => (b.tokens = { input: MAX, output: 1, cacheWrite: MAX + 1 })],
  ['/tokens/reasoning', (b) => (b.tokens = { input: 1, output: MAX, reasoning: MAX + 1 })],
  ['/timing/latencyMs', (b) => (b.timing.latencyMs = CALL + 1)],
  ['/timing/firstTokenTime', (b) => Object.assign(b.timing, { firstTokenTime: at(CALL + 1), lastTokenTime: at(CALL + 1) })],
  ['/timing/lastTokenTime', (b) => (b.timing.lastTokenTime = at(CALL + 1))],
];

/** Every value at its bound at once. */
const AT_BOUNDS = (b: any) => {
  b.tokens = { input: MAX, output: MAX, total: 2 * MAX, cachedInput: MAX / 2, cacheWrite: MAX / 2, reasoning: MAX };
  b.timing = { startTime: at(0), firstTokenTime: at(CALL), lastTokenTime: at(CALL), latencyMs: CALL };
};

describe('plausible values', () => {
  it.each(PAST)('single: %s one past its bound is 400 ValidationError naming it', async (path, change) => {
    const answer = await postUsage(gateway.url, record(change), { 'x-api-key': apiKey });
    expect(answer.status, answer.text).toBe(400);
    expect(answer.body).toMatchObject({ statusCode: 400, errorType: 'ValidationError' });
    const named = answer.body.errors.find((error: { path: string }) => error.path === path);
    expect(named, answer.text).toBeDefined();
    expect(named.message).toMatch(/^must be at most /);
  });

  it('single: a record with every value at its bound is accepted', async () => {
    const answer = await postUsage(gateway.url, record(AT_BOUNDS), { 'x-api-key': apiKey });
    expect(answer.status, answer.text).toBe(202);
    expect(answer.body.usage.totalTokens).toBe(2 * MAX);
  });

  it('batch: each item one past a bound is refused naming its field; the item at the bounds is accepted', async () => {
    const items = [record(AT_BOUNDS), ...PAST.map(([, change]) => record(change))];
    const answer = await httpRequest(`${gateway.url}/v1/telemetry/usage/batch`, {
      method: 'POST',
      headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
      body: JSON.stringify(items),
    });
    expect(answer.status, answer.text).toBe(207);
    expect(answer.body).toMatchObject({ accepted: 1, refused: PAST.length });
    expect(answer.body.results[0].status).toBe(202);
    PAST.forEach(([path], index) => {
      const result = answer.body.results[index + 1];
      expect(result).toMatchObject({ index: index + 1, status: 400, errorType: 'ValidationError' });
      expect(result.errors.map((error: { path: string }) => error.path)).toContain(path);
    });
  });

  it('OTLP: a GenAI span whose token count is past the bound is refused naming the field; one at the bound is accepted', async () => {
    const span = (spanId: string, inputTokens: number) => ({
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId,
      name: 'chat',
      startTimeUnixNano: String(BigInt(Date.now() - 5000) * 1_000_000n),
      endTimeUnixNano: String(BigInt(Date.now() - 4000) * 1_000_000n),
      attributes: [
        { key: 'gen_ai.provider.name', value: { stringValue: 'openai' } },
        { key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o' } },
        { key: 'gen_ai.usage.input_tokens', value: { intValue: String(inputTokens) } },
        { key: 'gen_ai.usage.output_tokens', value: { intValue: '1' } },
        { key: 'user.id', value: { stringValue: 'plausible' } },
      ],
    });
    const answer = await httpRequest(`${gateway.url}/v1/otlp/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
      body: JSON.stringify({
        resourceSpans: [{ scopeSpans: [{ spans: [span('00f067aa0ba90201', MAX), span('00f067aa0ba90202', MAX + 1)] }] }],
      }),
    });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.partialSuccess.rejectedSpans).toBe(1);
    expect(answer.body.partialSuccess.errorMessage).toContain('00f067aa0ba90202');
    expect(answer.body.partialSuccess.errorMessage).toContain('/tokens/input');
  });
});
