// Runs one of the project's services as a real child process and waits for its
// ready log line; used by the integration tests and the benchmarks.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Services started here and still running: killed when this process exits, so a
 * crashed benchmark or test run leaves no service holding its ports. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export interface ServiceProcess {
  child: ChildProcess;
  /** Every log line so far, parsed when JSON. */
  logs: string[];
  /** The address from the "listening" line, when the service listens. */
  url: string;
  metricsPort?: number;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL, as a crash. */
  kill(): Promise<void>;
  waitForLog(pattern: RegExp, timeoutMs?: number): Promise<string>;
}

type Entry = 'gateway' | 'gateway-cluster' | 'ingester' | 'admin';

/**
 * V8 memory settings per service, measured in the benchmark (BENCHMARKS.md). Without
 * them V8 lets the heap grow with the machine's memory before it collects: the
 * ingester reached 400-500 MB RSS and stays under 300 MB with its old space capped at
 * 256 MB. The gateway gets a smaller young generation instead (8 MB semi-spaces: RSS
 * about 160 MB instead of 210, same latency and throughput within the noise); every
 * old-space cap tried on it (128, 192, 256) doubled its latency at a fixed rate. The
 * ingester gets the same young generation beside its cap: 225 MB instead of 361 at
 * 4,000 records/s end to end, 418-464 instead of 534-554 loading a backlog at full
 * speed, with the same rows per second (bench/analysis.md).
 * A flag already in NODE_OPTIONS wins.
 */
export const serviceNodeOptions: Record<Entry, string[]> = {
  gateway: ['--max-semi-space-size=8'],
  'gateway-cluster': ['--max-semi-space-size=8'],
  ingester: ['--max-old-space-size=256', '--max-semi-space-size=8'],
  admin: ['--max-old-space-size=256'],
};

/** `env` with the service's memory settings added to NODE_OPTIONS, where it does not set them already. */
export function withMemoryFlags(entry: Entry, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const options = env.NODE_OPTIONS ?? '';
  const missing = serviceNodeOptions[entry].filter((flag) => !options.includes(flag.split('=')[0]!));
  if (missing.length === 0) return env;
  return { ...env, NODE_OPTIONS: [options, ...missing].filter(Boolean).join(' ') };
}

export function startService(entry: Entry, env: NodeJS.ProcessEnv, ready: RegExp, timeoutMs = 60_000): Promise<ServiceProcess> {
  const script = path.join(
    projectRoot,
    entry === 'gateway-cluster' ? 'services/gateway/src/cluster.ts' : `services/${entry}/src/server.ts`,
  );
  return startProcess(entry, [script], withMemoryFlags(entry, env), ready, timeoutMs);
}

/**
 * Node flags of every service process, built or not. kafkajs (unmaintained, 2.2.4) arms
 * a timer with `throttledUntil - Date.now()` while `throttledUntil` is still -1
 * (src/network/requestQueue/index.js); Node 22+ clamps it to 1 ms, as it should, and
 * says so with a TimeoutNegativeWarning at each start. The warning is silenced, nothing else.
 */
export const SERVICE_RUNTIME_FLAGS = ['--disable-warning=TimeoutNegativeWarning'];

/**
 * Node flags that run the project's TypeScript sources: tsx, and the `otm-source` export
 * condition under which the workspaces export their sources (production resolves dist/).
 */
export const SOURCE_FLAGS = ['--conditions=otm-source', '--import', 'tsx', ...SERVICE_RUNTIME_FLAGS];

/**
 * Runs a script of the project (`args[0]`, then its arguments; TypeScript unless told otherwise) as a child
 * process, like a service: it is killed when this process exits, and the returned
 * promise rejects if it exits before logging `ready`.
 */
export async function startProcess(
  label: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  timeoutMs = 60_000,
  /** How Node runs `args[0]`: the TypeScript sources by default; `[]` for a built (`dist/`) script. */
  runtimeFlags: string[] = SOURCE_FLAGS,
): Promise<ServiceProcess> {
  const child = spawn(
    process.execPath,
    [
      // Extra node flags for a run (e.g. --cpu-prof, which NODE_OPTIONS refuses), from the
      // service environment or this process's.
      ...(env.SERVICE_NODE_FLAGS ?? process.env.SERVICE_NODE_FLAGS ?? '').split(' ').filter(Boolean),
      ...runtimeFlags,
      ...args,
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  running.add(child);
  child.once('exit', () => running.delete(child));
  const logs: string[] = [];
  const listeners = new Set<(line: string) => void>();
  for (const stream of [child.stdout!, child.stderr!]) {
    readline.createInterface({ input: stream }).on('line', (line) => {
      logs.push(line);
      for (const listener of listeners) listener(line);
    });
  }
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const waitForLog = (pattern: RegExp, waitMs = timeoutMs) =>
    new Promise<string>((resolve, reject) => {
      const existing = logs.find((line) => pattern.test(line));
      if (existing) return resolve(existing);
      const timer = setTimeout(() => {
        listeners.delete(listener);
        reject(new Error(`${label}: no log line matching ${pattern} within ${waitMs} ms; logs:\n${logs.slice(-30).join('\n')}`));
      }, waitMs);
      const listener = (line: string) => {
        if (!pattern.test(line)) return;
        clearTimeout(timer);
        listeners.delete(listener);
        resolve(line);
      };
      listeners.add(listener);
      void exited.then((code) => {
        if (!listeners.has(listener)) return;
        clearTimeout(timer);
        listeners.delete(listener);
        reject(new Error(`${label} exited with ${code} before logging ${pattern}; logs:\n${logs.slice(-30).join('\n')}`));
      });
    });
  const line = await waitForLog(ready);
  let url = '';
  let metricsPort: number | undefined;
  try {
    const parsed = JSON.parse(line) as { address?: string; metricsPort?: number };
    url = parsed.address ?? '';
    metricsPort = parsed.metricsPort;
  } catch {
    // not a JSON line
  }
  return {
    child,
    logs,
    url,
    metricsPort,
    waitForLog,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      return exited;
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await exited;
    },
  };
}
