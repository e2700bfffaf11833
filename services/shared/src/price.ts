// A model's prices over time, and the cost of one call under them: computed here in
// JavaScript (the ingester, per record) and as ClickHouse SQL (re-costing stored rows,
// rollups/recost.ts), in the same order of operations, so both give the same cost.
// The ingester's price book (services/ingester/src/prices.ts) turns the price
// database's entries and the operator's overrides into these schedules (docs/pricing.md).

/** USD per million tokens: flat, or by the call's input tokens (a tier applies when input > start). */
export type Rate = number | { base: number; tiers: readonly { start: number; price: number }[] };

/** The rates in force for a model; a kind of token without its own rate is billed at its whole's. */
export interface Price {
  /** Input tokens not read from or written to a prompt cache (all input when the cache rates are absent). */
  input?: Rate;
  output?: Rate;
  /** Input tokens read from the provider's prompt cache; the input rate when absent. */
  cachedInput?: Rate;
  /** Input tokens written to the provider's prompt cache; the input rate when absent. */
  cacheWrite?: Rate;
  /** Reasoning tokens; the output rate when absent. */
  reasoning?: Rate;
  /** USD per request, whatever its tokens. */
  request?: number;
}

/** When an entry of a schedule is in force: always, from an instant on, or daily between two UTC times of day. */
export type PriceWhen =
  { kind: 'always' } | { kind: 'from'; fromS: number } | { kind: 'daily'; fromSecondOfDay: number; untilSecondOfDay: number };

/**
 * A model's prices over time. The entry in force at an instant is the last one whose
 * `when` holds (the price database's rule), else the first.
 */
export interface PriceSchedule {
  /** Where the prices come from: `override` or the database (`genai-prices`). */
  source: string;
  /** The provider and model the prices were found under (what matched). */
  provider: string;
  model: string;
  entries: readonly { when: PriceWhen; price: Price }[];
}

/** The token counts of a record as stored: the detail is part of input and output (docs/tokens.md). */
export interface TokenCounts {
  input: number;
  output: number;
  cachedInput: number | null;
  cacheWrite: number | null;
  reasoning: number | null;
}

/** What re-costing asks of a price book: its version, and a model's schedule. */
export interface PriceLookup {
  readonly version: string;
  find(provider: string, modelId: string): PriceSchedule | undefined;
}

/** Whether an entry prices tokens at all (a model priced only per image or second is not priced for a record). */
export function pricesTokens(price: Price): boolean {
  return price.input !== undefined || price.output !== undefined;
}

/** The entry of `schedule` in force at `atS` (whole seconds since 1970: the stored event_time). */
export function priceAt(schedule: PriceSchedule, atS: number): Price {
  const { entries } = schedule;
  for (let index = entries.length - 1; index >= 0; index--) {
    const { when, price } = entries[index]!;
    if (when.kind === 'always') return price;
    if (when.kind === 'from') {
      if (atS >= when.fromS) return price;
      continue;
    }
    const second = ((atS % 86_400) + 86_400) % 86_400;
    const wraps = when.untilSecondOfDay < when.fromSecondOfDay;
    const inside = wraps
      ? second >= when.fromSecondOfDay || second < when.untilSecondOfDay
      : second >= when.fromSecondOfDay && second < when.untilSecondOfDay;
    if (inside) return price;
  }
  return entries[0]!.price;
}

function rateFor(rate: Rate, input: number): number {
  if (typeof rate === 'number') return rate;
  let price = rate.base;
  for (const tier of rate.tiers) if (input > tier.start) price = tier.price;
  return price;
}

/**
 * USD for one call at `atS`: each part of input and output at its own rate, tiers
 * chosen by the call's input tokens. Detail larger than its whole (only a direct
 * producer can send it; the gateway refuses it) is capped at the whole, so a call never
 * costs more than all its tokens at the dearest of its rates. Null when the schedule's
 * entry in force prices no tokens.
 */
export function costUsd(schedule: PriceSchedule, tokens: TokenCounts, atS: number): number | null {
  const price = priceAt(schedule, atS);
  if (!pricesTokens(price)) return null;
  const cached = Math.min(tokens.cachedInput ?? 0, tokens.input);
  const written = Math.min(tokens.cacheWrite ?? 0, tokens.input - cached);
  const reasoning = Math.min(tokens.reasoning ?? 0, tokens.output);
  const at = (rate: Rate | undefined) => (rate === undefined ? 0 : rateFor(rate, tokens.input));
  const input = at(price.input);
  const output = at(price.output);
  const micro =
    (tokens.input - cached - written) * input +
    cached * (price.cachedInput === undefined ? input : at(price.cachedInput)) +
    written * (price.cacheWrite === undefined ? input : at(price.cacheWrite)) +
    (tokens.output - reasoning) * output +
    reasoning * (price.reasoning === undefined ? output : at(price.reasoning));
  return micro / 1_000_000 + (price.request ?? 0);
}

/** Columns of usage_events the SQL form reads. */
const INPUT = 'toFloat64(assumeNotNull(input_tokens))';
const OUTPUT = 'toFloat64(assumeNotNull(output_tokens))';
const CACHED = `least(toFloat64(ifNull(cached_input_tokens, 0)), ${INPUT})`;
const WRITTEN = `least(toFloat64(ifNull(cache_write_tokens, 0)), ${INPUT} - ${CACHED})`;
const REASONING = `least(toFloat64(ifNull(reasoning_tokens, 0)), ${OUTPUT})`;
const AT_S = 'toUnixTimestamp(event_time)';

function number(value: number): string {
  if (!Number.isFinite(value)) throw new Error(`not a finite price: ${value}`);
  return `toFloat64(${String(value)})`;
}

function rateSql(rate: Rate): string {
  if (typeof rate === 'number') return number(rate);
  if (rate.tiers.length === 0) return number(rate.base);
  // The last tier whose start the input passes, as rateFor() walks them.
  const arms = [...rate.tiers].reverse().map((tier) => `${INPUT} > ${tier.start}, ${number(tier.price)}`);
  return `multiIf(${arms.join(', ')}, ${number(rate.base)})`;
}

function whenSql(when: PriceWhen): string {
  if (when.kind === 'always') return '1';
  if (when.kind === 'from') return `${AT_S} >= ${when.fromS}`;
  const second = `(${AT_S} % 86400)`;
  return when.untilSecondOfDay < when.fromSecondOfDay
    ? `(${second} >= ${when.fromSecondOfDay} OR ${second} < ${when.untilSecondOfDay})`
    : `(${second} >= ${when.fromSecondOfDay} AND ${second} < ${when.untilSecondOfDay})`;
}

function priceSql(price: Price): string {
  if (!pricesTokens(price)) return 'CAST(NULL AS Nullable(Float64))';
  const input = price.input === undefined ? 'toFloat64(0)' : rateSql(price.input);
  const output = price.output === undefined ? 'toFloat64(0)' : rateSql(price.output);
  const micro = [
    `(${INPUT} - ${CACHED} - ${WRITTEN}) * ${input}`,
    `${CACHED} * ${price.cachedInput === undefined ? input : rateSql(price.cachedInput)}`,
    `${WRITTEN} * ${price.cacheWrite === undefined ? input : rateSql(price.cacheWrite)}`,
    `(${OUTPUT} - ${REASONING}) * ${output}`,
    `${REASONING} * ${price.reasoning === undefined ? output : rateSql(price.reasoning)}`,
  ].join(' + ');
  return `toNullable((${micro}) / 1000000 + ${number(price.request ?? 0)})`;
}

/**
 * The cost of a usage_events row under `schedule`, as ClickHouse SQL (18.16 and current
 * releases): costUsd() over the row's columns at its event_time. Null when tokens are missing.
 */
export function costSql(schedule: PriceSchedule): string {
  const { entries } = schedule;
  const arms = [...entries]
    .map((entry) => [whenSql(entry.when), priceSql(entry.price)] as const)
    .reverse()
    .flatMap(([when, cost]) => [when, cost]);
  const inForce = `multiIf(${arms.join(', ')}, ${priceSql(entries[0]!.price)})`;
  return `if(isNull(input_tokens) OR isNull(output_tokens), CAST(NULL AS Nullable(Float64)), ${inForce})`;
}

/** Whether the entry in force at the row's event_time prices tokens (1) or not (0), as SQL. */
export function knownSql(schedule: PriceSchedule): string {
  const arms = [...schedule.entries]
    .map((entry) => [whenSql(entry.when), pricesTokens(entry.price) ? '1' : '0'] as const)
    .reverse()
    .flatMap(([when, known]) => [when, known]);
  return `multiIf(${arms.join(', ')}, ${pricesTokens(schedule.entries[0]!.price) ? '1' : '0'})`;
}
