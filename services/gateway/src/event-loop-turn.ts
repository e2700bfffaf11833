// Long work on the event loop, cut into slices: a request whose work takes longer than
// one slice (a batch of 1,000 large records, an export of 1,000 spans) gives the loop
// back between slices, so the other connections' requests are answered meanwhile.
import { setImmediate as nextTurn } from 'node:timers/promises';

/** Milliseconds of work on the event loop before a request gives it back. */
export const SLICE_MS = 10;

export class EventLoopTurn {
  private startedAt = performance.now();

  constructor(private readonly sliceMs = SLICE_MS) {}

  /** Resolves at once while the slice lasts; after it, on the loop's next turn. */
  async yieldIfLong(): Promise<void> {
    if (performance.now() - this.startedAt < this.sliceMs) return;
    await nextTurn();
    this.startedAt = performance.now();
  }
}
