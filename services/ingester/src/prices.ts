// Model price table: USD per million input and output tokens, per provider. The
// versioned file in data/ is the default; PRICE_TABLE_FILE adds or overrides entries.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Price {
  input: number;
  output: number;
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
