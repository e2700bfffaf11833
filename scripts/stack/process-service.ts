// What every service of the local stack shares: installing from Debian's packages or
// Maven Central, and a detached process with a pid file that is started, checked and
// stopped only when it is the stack's own (the supervisor's detached daemons,
// scripts/lib/service-process.ts).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Agent as UndiciAgent, request as undiciRequest } from 'undici';
import { type StackConfig } from './config.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { detachedPid, isAlive, isOurs, startDetached, stopDetached } from '../lib/service-process.js';

/** How long the local brokers keep messages (docs/topic-contract.md states it). */
export const BROKER_RETENTION_HOURS = 48;

export interface StackService {
  readonly name: string;
  readonly address: string;
  readonly logFile: string;
  /** Install when missing and start unless already healthy on its port. */
  start(): Promise<'started' | 'running'>;
  waitHealthy(timeoutMs: number): Promise<void>;
  healthy(): Promise<boolean>;
  down(): Promise<void>;
  tail(lines: number): Promise<string>;
  readonly startTimeoutMs: number;
  /** Sends `signal` to the process this stack started (kill -9, SIGSTOP/SIGCONT in the chaos suite); false when none runs. */
  signal(signal: NodeJS.Signals): boolean;
}

export function run(command: string, args: string[], options: { cwd?: string } = {}): void {
  const result = spawnSync(command, args, { stdio: ['ignore', 'inherit', 'inherit'], cwd: options.cwd });
  if (result.status !== 0) {
    throw new Error(`"${command} ${args.join(' ')}" failed with exit code ${result.status ?? result.signal}`);
  }
}

export function onPath(binary: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${binary}`], { stdio: 'ignore' }).status === 0;
}

let aptUpdated = false;
/** Installs Debian packages with apt (the package lists updated once per process). */
export function aptInstall(packages: string[]): void {
  const sudo = process.getuid?.() === 0 ? [] : ['sudo'];
  const apt = (args: string[]) => {
    const command = [...sudo, 'env', 'DEBIAN_FRONTEND=noninteractive', 'apt-get', ...args];
    run(command[0]!, command.slice(1));
  };
  console.log(`installing ${packages.join(' ')} (apt-get) ...`);
  if (!aptUpdated) {
    apt(['update', '-q']);
    aptUpdated = true;
  }
  apt(['install', '-y', '-q', '--no-install-recommends', ...packages]);
}

/** Debian packages the stack needs, installed with apt when their binary is missing. */
export function ensureDebianPackage(binary: string, pkg: string): void {
  if (!onPath(binary)) aptInstall([pkg]);
}

export function pomProperty(config: StackConfig, name: string): string {
  const pom = fs.readFileSync(path.join(config.root, 'deploy/maven/pom.xml'), 'utf8');
  const match = pom.match(new RegExp(`<${name}>([^<]+)</${name}>`));
  if (!match) throw new Error(`deploy/maven/pom.xml has no <${name}> property`);
  return match[1]!;
}

export function mvn(config: StackConfig, args: string[]): void {
  if (!onPath('mvn')) throw new Error('Maven (mvn) is required to fetch Kafka and Apicurio Registry; see README prerequisites');
  run('mvn', ['-q', '-B', '-f', path.join(config.root, 'deploy/maven/pom.xml'), ...args]);
}

export abstract class ProcessService implements StackService {
  abstract readonly name: string;
  abstract readonly address: string;
  abstract readonly startTimeoutMs: number;
  protected abstract readonly home: string;
  abstract healthy(): Promise<boolean>;
  /** Install binaries, write configuration; returns the command to start. */
  protected abstract prepare(): { command: string; args: string[]; cwd?: string };

  constructor(protected readonly config: StackConfig) {}

  get logFile(): string {
    return path.join(this.home, `${this.name}.log`);
  }
  private get pidFile(): string {
    return path.join(this.home, `${this.name}.pid`);
  }

  async start(): Promise<'started' | 'running'> {
    if (await this.healthy()) return 'running';
    fs.mkdirSync(this.home, { recursive: true });
    const { command, args, cwd } = this.prepare();
    startDetached(command, args, cwd ?? this.home, { logFile: this.logFile, pidFile: this.pidFile }, this.name);
    return 'started';
  }

  async waitHealthy(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (await this.healthy()) return;
      const pid = this.pid();
      if (pid !== undefined && !isAlive(pid)) {
        throw new Error(`${this.name} exited during startup; last log lines:\n${await this.tail(30)}`);
      }
      await sleep(250);
    }
    throw new Error(`${this.name} not healthy after ${timeoutMs} ms; last log lines:\n${await this.tail(30)}`);
  }

  signal(signal: NodeJS.Signals): boolean {
    const pid = this.pid();
    if (pid === undefined || !isOurs(pid, this.config.dir)) return false;
    process.kill(pid, signal);
    return true;
  }

  /** The service's process id from its pid file, undefined when it has none. */
  pid(): number | undefined {
    return detachedPid(this.pidFile);
  }

  async down(): Promise<void> {
    if (await stopDetached(this.pidFile, this.config.dir)) console.log(`${this.name} stopped`);
  }

  async tail(lines: number): Promise<string> {
    try {
      return fs
        .readFileSync(this.logFile, 'utf8')
        .split('\n')
        .slice(-lines - 1)
        .join('\n');
    } catch {
      return '(no log yet)';
    }
  }
}

/**
 * Whether `url` answers 200 within 2 s: over HTTPS with the stack's own CA when `caFile`
 * is given (the secure profile), with `headers` (a login) if any.
 */
export async function httpOk(url: string, caFile?: string, headers: Record<string, string> = {}): Promise<boolean> {
  try {
    if (caFile === undefined) {
      const response = await fetch(url, { headers, signal: AbortSignal.timeout(2000) });
      await response.body?.cancel();
      return response.ok;
    }
    const response = await undiciRequest(url, {
      dispatcher: new UndiciAgent({ connect: { ca: fs.readFileSync(caFile) } }),
      headers,
      signal: AbortSignal.timeout(2000),
    });
    await response.body.dump();
    return response.statusCode === 200;
  } catch {
    return false;
  }
}
