// otm_gateway_records_total, counted in one place for the three ingest routes (single,
// batch, OTLP) from what the intake answered each record: so a record counts the same
// whichever route it came by.
//
//   accepted     queued now (answered 202, or 200 for an OTLP span)
//   replayed     a record accepted before, answered again from the replay memory; not queued twice
//   refused      refused for what it holds (400, 422; an OTLP span in partial_success)
//   unavailable  valid, but the queue did not take it (503: the client retries)
//
// A request refused as a whole before any record is read (authentication, an unreadable
// or oversized body, a malformed Idempotency-Key, too many items) counts no record; the
// edge counts it in otm_gateway_requests_total.
import type { ItemResult } from './intake.js';
import type { GatewayMetrics } from './metrics.js';

export type IngestRoute = 'single' | 'batch' | 'otlp';

export interface RecordTally {
  accepted: number;
  replayed: number;
  refused: number;
  unavailable: number;
}

/** What the intake answered each record, summed; `refusedBefore`: records refused before the intake (an OTLP span that maps to no record). */
export function tallyResults(results: readonly ItemResult[], refusedBefore = 0): RecordTally {
  const tally: RecordTally = { accepted: 0, replayed: 0, refused: refusedBefore, unavailable: 0 };
  for (const result of results) {
    if (result.kind === 'accepted') tally[result.replay ? 'replayed' : 'accepted']++;
    else tally[result.kind]++;
  }
  return tally;
}

export function countRecords(metrics: Pick<GatewayMetrics, 'records'>, route: IngestRoute, tally: RecordTally): void {
  for (const outcome of ['accepted', 'replayed', 'refused', 'unavailable'] as const) {
    if (tally[outcome] > 0) metrics.records.inc({ route, outcome }, tally[outcome]);
  }
}
