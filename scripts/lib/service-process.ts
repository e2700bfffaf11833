// The project's one process supervisor. Three ways a process is run, all here:
// - a service as a child process, ready once it logs its ready line, killed when this
//   process exits (`startService`, `startProcess`: the integration tests, the benchmark,
//   the chaos suite);
// - a service kept running, restarted with backoff when it exits (`superviseService`:
//   `npm start`);
// - a detached daemon with a pid file that outlives this process and is signalled only
//   when it is still ours (`startDetached`, `stopDetached`: the local stack's Kafka,
//   registry, Redis and ClickHouse, scripts/stack/process-service.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse as parseShellWords } from 'shell-quote';
import { projectRoot } from './project-root.js';

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
  /** Resolves when the process has exited: its exit code, or the signal that ended it. */
  exited: Promise<number | string | null>;
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
 * The gateway also bounds how far its old generation grows between full collections
 * (GATEWAY_HEAP_GROWING_PERCENT, set by the service itself: NODE_OPTIONS refuses the flag).
 * A flag already in NODE_OPTIONS wins.
 */
export const serviceNodeOptions: Record<Entry, string[]> = {
  gateway: ['--max-semi-space-size=8'],
  'gateway-cluster': ['--max-semi-space-size=8'],
  ingester: ['--max-old-space-size=256', '--max-semi-space-size=8'],
  admin: ['--max-old-space-size=256'],
};

/**
 * glibc allocator settings per service, measured in the benchmark (docs/ingester.md,
 * "Memory"). The services' large transient buffers (the gateway's inflated request bodies
 * and produce batches, the ingester's decompressed Kafka record batches and insert
 * bodies) are served by glibc from its heap once its adaptive threshold has risen past
 * their size, where they fragment it; a fixed threshold of 128 KiB maps each on its own
 * and gives it back when freed. A variable already in the environment wins.
 */
const MMAP_THRESHOLD_BYTES = '131072';

export const serviceAllocatorEnv: Partial<Record<Entry, Record<string, string>>> = {
  gateway: { MALLOC_MMAP_THRESHOLD_: MMAP_THRESHOLD_BYTES },
  'gateway-cluster': { MALLOC_MMAP_THRESHOLD_: MMAP_THRESHOLD_BYTES },
  ingester: { MALLOC_MMAP_THRESHOLD_: MMAP_THRESHOLD_BYTES },
};

/** `env` with the service's memory settings added (NODE_OPTIONS, the allocator's), where it does not set them already. */
export function withMemoryFlags(entry: Entry, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const options = env.NODE_OPTIONS ?? '';
  const missing = serviceNodeOptions[entry].filter((flag) => !options.includes(flag.split('=')[0]!));
  const allocator = Object.entries(serviceAllocatorEnv[entry] ?? {}).filter(([name]) => env[name] === undefined);
  if (missing.length === 0 && allocator.length === 0) return env;
  return {
    ...Object.fromEntries(allocator),
    ...env,
    ...(missing.length > 0 ? { NODE_OPTIONS: [options, ...missing].filter(Boolean).join(' ') } : {}),
  };
}

function serviceScript(entry: Entry, built = false): string {
  const [folder, file] = entry === 'gateway-cluster' ? ['gateway', 'cluster'] : [entry, 'server'];
  return path.join(projectRoot, 'services', folder, built ? `dist/${file}.js` : `src/${file}.ts`);
}

/**
 * Starts a service from its TypeScript sources (under tsx), or with `built` from its
 * dist/ as production runs it (plain Node, no loader: `npm run build` first). The
 * benchmark measures built services: tsx's loader thread and its compiled sources
 * add about 50 MB to each service's RSS that production does not have.
 */
export function startService(
  entry: Entry,
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  timeoutMs = 60_000,
  { built = false } = {},
): Promise<ServiceProcess> {
  const script = serviceScript(entry, built);
  if (built && !fs.existsSync(script)) throw new Error(`${script} does not exist: run \`npm run build\` first`);
  return startProcess(entry, [script], withMemoryFlags(entry, env), ready, timeoutMs, built ? SERVICE_RUNTIME_FLAGS : SOURCE_FLAGS);
}

/** A service kept running by superviseService. */
export interface SupervisedService {
  /** SIGTERM to the running process, no restart; resolves once it has exited. */
  stop(): Promise<void>;
}

/**
 * Keeps a service running (decisions.md, "Supervision"): when it exits it is started
 * again after a backoff of 1 s, doubling up to 30 s, back to 1 s once it had run for a
 * minute. Every output line goes to `onLine`; `onExit` hears of each exit and the delay
 * before the restart.
 */
export function superviseService(
  entry: Entry,
  env: NodeJS.ProcessEnv,
  hooks: { onLine(line: string): void; onExit(code: number | string | null, restartInMs: number): void },
): SupervisedService {
  let current: ServiceProcess | undefined;
  let stopping = false;
  let restart: NodeJS.Timeout | undefined;
  const run = (backoffMs: number) => {
    const startedAt = Date.now();
    // Its lines go to onLine only: a service kept running for days would fill `logs`.
    const spawned = spawnProcess(entry, [serviceScript(entry)], withMemoryFlags(entry, env), SOURCE_FLAGS, {
      onLine: hooks.onLine,
      keepLogs: false,
    });
    current = spawned;
    void spawned.exited.then((code) => {
      if (stopping) return;
      const delay = Date.now() - startedAt > 60_000 ? 1000 : backoffMs;
      hooks.onExit(code, delay);
      restart = setTimeout(() => {
        if (!stopping) run(Math.min(delay * 2, 30_000));
      }, delay);
    });
  };
  run(1000);
  return {
    async stop() {
      stopping = true;
      clearTimeout(restart);
      await current?.stop();
    },
  };
}

/**
 * Node flags of every service process, built or not. kafkajs (unmaintained, 2.2.4) armed
 * a timer with `throttledUntil - Date.now()` while `throttledUntil` was still -1
 * (src/network/requestQueue/index.js), which Node 22+ clamps to 1 ms with a
 * TimeoutNegativeWarning, and armed it again each time it ran, with nothing waiting:
 * the dependency patch stops that (docs/development.md, "Dependency patches"). The
 * warning stays silenced, in case another of its timers does the same.
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
  const spawned = spawnProcess(label, args, env, runtimeFlags, { timeoutMs });
  const line = await spawned.waitForLog(ready);
  try {
    const parsed = JSON.parse(line) as { address?: string; metricsPort?: number };
    spawned.url = parsed.address ?? '';
    spawned.metricsPort = parsed.metricsPort;
  } catch {
    // not a JSON line
  }
  return spawned;
}

/**
 * The node flags of `SERVICE_NODE_FLAGS`, split as a shell splits words: a value quoted
 * there (a profile folder whose path holds a space) stays one argument.
 */
export function serviceNodeFlags(flags: string | undefined): string[] {
  // A `$NAME` is kept as written: the flags are node's, not a shell's.
  return parseShellWords(flags ?? '', (name) => `$${name}`).filter((word): word is string => typeof word === 'string');
}

/**
 * Starts the child process (killed when this process exits) and reads its output lines:
 * kept in `logs` (unless `keepLogs` is false) and given to `onLine`.
 */
function spawnProcess(
  label: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  runtimeFlags: string[],
  { onLine, keepLogs = true, timeoutMs = 60_000 }: { onLine?: (line: string) => void; keepLogs?: boolean; timeoutMs?: number } = {},
): ServiceProcess {
  const child = spawn(
    process.execPath,
    [
      // Extra node flags for a run (e.g. --cpu-prof, which NODE_OPTIONS refuses), from the
      // service environment or this process's.
      ...serviceNodeFlags(env.SERVICE_NODE_FLAGS ?? process.env.SERVICE_NODE_FLAGS),
      ...runtimeFlags,
      ...args,
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  running.add(child);
  child.once('exit', () => running.delete(child));
  const logs: string[] = [];
  const listeners = new Set<(line: string) => void>();
  if (onLine) listeners.add(onLine);
  for (const stream of [child.stdout!, child.stderr!]) {
    readline.createInterface({ input: stream }).on('line', (line) => {
      if (keepLogs) logs.push(line);
      for (const listener of listeners) listener(line);
    });
  }
  const exited = new Promise<number | string | null>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
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
  return {
    child,
    logs,
    url: '',
    waitForLog,
    exited,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const code = await exited;
      return typeof code === 'number' ? code : null;
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Where a detached daemon writes its output and its process id. */
export interface DetachedFiles {
  logFile: string;
  pidFile: string;
}

/** Starts `command` detached from this process (it outlives it), output appended to the log file, pid in the pid file. */
export function startDetached(command: string, args: string[], cwd: string, files: DetachedFiles, label = command): void {
  const log = fs.openSync(files.logFile, 'a');
  const child = spawn(command, args, { cwd, detached: true, stdio: ['ignore', log, log] });
  fs.closeSync(log);
  if (child.pid === undefined) throw new Error(`${label}: could not start ${command}`);
  fs.writeFileSync(files.pidFile, String(child.pid));
  child.unref();
}

/** The process id in a pid file, undefined when there is none. */
export function detachedPid(pidFile: string): number | undefined {
  try {
    const pid = Number(fs.readFileSync(pidFile, 'utf8'));
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * True when pid is a live process that runs in, or names, `dir`, so a pid reused by an
 * unrelated process is never signalled. (Redis rewrites its command line, hence the
 * working-directory check.)
 */
export function isOurs(pid: number, dir: string): boolean {
  if (!isAlive(pid)) return false;
  try {
    const cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
    if (cwd.startsWith(dir)) return true;
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir);
  } catch {
    return false;
  }
}

/**
 * Stops the daemon of a pid file when it is ours (under `dir`): SIGTERM, SIGKILL after
 * 20 s; removes the pid file. True when a process was stopped.
 */
export async function stopDetached(pidFile: string, dir: string): Promise<boolean> {
  const pid = detachedPid(pidFile);
  let stopped = false;
  if (pid !== undefined && isOurs(pid, dir)) {
    process.kill(pid, 'SIGTERM');
    const deadline = Date.now() + 20_000;
    while (isAlive(pid) && Date.now() < deadline) await sleep(100);
    if (isAlive(pid)) process.kill(pid, 'SIGKILL');
    stopped = true;
  }
  fs.rmSync(pidFile, { force: true });
  return stopped;
}
