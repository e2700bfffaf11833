// A process's CPU per record over a load the SDK generator offered (sdk-load.ts).
import type { SdkLoadResult } from './context.js';

/**
 * A process's CPU per record over a whole SDK load: its CPU is read before the load and
 * after it, so the warm-up is in it, and so must the warm-up's records be.
 */
export function cpuUsPerRecordSent(cpuSecondsSpent: number, load: Pick<SdkLoadResult, 'sentTotal'>): number {
  return (cpuSecondsSpent * 1e6) / Math.max(1, load.sentTotal);
}
