import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { QueuedUsageRecord, UsageRecord } from '@otm/schemas';
import { enrich, latencyDisagrees, recordDigest } from './enrich-step.js';
import { PriceTable } from './prices.js';
import { formatDateTime } from '@otm/shared/clickhouse-values';
import { decodeWire, encodeWire } from '@otm/shared/registry';
import { sampleUsageRecords, seededRandom } from '../../../test/fixtures/sample-records.js';

// Overrides alone (no price database): the prices these tests expect stay put.
const prices = new PriceTable(
  'test-1',
  { openai: { 'gpt-4o': { input: 2.5, output: 10 }, 'gpt-4o-mini': { input: 0.15, output: 0.6 } } },
  false,
);

function queued(record: UsageRecord): QueuedUsageRecord {
  return {
    meta: {
      requestId: 'r1',
      eventKey: 'key_1:abc',
      receivedAt: '2026-11-22T12:00:00.123Z',
      apiKeyId: 'key_1',
      environment: 'prod',
      idempotencyKey: 'abc',
      gatewayId: 'gw',
    },
    record,
  };
}

const base: UsageRecord = {
  request: { modelId: 'gpt-4o-2024-08-06', status: 'success', provider: 'OpenAI' },
  user: { id: 'u1', type: 'external' },
  tokens: { input: 1000, output: 500 },
  timing: { startTime: '2026-11-22T10:00:00Z', firstTokenTime: '2026-11-22T10:00:00.250Z', lastTokenTime: '2026-11-22T10:00:02.250Z' },
  io: { prompt: 'p' },
};

describe('enrich', () => {
  it('derives total, latency, ttft, tokens/s and cost without touching what was sent', () => {
    const record = structuredClone(base);
    const { event, io } = enrich(queued(record), prices, Date.UTC(2026, 10, 22, 12, 0, 1));
    expect(record).toEqual(base);
    expect(event).toMatchObject({
      sent_total_tokens: null,
      total_tokens: 1500,
      sent_latency_ms: null,
      latency_ms: 2250,
      ttft_ms: 250,
      output_tokens_per_sec: 250,
      price_known: 1,
      event_time: '2026-11-22 10:00:00',
      event_date: '2026-11-22',
      received_at: '2026-11-22 12:00:00',
      received_at_ms: Date.parse('2026-11-22T12:00:00.123Z'),
      ingested_at: '2026-11-22 12:00:01',
      flag_out_of_order: 0,
      flag_total_mismatch: 0,
      flag_latency_mismatch: 0,
    });
    expect(event.cost_usd).toBeCloseTo((1000 * 2.5 + 500 * 10) / 1e6, 15);
    expect(io).toEqual({
      event_key: 'key_1:abc',
      event_date: '2026-11-22',
      prompt: 'p',
      response: null,
      ingested_at: '2026-11-22 12:00:01',
    });
  });

  it('prices the longest matching model prefix, case-insensitively; unknown models cost null', () => {
    const mini = structuredClone(base);
    mini.request.modelId = 'gpt-4o-mini-2024-07-18';
    expect(enrich(queued(mini), prices).event.cost_usd).toBeCloseTo((1000 * 0.15 + 500 * 0.6) / 1e6, 15);
    const unknown = structuredClone(base);
    unknown.request.modelId = 'gpt-4oz';
    expect(enrich(queued(unknown), prices).event).toMatchObject({ cost_usd: null, price_known: 0 });
  });

  it('flags out-of-order timestamps, a total that is not the sum, and a latency far from the timestamps', () => {
    const odd = structuredClone(base);
    odd.tokens = { input: 1, output: 2, total: 4 };
    odd.timing = {
      startTime: '2026-11-22T10:00:05Z',
      firstTokenTime: '2026-11-22T10:00:04Z',
      lastTokenTime: '2026-11-22T10:00:06Z',
      latencyMs: 5000,
    };
    const { event } = enrich(queued(odd), prices);
    expect(event).toMatchObject({
      flag_out_of_order: 1,
      flag_total_mismatch: 1,
      flag_latency_mismatch: 1,
      total_tokens: 4,
      latency_ms: 5000,
      ttft_ms: null,
    });
  });

  it('an error record without tokens or timing has zero tokens, no latency, no cost, and is bucketed at receive time', () => {
    const { event, io } = enrich(
      queued({
        request: { modelId: 'gpt-4o', status: 'error', provider: 'openai' },
        user: { id: 'u', type: 'internal' },
        error: { code: 'c', message: 'm', stack: 's' },
      }),
      prices,
    );
    expect(event).toMatchObject({
      total_tokens: 0,
      input_tokens: null,
      latency_ms: null,
      cost_usd: null,
      error_stack: 's',
      event_time: '2026-11-22 12:00:00',
    });
    expect(io).toBeNull();
  });

  it('latency tolerance: 100 ms plus 5%', () => {
    expect(latencyDisagrees(2100, 2000)).toBe(false);
    expect(latencyDisagrees(2300, 2000)).toBe(true);
    expect(latencyDisagrees(0, 150)).toBe(true);
  });
});

describe('formatDateTime', () => {
  it('gives the UTC text of the second, from its cache as without it', () => {
    const reference = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString().slice(0, 19).replace('T', ' ');
    const random = seededRandom(7);
    const times = [0, 999, 1000, 1_795_000_000_999, 1_795_000_001_000, 951_782_400_000, -1, -1001];
    for (let i = 0; i < 10_000; i++) times.push(Math.floor(1_700_000_000_000 + random() * 200_000_000_000));
    // Twice over: the second pass answers from the cache, and past its 4,096 entries.
    for (const ms of [...times, ...times]) expect(formatDateTime(ms)).toBe(reference(ms));
    expect(formatDateTime(Date.parse('2026-11-22T23:59:59.999Z'))).toBe('2026-11-22 23:59:59');
  });
});

describe('plausible values (a record that did not come through the gateway)', () => {
  const bounds = { maxTokens: 1_000, maxCallMs: 60_000, maxOutputTokensPerSec: 10_000 };

  it('stores a value past its bound as null, named in anomalies, and derives nothing from it', () => {
    const record = structuredClone(base);
    record.tokens = { input: 1_001, output: 500, total: 2_001, reasoning: 1_001 };
    record.timing = {
      startTime: '2026-11-22T10:00:00Z',
      firstTokenTime: '2026-11-22T10:00:00.250Z',
      lastTokenTime: '2026-11-22T10:01:00.001Z',
      latencyMs: 60_001,
    };
    const { event } = enrich(queued(record), prices, Date.now(), null, bounds);
    expect(event).toMatchObject({
      input_tokens: null,
      output_tokens: 500,
      sent_total_tokens: null,
      reasoning_tokens: null,
      total_tokens: 500,
      sent_latency_ms: null,
      first_token_time_ms: Date.parse('2026-11-22T10:00:00.250Z'),
      last_token_time_ms: null,
      latency_ms: null,
      ttft_ms: 250,
      output_tokens_per_sec: null,
      cost_usd: null,
    });
    expect(event.anomalies).toEqual([
      'timing.lastTokenTime:implausible',
      'tokens.input:implausible',
      'tokens.total:implausible',
      'tokens.reasoning:implausible',
      'timing.latencyMs:implausible',
    ]);
  });

  it('keeps every value at its bound; a derived rate past its bound is nulled, the record kept', () => {
    const atBounds = structuredClone(base);
    atBounds.tokens = { input: 1_000, output: 1_000, total: 2_000 };
    atBounds.timing = {
      startTime: '2026-11-22T10:00:00Z',
      firstTokenTime: '2026-11-22T10:00:59.900Z',
      lastTokenTime: '2026-11-22T10:01:00Z',
      latencyMs: 60_000,
    };
    const { event } = enrich(queued(atBounds), prices, Date.now(), null, bounds);
    expect(event).toMatchObject({
      input_tokens: 1_000,
      output_tokens: 1_000,
      sent_total_tokens: 2_000,
      latency_ms: 60_000,
      ttft_ms: 59_900,
    });
    // 1,000 tokens in 100 ms: 10,000 per second, at the bound.
    expect(event.output_tokens_per_sec).toBeCloseTo(10_000, 6);
    expect(event.anomalies).toEqual([]);
    atBounds.timing.firstTokenTime = '2026-11-22T10:00:59.901Z';
    const past = enrich(queued(atBounds), prices, Date.now(), null, bounds).event;
    expect(past).toMatchObject({ output_tokens_per_sec: null, input_tokens: 1_000, anomalies: ['output_tokens_per_sec:implausible'] });
  });
});

describe('cost with token detail (schema v2), by the price database', () => {
  // Hand-computed from each provider's published rules (as the database holds them),
  // USD per million tokens: OpenAI bills cache reads at its cached-input price, cache
  // writes at the input price, reasoning as output; Anthropic bills cache writes 1.25x
  // and reads 0.1x the input price; Google bills cache reads at 0.1x, thinking as output.
  const shipped = PriceTable.load();
  const costOf = (provider: string, modelId: string, tokens: UsageRecord['tokens']) =>
    enrich(queued({ ...structuredClone(base), request: { modelId, provider, status: 'success' }, tokens }), shipped).event;

  it('OpenAI gpt-4o: 10,000 input of which 6,000 cached, 2,000 output of which 500 reasoning', () => {
    // 4,000 x 2.50 + 6,000 x 1.25 + 2,000 x 10 = 37,500 micro-dollars
    const event = costOf('openai', 'gpt-4o-2024-08-06', { input: 10_000, output: 2_000, cachedInput: 6_000, reasoning: 500 });
    expect(event.cost_usd).toBeCloseTo(0.0375, 12);
    expect(event).toMatchObject({ cached_input_tokens: 6_000, cache_write_tokens: null, reasoning_tokens: 500, anomalies: [] });
  });

  it('Anthropic claude-sonnet-4: 1,000 uncached + 20,000 cache writes + 50,000 cache reads in, 800 out', () => {
    // Anthropic reports the three apart; the record's input is their sum (71,000).
    // 1,000 x 3 + 50,000 x 0.30 + 20,000 x 3.75 + 800 x 15 = 105,000 micro-dollars
    const event = costOf('anthropic', 'claude-sonnet-4-20250514', { input: 71_000, output: 800, cachedInput: 50_000, cacheWrite: 20_000 });
    expect(event.cost_usd).toBeCloseTo(0.105, 12);
  });

  it('Google gemini-2.5-pro: 100,000 prompt of which 80,000 cached, 1,000 candidates + 3,000 thoughts', () => {
    // 20,000 x 1.25 + 80,000 x 0.125 (cache reads, 90 % off) + 4,000 x 10 = 75,000 micro-dollars
    const event = costOf('google', 'gemini-2.5-pro', { input: 100_000, output: 4_000, cachedInput: 80_000, reasoning: 3_000 });
    expect(event.cost_usd).toBeCloseTo(0.075, 12);
  });

  it('a v1 record (no detail) costs input and output at their prices, as before', () => {
    const event = costOf('anthropic', 'claude-sonnet-4', { input: 71_000, output: 800 });
    expect(event.cost_usd).toBeCloseTo((71_000 * 3 + 800 * 15) / 1e6, 12);
    expect(event).toMatchObject({ cached_input_tokens: null, cache_write_tokens: null, reasoning_tokens: null });
  });

  it('detail larger than its whole (a direct producer) is stored as sent, named, and capped in the cost', () => {
    const event = costOf('openai', 'gpt-4o', { input: 100, output: 10, cachedInput: 150, reasoning: 20 });
    expect(event.anomalies).toEqual(['tokens.cachedInput:exceeds_input', 'tokens.reasoning:exceeds_output']);
    expect(event.cached_input_tokens).toBe(150);
    // Capped: all 100 input tokens as cached, all 10 output as reasoning (output price).
    expect(event.cost_usd).toBeCloseTo((100 * 1.25 + 10 * 10) / 1e6, 12);
  });
});

describe('recordDigest', () => {
  const sha1 = (text: string | Buffer) => createHash('sha1').update(text).digest('base64url');
  /** A message as a gateway writes it (record-intake.ts, queuedJson), in the wire format. */
  const gatewayMessage = (queuedRecord: QueuedUsageRecord, recordText = JSON.stringify(queuedRecord.record)) =>
    encodeWire(7, `{"meta":${JSON.stringify(queuedRecord.meta)},"record":${recordText}}`);
  const decoded = (wire: Buffer) => {
    const read = decodeWire(wire);
    if (!read.ok) throw new Error(read.reason);
    return JSON.parse(read.json) as QueuedUsageRecord;
  };

  it('is SHA-1 of the record serialised again, read from a gateway message without serialising it', () => {
    const odd: UsageRecord = {
      ...structuredClone(base),
      user: { id: 'ünïcødé 😀 \u2028 "quoted" \\ back', type: 'external', name: 'lone \ud800 surrogate' },
      // Integer-like keys (an object orders them first), an own __proto__ member, numbers JSON writes in another form.
      context: JSON.parse(
        '{"b":{"y":[1,"x"],"a":null},"10":"ten","2":"two","__proto__":"own member","big":1e21,"small":0.10,"negative":-0}',
      ),
      io: { prompt: 'tab\tnewline\n control \u0001', response: 'ok' },
    } as UsageRecord;
    const records = [...sampleUsageRecords(200, { seed: 5 }), odd].map((record, index) => ({
      ...queued(record),
      meta: { ...queued(record).meta, requestId: `r${index}`, capture: { policy: 'full' as const } },
    }));
    for (const queuedRecord of records) {
      const wire = gatewayMessage(queuedRecord);
      const message = decoded(wire);
      expect(recordDigest(message, wire)).toBe(sha1(JSON.stringify(message.record)));
      expect(enrich(message, prices, Date.now(), wire).digest).toBe(enrich(message, prices).digest);
    }
  });

  it('reads the record text from the message when it has the gateway layout', () => {
    // The same record, written with an escape JSON.stringify would not write: the digest is of the text as queued.
    const record = { ...structuredClone(base), user: { id: 'A', type: 'external' } } as UsageRecord;
    const text = JSON.stringify(record).replace('"id":"A"', '"id":"\\u0041"');
    const wire = gatewayMessage(queued(record), text);
    const message = decoded(wire);
    expect(message.record.user.id).toBe('A');
    expect(recordDigest(message, wire)).toBe(sha1(text));
    expect(recordDigest(message, wire)).not.toBe(sha1(JSON.stringify(message.record)));
  });

  it('serialises the record again for a message laid out otherwise, not valid UTF-8, or without a message', () => {
    const queuedRecord = queued(structuredClone(base));
    const again = sha1(JSON.stringify(queuedRecord.record));
    // Another producer's spacing, and the members in the other order.
    expect(recordDigest(queuedRecord, encodeWire(7, JSON.stringify(queuedRecord, null, 1)))).toBe(again);
    expect(recordDigest(queuedRecord, encodeWire(7, JSON.stringify({ record: queuedRecord.record, meta: queuedRecord.meta })))).toBe(again);
    // Trailing space after the record.
    expect(
      recordDigest(
        queuedRecord,
        encodeWire(7, `{"meta":${JSON.stringify(queuedRecord.meta)},"record":${JSON.stringify(queuedRecord.record)} }`),
      ),
    ).toBe(again);
    // A byte that is not UTF-8 inside the record text.
    const wire = gatewayMessage(queuedRecord);
    const broken = Buffer.from(wire);
    broken[broken.length - 10] = 0xff;
    expect(recordDigest(queuedRecord, broken)).toBe(again);
    expect(recordDigest(queuedRecord, null)).toBe(again);
    expect(recordDigest(queuedRecord)).toBe(again);
  });
});
