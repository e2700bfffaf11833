// A Docker engine for the container tests and images (docs/containers.md): Debian's
// `docker.io`, installed when missing, its daemon started with a data root and a
// socket of the project's own under .stack/docker. `down` stops only the daemon `up`
// started (by its pid file). Where an engine already answers (DOCKER_HOST, or the
// default socket) nothing is started and that engine is used.
//
//   npm run docker -- up|down|status|env
//   eval "$(npm run -s docker -- env)"   # DOCKER_HOST for docker and testcontainers
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { Command } from 'commander';
import { ensureDebianPackage } from './stack/services.js';
import { dockerOutput, dockerPaths, engineAnswers, projectEngine } from './lib/docker-engine.js';
import { recordMountOwner, releaseStaleMounts } from './stack/stale-mounts.js';

const paths = dockerPaths();

function ourPid(): number | undefined {
  if (!fs.existsSync(paths.pidFile)) return undefined;
  const pid = Number(fs.readFileSync(paths.pidFile, 'utf8').trim());
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

async function up(): Promise<void> {
  if (!process.env.DOCKER_HOST && engineAnswers(undefined)) {
    console.log('a Docker engine already answers on the default socket: using it');
    return;
  }
  if (process.env.DOCKER_HOST && process.env.DOCKER_HOST !== projectEngine() && engineAnswers(process.env.DOCKER_HOST)) {
    console.log(`DOCKER_HOST=${process.env.DOCKER_HOST} answers: using it`);
    return;
  }
  if (engineAnswers(projectEngine())) {
    console.log(`engine up: DOCKER_HOST=${projectEngine()}`);
    return;
  }
  // What a killed engine or stack left mounted, in any checkout, goes first.
  releaseStaleMounts();
  ensureDebianPackage('dockerd', 'docker.io');
  for (const folder of [paths.dataRoot, paths.execRoot]) fs.mkdirSync(folder, { recursive: true });
  fs.rmSync(paths.socket, { force: true });
  const log = fs.openSync(paths.logFile, 'a');
  const daemon = spawn(
    'dockerd',
    [
      ...['--data-root', paths.dataRoot],
      ...['--exec-root', paths.execRoot],
      ...['--pidfile', paths.pidFile],
      ...['-H', projectEngine()],
      // No registry is reachable from here: never wait on one.
      '--max-download-attempts=1',
    ],
    { detached: true, stdio: ['ignore', log, log] },
  );
  daemon.unref();
  const started = Date.now();
  while (!engineAnswers(projectEngine())) {
    if (Date.now() - started > 60_000) throw new Error(`dockerd did not answer within 60 s; see ${paths.logFile}`);
    if (daemon.exitCode !== null) throw new Error(`dockerd exited with ${daemon.exitCode}; see ${paths.logFile}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  // Its data root's mounts are written down per machine, for a later start to release if it is killed.
  recordMountOwner(paths.home);
  // The storage driver decides what starting and removing a container costs (overlay2: a
  // mount; vfs, where overlay2 cannot mount: a copy of every layer).
  const driver = dockerOutput(projectEngine(), ['info', '--format', '{{.Driver}}']);
  console.log(
    `engine up in ${((Date.now() - started) / 1000).toFixed(1)} s (storage driver ${driver || 'unknown'}): DOCKER_HOST=${projectEngine()}`,
  );
}

async function down(): Promise<void> {
  const pid = ourPid();
  if (pid === undefined) {
    console.log('no engine of ours runs');
    releaseStaleMounts();
    return;
  }
  process.kill(pid, 'SIGTERM');
  const started = Date.now();
  while (ourPid() !== undefined && Date.now() - started < 30_000) await new Promise((resolve) => setTimeout(resolve, 250));
  if (ourPid() !== undefined) process.kill(pid, 'SIGKILL');
  console.log('engine stopped');
  releaseStaleMounts();
}

const program = new Command('docker').description("A Docker engine of the project's own, for images and container tests");
program.command('up').description('install docker.io if missing and start the engine (idempotent)').action(up);
program.command('down').description('stop the engine `up` started (never another)').action(down);
program
  .command('status')
  .description('whether the engine answers, and where')
  .action(() => {
    const host = process.env.DOCKER_HOST ?? (engineAnswers(undefined) ? 'the default socket' : projectEngine());
    const answers = engineAnswers(process.env.DOCKER_HOST ?? (engineAnswers(undefined) ? undefined : projectEngine()));
    console.log(`${host}: ${answers ? 'up' : 'down'}`);
    process.exitCode = answers ? 0 : 1;
  });
program
  .command('env')
  .description('DOCKER_HOST of the engine to use, as a shell line')
  .action(() => {
    if (process.env.DOCKER_HOST) console.log(`export DOCKER_HOST=${process.env.DOCKER_HOST}`);
    else if (!engineAnswers(undefined)) console.log(`export DOCKER_HOST=${projectEngine()}`);
  });

await program.parseAsync();
