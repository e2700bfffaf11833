// An OTLP export's spans through the one intake (intake.ts): each GenAI span becomes an
// intake item keyed by its trace and span ids, the others are counted as ignored, and
// the results become what the OTLP answer reports (accepted, rejected with reasons, or
// the queue unavailable).
import { v7 as uuidv7 } from 'uuid';
import { ServiceError, refuse } from '@otm/shared/errors';
import type { GatewayMetrics } from './metrics.js';
import { OtlpDecodeError, usageFromSpan, type OtlpSpan } from './otlp.js';
import type { IntakeContext } from './record-intake.js';
import { accept, type IntakeDeps, type IntakeItem } from './intake.js';
import { tallyResults, type RecordTally } from './record-count.js';

/** The result of reading the body, an unreadable one refused with 400. */
export function readable<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof OtlpDecodeError) throw refuse('exportUnreadable', { detail: error.message });
    throw error;
  }
}

export interface SpansOutcome {
  accepted: number;
  ignored: number;
  rejected: string[];
  unavailable: boolean;
  /** The GenAI spans as records, counted as every route counts them (record-count.ts). */
  tally: RecordTally;
}

export async function ingestSpans(
  spans: OtlpSpan[],
  context: IntakeContext,
  deps: { batcher: IntakeDeps['batcher']; metrics: GatewayMetrics },
): Promise<SpansOutcome> {
  const outcome: SpansOutcome = { accepted: 0, ignored: 0, rejected: [], unavailable: false, tally: tallyResults([]) };
  // Each GenAI span as an intake item (keyed by its trace and span ids); the others ignored.
  const items: (IntakeItem | ServiceError)[] = [];
  const itemSpans: OtlpSpan[] = [];
  for (const span of spans) {
    const usage = usageFromSpan(span);
    if (usage.kind === 'ignored') {
      outcome.ignored++;
      continue;
    }
    if (usage.kind === 'refused') {
      outcome.rejected.push(usage.reason);
      continue;
    }
    items.push({ record: usage.record, idempotencyKey: usage.idempotencyKey, requestId: uuidv7() });
    itemSpans.push(span);
  }
  const results = await accept(items, context, { batcher: deps.batcher, onReplay: () => deps.metrics.replays.inc() });
  outcome.tally = tallyResults(results, outcome.rejected.length);
  results.forEach((result, index) => {
    if (result.kind === 'accepted') outcome.accepted++;
    else if (result.kind === 'unavailable') outcome.unavailable = true;
    else {
      const { error } = result;
      const detail = error.details.errors?.map((each) => `${each.path} ${each.message}`).join('; ');
      outcome.rejected.push(`span ${itemSpans[index]!.spanId}: ${error.message}${detail ? ` (${detail})` : ''}`);
    }
  });
  return outcome;
}

/** partial_success.error_message: the first reasons, and how many more. */
export function summary(reasons: string[]): string {
  const shown = reasons.slice(0, 5).join(' | ');
  return reasons.length > 5 ? `${shown} | and ${reasons.length - 5} more` : shown;
}
