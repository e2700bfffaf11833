// A model's price, as the ingester's price tables hold it (services/ingester/src/prices.ts)
// and re-costing (rollups/recost.ts) applies it to stored rows.

/** USD per million tokens of each kind. */
export interface Price {
  /** Input tokens not read from or written to a prompt cache. */
  input: number;
  output: number;
  /** Input tokens read from the provider's prompt cache; the input price when absent. */
  cachedInput?: number;
  /** Input tokens written to the provider's prompt cache; the input price when absent. */
  cacheWrite?: number;
  /** Reasoning tokens; the output price when absent (every listed provider bills them as output). */
  reasoning?: number;
}

/** What re-costing asks of a price table: its version, and a model's price. */
export interface PriceLookup {
  readonly version: string;
  find(provider: string, modelId: string): Price | undefined;
}
