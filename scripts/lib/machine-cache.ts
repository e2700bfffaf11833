// What the project keeps per machine rather than per checkout (base images, Python
// environments, tools built from source), so a new checkout reuses it.
import os from 'node:os';
import path from 'node:path';

/** The folder `name` of the per-machine cache: `override` when set, else ~/.cache/otm-telemetry/<name> (XDG_CACHE_HOME honoured). */
export function machineCache(name: string, override: string | undefined): string {
  return override ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'otm-telemetry', name);
}
