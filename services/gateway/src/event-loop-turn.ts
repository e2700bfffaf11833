// Long work on the event loop, cut into slices: a request whose work takes longer than
// one slice (a batch of 1,000 large records, an export of 1,000 spans) gives the loop
// back between slices, so the other connections' requests are answered meanwhile.
import { setImmediate as nextTurn } from 'node:timers/promises';

/** Milliseconds of work on the event loop before a request gives it back. */
export const SLICE_MS = 10;

export class EventLoopTurn {
  private startedAt = performance.now();

  constructor(private readonly sliceMs = SLICE_MS) {}

  /** Whether the slice is over: the caller gives the loop back then (`yield`), and goes on at once otherwise (no promise per item). */
  long(): boolean {
    return performance.now() - this.startedAt >= this.sliceMs;
  }

  /** Resolves on the loop's next turn, and starts the next slice. */
  async yield(): Promise<void> {
    await nextTurn();
    this.startedAt = performance.now();
  }
}
