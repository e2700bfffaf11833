// Model price table: USD per million tokens of each kind (input, cache reads, cache
// writes, output, reasoning), per provider. The
// versioned file in data/ is the default; PRICE_TABLE_FILE adds or overrides entries.
import fs from 'node:fs';
import type { Price } from '@otm/shared/price';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export type { Price } from '@otm/shared/price';

/** The token counts of a record as stored: the detail is part of input and output (docs/tokens.md). */
export interface TokenCounts {
  input: number;
  output: number;
  cachedInput: number | null;
  cacheWrite: number | null;
  reasoning: number | null;
}

/**
 * USD for one call: each part of input and output at its own price. Detail larger
 * than its whole (only a direct producer can send it; the gateway refuses it) is
 * capped at the whole, so a call never costs more than all its tokens at the
 * dearest of its prices.
 */
export function costUsd(price: Price, tokens: TokenCounts): number {
  const cached = Math.min(tokens.cachedInput ?? 0, tokens.input);
  const written = Math.min(tokens.cacheWrite ?? 0, tokens.input - cached);
  const reasoning = Math.min(tokens.reasoning ?? 0, tokens.output);
  const micro =
    (tokens.input - cached - written) * price.input +
    cached * (price.cachedInput ?? price.input) +
    written * (price.cacheWrite ?? price.input) +
    (tokens.output - reasoning) * price.output +
    reasoning * (price.reasoning ?? price.output);
  return micro / 1_000_000;
}

export interface PriceTableFile {
  version: string;
  providers: Record<string, Record<string, Price>>;
}

export const defaultPriceFile = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../data/model-prices.json');

export class PriceTable {
  private readonly byProvider = new Map<string, [string, Price][]>();

  constructor(
    readonly version: string,
    providers: Record<string, Record<string, Price>>,
  ) {
    for (const [provider, models] of Object.entries(providers)) {
      // Longest prefix first, so gpt-4o-mini is not priced as gpt-4o.
      const entries = Object.entries(models).map(([model, price]) => [model.toLowerCase(), price] as [string, Price]);
      entries.sort((a, b) => b[0].length - a[0].length);
      this.byProvider.set(provider.toLowerCase(), entries);
    }
  }

  static load(overrideFile?: string): PriceTable {
    const base = JSON.parse(fs.readFileSync(defaultPriceFile, 'utf8')) as PriceTableFile;
    if (!overrideFile) return new PriceTable(base.version, base.providers);
    const override = JSON.parse(fs.readFileSync(overrideFile, 'utf8')) as PriceTableFile;
    const merged: Record<string, Record<string, Price>> = structuredClone(base.providers);
    for (const [provider, models] of Object.entries(override.providers ?? {})) {
      merged[provider] = { ...(merged[provider] ?? {}), ...models };
    }
    return new PriceTable(`${base.version}+${override.version ?? 'override'}`, merged);
  }

  find(provider: string, modelId: string): Price | undefined {
    const entries = this.byProvider.get(provider.toLowerCase());
    if (!entries) return undefined;
    const model = modelId.toLowerCase();
    for (const [prefix, price] of entries) {
      if (model === prefix || model.startsWith(`${prefix}-`) || model.startsWith(`${prefix}@`) || model.startsWith(`${prefix}:`))
        return price;
    }
    return undefined;
  }
}
