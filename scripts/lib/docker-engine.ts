// Where the project's Docker engine lives (scripts/docker.ts starts it) and which
// engine a command should use: DOCKER_HOST when set, else the default socket when an
// engine answers there, else the project's own.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { projectRoot as root } from './project-root.js';

export function dockerPaths() {
  const home = path.join(root, '.stack', 'docker');
  return {
    home,
    dataRoot: path.join(home, 'data'),
    execRoot: path.join(home, 'exec'),
    socket: path.join(home, 'docker.sock'),
    pidFile: path.join(home, 'dockerd.pid'),
    logFile: path.join(home, 'dockerd.log'),
  };
}

/** The DOCKER_HOST of the project's own engine. */
export function projectEngine(): string {
  return `unix://${dockerPaths().socket}`;
}

/**
 * Runs `docker <args>` against the engine at `host` (undefined: the client's default),
 * for at most 10 s: its trimmed output, or undefined when it failed.
 */
export function dockerOutput(host: string | undefined, args: string[]): string | undefined {
  const env = { ...process.env };
  if (host === undefined) delete env.DOCKER_HOST;
  else env.DOCKER_HOST = host;
  const result = spawnSync('docker', args, { env, encoding: 'utf8', stdio: 'pipe', timeout: 10_000 });
  return result.status === 0 ? result.stdout.trim() : undefined;
}

/** Whether an engine answers at `host` (undefined: the client's default). */
export function engineAnswers(host: string | undefined): boolean {
  return dockerOutput(host, ['version', '--format', '{{.Server.Version}}']) !== undefined;
}

/** The DOCKER_HOST to use, or undefined when no engine answers (run `npm run docker -- up`). */
export function dockerHost(): string | undefined {
  if (process.env.DOCKER_HOST) return engineAnswers(process.env.DOCKER_HOST) ? process.env.DOCKER_HOST : undefined;
  if (engineAnswers(undefined)) return 'unix:///var/run/docker.sock';
  return engineAnswers(projectEngine()) ? projectEngine() : undefined;
}
