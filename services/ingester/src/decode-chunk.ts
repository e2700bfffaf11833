// Taking a chunk: each record of one partition's chunk decoded (decode-step.ts),
// routed (the freshness canary's records become canary_probes rows), enriched
// (enrich-step.ts) and encoded (encode-step.ts), or given its dead-letter outcome.
// CPU only, but the registry may need asking for a schema seen the first time.
import type { IncomingRecord } from '@otm/shared/kafka';
import type { Logger } from '@otm/shared/logger';
import type { PlausibleBounds } from '@otm/schemas';
import { probeRow } from './canary.js';
import { held, settle, type DecodedChunk, type HeldRecord } from './chunk.js';
import { encodeRow } from './encode-step.js';
import { enrich } from './enrich-step.js';
import type { IngesterMetrics } from './metrics.js';
import { deadLetter } from './outcome.js';
import type { RecordDecoder } from './ports.js';
import type { PriceTable } from './prices.js';
import { retrying } from './retry.js';

/** What taking a chunk uses. */
export interface DecodeContext {
  deps: {
    decoder: RecordDecoder;
    prices: PriceTable;
    plausible?: PlausibleBounds;
    metrics: Pick<IngesterMetrics, 'retries'>;
    logger: Logger;
  };
  options: { retryInitialMs: number; retryMaxMs: number };
  /** The freshness canary's API key id, when known: its records are probes. */
  canaryKeyId: string | undefined;
}

/** Decodes and enriches one chunk; throws Abandoned (retry.ts) when it is given up while the registry is away. */
export async function decodeChunk(
  where: { topic: string; partition: number; alive: () => boolean; heartbeat: () => Promise<void>; bytes: number },
  messages: readonly IncomingRecord[],
  context: DecodeContext,
): Promise<DecodedChunk> {
  const { decoder, prices, plausible } = context.deps;
  let oldestMs = Infinity;
  for (const message of messages) oldestMs = Math.min(oldestMs, Number(message.timestamp));
  // Each record is held as held() makes it once decoded: nothing of the fetched batch
  // stays with the chunk while it waits for its unit.
  const heldMessages: HeldRecord[] = [];
  const chunk: DecodedChunk = { ...where, messages: heldMessages, rows: messages.length, items: [], probes: [], outcomes: [], oldestMs };
  for (const [index, message] of messages.entries()) {
    const decoded =
      decoder.decodeKnown?.(message.value) ??
      (await retrying(context, 'schema registry', () => decoder.decode(message.value), where.alive, where.heartbeat));
    if (decoded.kind === 'deadLetter') {
      heldMessages.push(held(message, true));
      settle(chunk, index, decoded);
      continue;
    }
    if (context.canaryKeyId !== undefined && decoded.value.meta.apiKeyId === context.canaryKeyId) {
      heldMessages.push(held(message, false));
      chunk.probes.push(probeRow(decoded.value));
      settle(chunk, index, { kind: 'probe' });
      continue;
    }
    // enrich is total by design (a value it cannot use becomes null and an anomaly);
    // this guard makes sure a record it still cannot handle is a dead letter, never a
    // throw out of the consumer loop.
    try {
      const row = encodeRow(enrich(decoded.value, prices, Date.now(), message.value, plausible));
      const kept = held(message, false);
      heldMessages.push(kept);
      chunk.items.push({ message: kept, index, row, chunk });
    } catch (error) {
      heldMessages.push(held(message, true));
      settle(chunk, index, deadLetter('enrich_failed', { detail: (error as Error).message }));
    }
  }
  return chunk;
}
