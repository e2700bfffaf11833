// The price book against the price database's own calculator (calcPrice of
// @pydantic/genai-prices): what producers send is priced as the database prices it,
// tiers and dated prices included, and overrides win.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { calcPrice, findProvider } from '@pydantic/genai-prices';
import { DATABASE_VERSION, PROVIDER_ALIASES, PriceTable, costUsd, type TokenCounts } from './prices.js';

const book = PriceTable.load();
const seconds = (text: string) => Date.parse(text) / 1000;

/** The database's price for the same call, through its own calculator. */
function databaseCost(providerId: string, modelId: string, tokens: TokenCounts, atS: number): number | null {
  const found = calcPrice(
    {
      input_tokens: tokens.input,
      output_tokens: tokens.output,
      cache_read_tokens: tokens.cachedInput ?? undefined,
      cache_write_tokens: tokens.cacheWrite ?? undefined,
      output_reasoning_tokens: tokens.reasoning ?? undefined,
    },
    modelId,
    { providerId, timestamp: new Date(atS * 1000) },
  );
  return found ? found.total_price : null;
}

const plain: TokenCounts = { input: 1_000, output: 200, cachedInput: null, cacheWrite: null, reasoning: null };
const detailed: TokenCounts = { input: 250_000, output: 1_200, cachedInput: 10_000, cacheWrite: 2_000, reasoning: 300 };
const huge: TokenCounts = { input: 1_500_000, output: 50_000, cachedInput: 1_000_000, cacheWrite: 100_000, reasoning: 40_000 };

/** (provider as sent, model id as sent, the database's provider, the database's model) */
const SENT: [string, string, string, string][] = [
  ['openai', 'gpt-4o', 'openai', 'gpt-4o'],
  ['openai', 'gpt-4o-2024-08-06', 'openai', 'gpt-4o'],
  ['OpenAI', 'gpt-4o-mini', 'openai', 'gpt-4o-mini'],
  ['openai', 'gpt-4.1-nano', 'openai', 'gpt-4.1-nano'],
  ['openai', 'gpt-5', 'openai', 'gpt-5'],
  ['openai', 'gpt-5.1', 'openai', 'gpt-5.1'],
  ['openai', 'o3-mini', 'openai', 'o3-mini'],
  ['openai', 'text-embedding-3-small', 'openai', 'text-embedding-3-small'],
  ['azure', 'gpt-4o', 'azure', 'gpt-4o'],
  ['azure_openai', 'gpt-4o-mini', 'azure', 'gpt-4o-mini'],
  ['az.ai.openai', 'gpt-4.1', 'azure', 'gpt-4.1'],
  ['aws', 'anthropic.claude-3-5-sonnet-20241022-v2:0', 'aws', 'regional.anthropic.claude-3-5-sonnet-20241022-v2:0'],
  ['bedrock', 'amazon.nova-pro-v1:0', 'aws', 'amazon.nova-pro-v1:0'],
  ['aws.bedrock', 'us.anthropic.claude-3-7-sonnet-20250219-v1:0', 'aws', 'regional.anthropic.claude-3-7-sonnet-20250219-v1:0'],
  ['bedrock', 'meta.llama3-1-70b-instruct-v1:0', 'aws', 'meta.llama3-1-70b-instruct-v1:0'],
  ['google', 'gemini-2.5-flash', 'google', 'gemini-2.5-flash'],
  ['google', 'gemini-2.5-flash-lite', 'google', 'gemini-2.5-flash-lite'],
  ['gemini', 'gemini-2.5-pro', 'google', 'gemini-2.5-pro'],
  ['vertex_ai', 'gemini-2.0-flash-001', 'google', 'gemini-2.0-flash'],
  ['google-vertex', 'gemini-1.5-pro-002', 'google', 'gemini-1.5-pro'],
  ['gcp.vertex_ai', 'claude-sonnet-4@20250514', 'google', 'claude-4-sonnet'],
  ['anthropic', 'claude-sonnet-4-20250514', 'anthropic', 'claude-sonnet-4-0'],
  ['anthropic', 'claude-3-5-haiku-20241022', 'anthropic', 'claude-3-5-haiku-latest'],
  ['anthropic', 'claude-opus-4-1-20250805', 'anthropic', 'claude-opus-4-1'],
  ['anthropic', 'claude-sonnet-4-5', 'anthropic', 'claude-sonnet-4-5'],
  ['mistral', 'mistral-large-latest', 'mistral', 'mistral-large'],
  ['mistral_ai', 'mistral-small-latest', 'mistral', 'mistral-small-latest'],
  ['mistral', 'codestral-latest', 'mistral', 'codestral'],
  ['deepseek', 'deepseek-chat', 'deepseek', 'deepseek-chat'],
  ['deepseek', 'deepseek-reasoner', 'deepseek', 'deepseek-reasoner'],
  ['xai', 'grok-4', 'x-ai', 'grok-4-0709'],
  ['x-ai', 'grok-3-mini', 'x-ai', 'grok-3-mini'],
  ['x_ai', 'grok-3', 'x-ai', 'grok-3'],
  ['groq', 'llama-3.3-70b-versatile', 'groq', 'llama-3.3-70b-versatile'],
  ['groq', 'openai/gpt-oss-120b', 'groq', 'openai/gpt-oss-120b'],
  ['together', 'meta-llama/Llama-3.3-70B-Instruct-Turbo', 'together', 'meta-llama/Llama-3.3-70B-Instruct-Turbo'],
  ['fireworks', 'accounts/fireworks/models/llama-v3p1-8b-instruct', 'fireworks', 'llama-v3p1-8b-instruct'],
  ['openrouter', 'openai/gpt-4o', 'openrouter', 'openai/gpt-4o'],
  ['openrouter', 'anthropic/claude-sonnet-4', 'openrouter', 'anthropic/claude-sonnet-4'],
  ['openrouter', 'google/gemini-2.5-flash', 'openrouter', 'google/gemini-2.5-flash'],
  ['cohere', 'command-a-03-2025', 'cohere', 'command-a'],
  ['cohere', 'command-r-plus', 'cohere', 'command-r-plus'],
  ['perplexity', 'sonar-pro', 'perplexity', 'sonar-pro'],
  ['perplexity', 'sonar', 'perplexity', 'sonar'],
];

describe('prices from the price database', () => {
  it(`prices ${SENT.length} (provider, model id) pairs as producers send them as the database does`, () => {
    expect(SENT.length).toBeGreaterThanOrEqual(40);
    const at = seconds('2026-11-20T12:00:00Z');
    for (const [provider, modelId, databaseProvider, databaseModel] of SENT) {
      const schedule = book.find(provider, modelId);
      expect(schedule, `${provider} ${modelId}`).toMatchObject({
        source: 'genai-prices',
        provider: databaseProvider,
        model: databaseModel,
      });
      for (const tokens of [plain, detailed]) {
        const ours = costUsd(schedule!, tokens, at);
        const theirs = databaseCost(databaseProvider, modelId, tokens, at);
        expect(theirs, `${provider} ${modelId}`).not.toBeNull();
        expect(ours, `${provider} ${modelId}`).toBeGreaterThan(0);
        expect(Math.abs(ours! - theirs!), `${provider} ${modelId}: ${ours} vs ${theirs}`).toBeLessThan(1e-12 + 1e-9 * theirs!);
      }
    }
  });

  it('every model of the mapped providers costs what calcPrice says, at every usage shape and date tried', () => {
    const times = ['2024-01-01T03:00:00Z', '2025-06-01T20:00:00Z', '2026-09-02T01:00:00Z', '2026-11-20T12:00:00Z'].map(seconds);
    let compared = 0;
    for (const providerId of new Set(Object.values(PROVIDER_ALIASES))) {
      for (const model of findProvider({ providerId })!.models) {
        const schedule = book.find(providerId, model.id);
        for (const tokens of [plain, detailed, huge])
          for (const at of times) {
            const theirs = databaseCost(providerId, model.id, tokens, at) ?? 0;
            const ours = schedule ? costUsd(schedule, tokens, at) : null;
            // A model the database prices by images, seconds or pages only is unpriced here (cost null, not 0).
            if (ours === null) {
              expect(theirs, `${providerId} ${model.id}`).toBe(0);
              continue;
            }
            expect(Math.abs(ours - theirs), `${providerId} ${model.id} at ${at}: ${ours} vs ${theirs}`).toBeLessThan(1e-12 + 1e-9 * theirs);
            compared++;
          }
      }
    }
    expect(compared).toBeGreaterThan(5_000);
  });

  it('gemini-2.5-flash-lite is not priced as gemini-2.5-flash', () => {
    const at = seconds('2026-11-20T12:00:00Z');
    const lite = book.find('google', 'gemini-2.5-flash-lite')!;
    const flash = book.find('google', 'gemini-2.5-flash')!;
    expect(lite.model).toBe('gemini-2.5-flash-lite');
    expect(costUsd(lite, plain, at)).toBeLessThan(costUsd(flash, plain, at)! / 2);
  });

  it('a request above a long-context threshold is priced at the upper tier', () => {
    const at = seconds('2026-11-20T12:00:00Z');
    const pro = book.find('gemini', 'gemini-2.5-pro')!;
    const small = { ...plain, input: 200_000, output: 1_000 };
    const large = { ...plain, input: 200_001, output: 1_000 };
    // Per token, the call over 200k input tokens costs more: its input and output both move up a tier.
    const perToken = (tokens: TokenCounts) => costUsd(pro, tokens, at)! / (tokens.input + tokens.output);
    expect(perToken(large)).toBeGreaterThan(perToken(small) * 1.5);
    expect(costUsd(pro, large, at)).toBeCloseTo(databaseCost('google', 'gemini-2.5-pro', large, at)!, 12);
  });

  it('a dated price change prices the calls on each side of its start differently', () => {
    // Find a model the database re-priced on a date, and price a call the second before and at it.
    const dated = [...new Set(Object.values(PROVIDER_ALIASES))]
      .flatMap((providerId) => findProvider({ providerId })!.models.map((model) => ({ providerId, model })))
      .find(({ model }) => Array.isArray(model.prices) && model.prices.some((entry) => entry.constraint?.type === 'start_date'));
    expect(dated).toBeDefined();
    const { providerId, model } = dated!;
    const start = (model.prices as { constraint?: { type: string; start_date?: string } }[]).find(
      (entry) => entry.constraint?.type === 'start_date',
    )!.constraint!.start_date!;
    const at = seconds(`${start}T00:00:00Z`);
    const schedule = book.find(providerId, model.id)!;
    const before = costUsd(schedule, detailed, at - 1);
    const after = costUsd(schedule, detailed, at);
    expect(before).not.toBe(after);
    expect(before).toBeCloseTo(databaseCost(providerId, model.id, detailed, at - 1)!, 12);
    expect(after).toBeCloseTo(databaseCost(providerId, model.id, detailed, at)!, 12);
  });

  it('DeepSeek prices by the time of day (its discount hours)', () => {
    const chat = book.find('deepseek', 'deepseek-chat')!;
    const day = costUsd(chat, plain, seconds('2026-11-20T12:00:00Z'));
    const night = costUsd(chat, plain, seconds('2026-11-20T20:00:00Z'));
    expect(night).toBeLessThan(day!);
    expect(night).toBeCloseTo(databaseCost('deepseek', 'deepseek-chat', plain, seconds('2026-11-20T20:00:00Z'))!, 12);
  });

  it('names the database version; unknown providers and models are unpriced', () => {
    expect(book.version).toBe(`genai-prices@${DATABASE_VERSION}`);
    expect(DATABASE_VERSION).toMatch(/^\d+\.\d+\.\d+/);
    expect(book.find('openai', 'gpt-4oz-not-a-model')).toBeUndefined();
    expect(book.find('in-house', 'llama-finetune-7')).toBeUndefined();
  });

  it('keeps the models it looks up often while a producer sends endless unknown ids', () => {
    const table = new PriceTable('test');
    const known = table.find('openai', 'gpt-4o');
    expect(known).toBeDefined();
    // Past the cache's bound the least recently used ids go, not the model asked all along.
    for (let index = 0; index < 25_000; index++) {
      expect(table.find('openai', `made-up-${index}`)).toBeUndefined();
      if (index % 500 === 0) expect(table.find('openai', 'gpt-4o')).toBe(known);
    }
  });

  it('loads its data offline: no fetch is made', async () => {
    vi.resetModules();
    const fetch = vi.fn(() => Promise.reject(new Error('offline')));
    vi.stubGlobal('fetch', fetch);
    try {
      const { PriceTable: Fresh } = await import('./prices.js');
      expect(Fresh.load().find('openai', 'gpt-4o')?.source).toBe('genai-prices');
      expect(fetch).not.toHaveBeenCalled();
    } finally {
      vi.unstubAllGlobals();
    }
  });
});

describe('price overrides (PRICE_TABLE_FILE)', () => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'otm-prices-')), 'overrides.json');
  fs.writeFileSync(
    file,
    JSON.stringify({
      version: 'acme-2026-11',
      providers: {
        openai: { 'gpt-4o': { input: 2, output: 8, cachedInput: 1 } },
        'in-house': {
          'llama-finetune*': [
            { input: 1, output: 2 },
            { from: '2026-12-01', input: 0.5, output: 1 },
          ],
        },
      },
    }),
  );
  const overridden = PriceTable.load(file);

  it('win over the database, match by id prefix, and name themselves in the version', () => {
    expect(overridden.version).toBe(`genai-prices@${DATABASE_VERSION}+acme-2026-11`);
    const schedule = overridden.find('openai', 'gpt-4o-2024-08-06')!;
    expect(schedule).toMatchObject({ source: 'override', model: 'gpt-4o' });
    const tokens = { input: 10_000, output: 1_000, cachedInput: 4_000, cacheWrite: null, reasoning: null };
    expect(costUsd(schedule, tokens, seconds('2026-11-20T00:00:00Z'))).toBeCloseTo((6_000 * 2 + 4_000 * 1 + 1_000 * 8) / 1e6, 15);
    // Models the overrides do not name still come from the database.
    expect(overridden.find('openai', 'gpt-4o-mini')?.source).toBe('genai-prices');
  });

  it('carry start dates: a call is priced at the override in force when it was made', () => {
    const schedule = overridden.find('in-house', 'llama-finetune-v3')!;
    expect(costUsd(schedule, plain, seconds('2026-11-30T23:59:59Z'))).toBeCloseTo((1_000 * 1 + 200 * 2) / 1e6, 15);
    expect(costUsd(schedule, plain, seconds('2026-12-01T00:00:00Z'))).toBeCloseTo((1_000 * 0.5 + 200 * 1) / 1e6, 15);
  });
});

describe('docs/pricing.md', () => {
  it('lists the provider names as the price book maps them', () => {
    const doc = fs.readFileSync(new URL('../../../docs/pricing.md', import.meta.url), 'utf8');
    const documented: Record<string, string> = {};
    for (const [, sent, priced] of doc.matchAll(/^\s*\| (`[^|]+`) +\| `([^`]+)` +\|$/gm)) {
      for (const [, name] of sent!.matchAll(/`([^`]+)`/g)) documented[name!] = priced!;
    }
    expect(documented).toEqual(PROVIDER_ALIASES);
  });
});
