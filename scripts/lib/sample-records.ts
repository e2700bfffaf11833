// Deterministic sample usage records (seeded), for tests, the benchmark and demos:
// a mix of success records with prompts of 0.5-4 KB and error records, over common
// models, users of both types, and all environments.
import type { Environment, QueuedUsageRecord, UsageRecord } from '@otm/schemas';

/** mulberry32: small, fast, seedable. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MODELS: [provider: string, model: string][] = [
  ['openai', 'gpt-4o'],
  ['openai', 'gpt-4o-mini-2024-07-18'],
  ['anthropic', 'claude-3-5-sonnet'],
  ['anthropic', 'claude-3-5-haiku'],
  ['google', 'gemini-1.5-pro'],
  ['mistral', 'mistral-large'],
  ['acme', 'in-house-7b'], // no price: cost stays null
];
const CACHING = new Set(['openai', 'anthropic', 'google']);
const ERRORS = [
  ['rate_limit_exceeded', 'Too many requests'],
  ['timeout', 'Upstream timed out'],
  ['context_length_exceeded', 'Prompt too long'],
];
const WORDS = 'the invoice summary model token stream answer customer refund policy latency error retry budget'.split(' ');

export interface SampleOptions {
  seed?: number;
  /** Records start at this epoch ms and advance ~1 s each. */
  startMs?: number;
  errorShare?: number;
  users?: number;
}

export function sampleUsageRecords(count: number, options: SampleOptions = {}): UsageRecord[] {
  const random = seededRandom(options.seed ?? 42);
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
  const text = (bytes: number) => {
    const words: string[] = [];
    let length = 0;
    while (length < bytes) {
      const word = pick(WORDS);
      words.push(word);
      length += word.length + 1;
    }
    return words.join(' ');
  };
  const startMs = options.startMs ?? Date.UTC(2026, 10, 22, 10, 0, 0);
  const records: UsageRecord[] = [];
  for (let i = 0; i < count; i++) {
    const [provider, modelId] = pick(MODELS);
    const userIndex = Math.floor(random() * (options.users ?? 50));
    const user = { id: `user-${userIndex}`, type: (userIndex % 5 === 0 ? 'internal' : 'external') as 'internal' | 'external' };
    const start = startMs + i * 1000 + Math.floor(random() * 1000);
    if (random() < (options.errorShare ?? 0.1)) {
      const [code, message] = pick(ERRORS);
      records.push({
        request: { modelId, status: 'error', provider },
        user,
        error: { code: code!, message: message!, stack: `Error: ${message}\n    at call (client.ts:1:1)` },
      });
      continue;
    }
    const input = 50 + Math.floor(random() * 4000);
    const output = 10 + Math.floor(random() * 1000);
    const ttft = 100 + Math.floor(random() * 900);
    const stream = 200 + Math.floor(random() * 5000);
    // Token detail (schema v2) on some records, derived without drawing from the seeded
    // sequence (the records of a seed stay the same): cache reads on every third record
    // of a caching provider, a cache write on Anthropic's, reasoning on Google's.
    const tokens: NonNullable<UsageRecord['tokens']> = { input, output, total: input + output };
    if (i % 3 === 0 && CACHING.has(provider)) tokens.cachedInput = Math.floor(input * 0.6);
    if (i % 3 === 0 && provider === 'anthropic') tokens.cacheWrite = Math.floor(input * 0.2);
    if (provider === 'google') tokens.reasoning = Math.floor(output / 3);
    records.push({
      request: { modelId, status: 'success', provider },
      user,
      tokens,
      timing: {
        startTime: new Date(start).toISOString(),
        firstTokenTime: new Date(start + ttft).toISOString(),
        lastTokenTime: new Date(start + ttft + stream).toISOString(),
        latencyMs: ttft + stream,
      },
      io: { prompt: text(500 + Math.floor(random() * 3500)), response: text(100 + Math.floor(random() * 400)) },
      context: { feature: pick(['chat', 'summary', 'search']), sampleIndex: i },
    });
  }
  return records;
}

/** Wraps client records as the gateway queues them. */
export function queuedRecords(
  records: UsageRecord[],
  options: { apiKeyId?: string; environment?: Environment; eventKey?: (index: number) => string; receivedAtMs?: number } = {},
): QueuedUsageRecord[] {
  const environments: Environment[] = ['prod', 'qa', 'preview', 'dev'];
  return records.map((record, index) => {
    const eventKey = options.eventKey?.(index) ?? `sample-${index}`;
    return {
      meta: {
        requestId: `0190${index.toString(16).padStart(4, '0')}-0000-7000-8000-${index.toString(16).padStart(12, '0')}`,
        eventKey,
        receivedAt: new Date((options.receivedAtMs ?? Date.UTC(2026, 10, 22, 12)) + index).toISOString(),
        apiKeyId: options.apiKeyId ?? `key_sample${index % 3}`,
        environment: options.environment ?? environments[index % environments.length]!,
        idempotencyKey: eventKey,
        gatewayId: 'sample-gateway',
      },
      record,
    };
  });
}
