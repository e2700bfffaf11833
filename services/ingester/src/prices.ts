// The price book: what a (provider, model id) costs, and since when. Prices come from
// the maintained price database @pydantic/genai-prices (its data ships inside the
// package: no network), and PRICE_TABLE_FILE adds or overrides models (negotiated
// prices); an override wins over the database. docs/pricing.md says how ids match.
//
// The database's own calcPrice() costs 25–90 µs a call (it matches the model and splits
// the usage anew each time), so a (provider, model) is resolved once, its prices turned
// into a schedule (@otm/shared/price) and kept; the cost of a record is then a few
// multiplications. The test beside this file checks the result against calcPrice().
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { LRUCache } from 'lru-cache';
import { calcPrice, findProvider, type ConditionalPrice, type ModelInfo, type ModelPrice } from '@pydantic/genai-prices';
import type { Price, PriceLookup, PriceSchedule, PriceWhen, Rate } from '@otm/shared/price';

export { costUsd, priceAt, pricesTokens, type Price, type PriceSchedule, type TokenCounts } from '@otm/shared/price';

/** The version of the price database this build carries (names the prices in `price_table_version`). */
export const DATABASE_VERSION: string = (() => {
  // The package exports no package.json: read it beside the entry point (dist/).
  const entry = createRequire(import.meta.url).resolve('@pydantic/genai-prices');
  const manifest = JSON.parse(fs.readFileSync(path.join(path.dirname(entry), '..', 'package.json'), 'utf8')) as { version: string };
  return manifest.version;
})();

/**
 * Provider names as producers send them (the SDKs' and the OpenTelemetry GenAI
 * conventions' `gen_ai.provider.name` / `gen_ai.system`) → the database's provider ids.
 * A name not listed is looked up in the database as sent (its ids and its own patterns).
 */
export const PROVIDER_ALIASES: Readonly<Record<string, string>> = {
  openai: 'openai',
  azure: 'azure',
  azure_openai: 'azure',
  'azure-openai': 'azure',
  'azure.ai.openai': 'azure',
  'az.ai.openai': 'azure',
  'azure.ai.inference': 'azure',
  'az.ai.inference': 'azure',
  aws: 'aws',
  bedrock: 'aws',
  'aws.bedrock': 'aws',
  aws_bedrock: 'aws',
  'amazon-bedrock': 'aws',
  google: 'google',
  gemini: 'google',
  vertex: 'google',
  vertex_ai: 'google',
  vertexai: 'google',
  'google-vertex': 'google',
  'google-gla': 'google',
  google_genai: 'google',
  'gcp.gemini': 'google',
  'gcp.vertex_ai': 'google',
  'gcp.gen_ai': 'google',
  anthropic: 'anthropic',
  mistral: 'mistral',
  mistral_ai: 'mistral',
  mistralai: 'mistral',
  deepseek: 'deepseek',
  xai: 'x-ai',
  'x-ai': 'x-ai',
  x_ai: 'x-ai',
  groq: 'groq',
  together: 'together',
  together_ai: 'together',
  'together-ai': 'together',
  togetherai: 'together',
  fireworks: 'fireworks',
  fireworks_ai: 'fireworks',
  'fireworks-ai': 'fireworks',
  openrouter: 'openrouter',
  cohere: 'cohere',
  perplexity: 'perplexity',
};

/** A model's price in an override file: the rates, and optionally since when (a date or RFC 3339 instant). */
export type OverridePrice = Price & { from?: string };

export interface PriceOverrideFile {
  version?: string;
  /** provider (as sent, or a database id) → model id or id prefix → a price, or prices with start dates. */
  providers: Record<string, Record<string, OverridePrice | OverridePrice[]>>;
}

/** The database's price keys this project's records can use (USD per million tokens; requests per thousand). */
const DATABASE_KEYS: Record<string, keyof Price> = {
  input_mtok: 'input',
  output_mtok: 'output',
  cache_read_mtok: 'cachedInput',
  cache_write_mtok: 'cacheWrite',
  output_reasoning_mtok: 'reasoning',
};

function databaseRate(value: ModelPrice[string]): Rate | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number') return value;
  return { base: value.base, tiers: [...value.tiers].sort((a, b) => a.start - b.start) };
}

function databasePrice(prices: ModelPrice): Price {
  const price: Price = {};
  for (const [key, field] of Object.entries(DATABASE_KEYS)) {
    const rate = databaseRate(prices[key]);
    if (rate !== undefined) (price as Record<string, Rate>)[field] = rate;
  }
  const perThousand = prices.requests_kcount;
  if (typeof perThousand === 'number') price.request = perThousand / 1000;
  return price;
}

/** `HH:MM:SS[.fff](Z|±HH:MM)` → second of the UTC day. */
function secondOfDay(text: string): number {
  const match = /^(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(Z|([+-])(\d{2}):(\d{2}))$/.exec(text);
  if (!match) throw new Error(`unreadable time of day in the price database: ${text}`);
  const [, hours, minutes, seconds, zone, sign, zoneHours, zoneMinutes] = match;
  const offset = zone === 'Z' ? 0 : (sign === '+' ? 1 : -1) * (Number(zoneHours) * 3600 + Number(zoneMinutes) * 60);
  return (Number(hours) * 3600 + Number(minutes) * 60 + Number(seconds) - offset + 86_400) % 86_400;
}

function databaseWhen(constraint: ConditionalPrice['constraint']): PriceWhen {
  if (constraint === undefined) return { kind: 'always' };
  if (constraint.type === 'start_date') return { kind: 'from', fromS: Date.parse(`${constraint.start_date}T00:00:00Z`) / 1000 };
  return { kind: 'daily', fromSecondOfDay: secondOfDay(constraint.start_time), untilSecondOfDay: secondOfDay(constraint.end_time) };
}

function databaseSchedule(provider: string, model: ModelInfo): PriceSchedule {
  const entries = Array.isArray(model.prices)
    ? model.prices.map((entry) => ({ when: databaseWhen(entry.constraint), price: databasePrice(entry.prices) }))
    : [{ when: { kind: 'always' } as PriceWhen, price: databasePrice(model.prices) }];
  return { source: 'genai-prices', provider, model: model.id, entries };
}

/** The database's schedule for a model id under a provider as sent, or undefined. */
function fromDatabase(provider: string, modelId: string): PriceSchedule | undefined {
  const providerId = PROVIDER_ALIASES[provider] ?? provider;
  if (!findProvider({ providerId })) return undefined;
  // calcPrice with no usage resolves the model as the database does (its match rules, dated
  // ids, fallback providers) without pricing anything.
  let found: ReturnType<typeof calcPrice>;
  try {
    found = calcPrice({}, modelId, { providerId });
  } catch {
    return undefined;
  }
  return found ? databaseSchedule(found.provider.id, found.model) : undefined;
}

const startOf = (when: PriceWhen) => (when.kind === 'from' ? when.fromS : Number.MIN_SAFE_INTEGER);

function overrideSchedule(provider: string, model: string, value: OverridePrice | OverridePrice[]): PriceSchedule {
  const list = Array.isArray(value) ? value : [value];
  const entries = list
    .map(({ from, ...price }) => {
      if (from === undefined) return { when: { kind: 'always' } as PriceWhen, price };
      const at = Date.parse(/^\d{4}-\d{2}-\d{2}$/.test(from) ? `${from}T00:00:00Z` : from);
      if (Number.isNaN(at)) throw new Error(`price override ${provider}/${model}: "from" is not a date: ${from}`);
      return { when: { kind: 'from', fromS: Math.floor(at / 1000) } as PriceWhen, price };
    })
    // Undated first, then by start: the last in force wins (priceAt).
    .sort((a, b) => startOf(a.when) - startOf(b.when));
  return { source: 'override', provider, model, entries };
}

/**
 * An override's key names a model id and its snapshots: the id itself, the id followed
 * by `-` and a digit (`gpt-4o-2024-08-06`), or by `@` or `:` (`claude-sonnet-4@20250514`,
 * `...-v2:0`); `gpt-4o` is not `gpt-4o-mini`. A key ending in `*` is a plain prefix.
 */
function overrideMatches(key: string, model: string): boolean {
  if (key.endsWith('*')) return model.startsWith(key.slice(0, -1));
  if (!model.startsWith(key)) return false;
  if (model.length === key.length) return true;
  const next = model[key.length];
  return next === '@' || next === ':' || (next === '-' && /\d/.test(model[key.length + 1] ?? ''));
}

/** Cached look-ups kept at most, the least recently used let go first (a producer sending endless ids cannot grow it). */
const CACHE_LIMIT = 10_000;
/** A model neither the overrides nor the database price, as the cache holds it (it holds no null). */
const UNPRICED = 'unpriced';

export class PriceTable implements PriceLookup {
  private readonly overrides = new Map<string, PriceSchedule[]>();
  private readonly cache = new LRUCache<string, PriceSchedule | typeof UNPRICED>({ max: CACHE_LIMIT });

  /**
   * `overrides`: provider → model id or prefix → price(s); `database`: whether models
   * the overrides do not name are looked up in the price database.
   */
  constructor(
    readonly version: string,
    overrides: PriceOverrideFile['providers'] = {},
    private readonly database = true,
  ) {
    for (const [provider, models] of Object.entries(overrides)) {
      const schedules = Object.entries(models).map(([model, value]) => overrideSchedule(provider, model.toLowerCase(), value));
      // Longest key first: the most specific override wins.
      schedules.sort((a, b) => b.model.length - a.model.length);
      this.overrides.set(provider.toLowerCase(), schedules);
    }
  }

  /** The database, plus the overrides of `overrideFile` when given. */
  static load(overrideFile?: string): PriceTable {
    const base = `genai-prices@${DATABASE_VERSION}`;
    if (!overrideFile) return new PriceTable(base);
    const file = JSON.parse(fs.readFileSync(overrideFile, 'utf8')) as PriceOverrideFile;
    return new PriceTable(`${base}+${file.version ?? 'override'}`, file.providers ?? {});
  }

  private override(provider: string, model: string): PriceSchedule | undefined {
    const schedules = this.overrides.get(provider) ?? this.overrides.get(PROVIDER_ALIASES[provider] ?? provider);
    return schedules?.find((schedule) => overrideMatches(schedule.model, model));
  }

  /** The schedule that prices `modelId` under `provider`: an override, else the database's; undefined when neither has it. */
  find(provider: string, modelId: string): PriceSchedule | undefined {
    const key = `${provider}\u0000${modelId}`;
    const cached = this.cache.get(key);
    if (cached !== undefined) return cached === UNPRICED ? undefined : cached;
    const sentProvider = provider.trim().toLowerCase();
    const model = modelId.trim().toLowerCase();
    const found = this.override(sentProvider, model) ?? (this.database ? fromDatabase(sentProvider, model) : undefined);
    this.cache.set(key, found ?? UNPRICED);
    return found;
  }
}
