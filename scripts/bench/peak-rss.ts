// A process's peak resident memory, read from /proc (Linux).
import fs from 'node:fs';

/** Peak resident memory of a process so far, in MB (VmHWM). */
export function peakRssMb(pid: number | undefined): number {
  if (!pid) return NaN;
  try {
    const match = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmHWM:\s+(\d+) kB/);
    return match ? Number(match[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/**
 * Peak resident memory of a process since the last call (or since it started), in MB:
 * its VmHWM, which is then reset to what it holds now (`5` to /proc/<pid>/clear_refs),
 * so that each stretch of a run read this way has a peak of its own. NaN when unreadable.
 */
export function takePeakRssMb(pid: number | undefined): number {
  const peak = peakRssMb(pid);
  if (Number.isFinite(peak)) {
    try {
      fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    } catch {
      // Not ours to reset: the next read spans this stretch too, and so can only read higher.
    }
  }
  return peak;
}
