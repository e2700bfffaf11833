// A process's CPU per record over a load the SDK generator offered (sdk-load.ts).

/** What an SDK load sent: over its measured part, and in all (its warm-up included). */
export interface SentCounts {
  accepted: number;
  sentTotal: number;
}

/**
 * A process's CPU per record over a whole SDK load: its CPU is read before the load and
 * after it, so the warm-up is in it, and so must the warm-up's records be.
 */
export function cpuUsPerRecordSent(cpuSecondsSpent: number, load: SentCounts): number {
  return (cpuSecondsSpent * 1e6) / Math.max(1, load.sentTotal);
}
