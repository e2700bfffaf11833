// Mounts a stack leaves behind. ClickHouse's volume (a loop device mounted on its data
// folder) and the Docker engine's data root are mounted by the stack's own processes;
// when those processes are killed (a session ends while a test runs), the mounts and the
// loop devices stay, with nothing left to release them, and another checkout's
// `npm run stack -- down` did not know them. So every folder the stack mounts in is
// written down in a list kept per machine (~/.cache/otm-telemetry/mounts, or
// OTM_MOUNT_REGISTRY); `npm start`, `npm run stack -- up|down` and `npm run docker --
// up|down`, from any checkout, release the mounts of every listed folder that no live
// process uses any more, and forget folders that are gone.
//
// "Uses": a process whose working directory, command line or open files name the folder.
// A folder in use is never touched. Only root mounts, so only root releases.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

type Run = (command: string, args: string[]) => { ok: boolean; out: string };

const run: Run = (command, args) => {
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'] });
  return { ok: result.status === 0, out: `${result.stdout ?? ''}${result.stderr ?? ''}`.trim() };
};

export function mountRegistry(env: NodeJS.ProcessEnv = process.env): string {
  return env.OTM_MOUNT_REGISTRY || path.join(os.homedir(), '.cache', 'otm-telemetry', 'mounts');
}

/** Writes `dir` (a folder the stack mounts in) down in the machine's list. */
export function recordMountOwner(dir: string, registry = mountRegistry()): void {
  const resolved = path.resolve(dir);
  fs.mkdirSync(registry, { recursive: true });
  const file = path.join(registry, `${createHash('sha1').update(resolved).digest('hex').slice(0, 16)}.json`);
  fs.writeFileSync(file, `${JSON.stringify({ dir: resolved, recordedAt: new Date().toISOString() })}\n`);
}

/** Mount points at or under `dir`, deepest first (from /proc/self/mountinfo; octal escapes decoded). */
export function mountsUnder(dir: string, mountinfo: string): string[] {
  const prefix = `${dir}/`;
  return mountinfo
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((point): point is string => point !== undefined)
    .map((point) => point.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))))
    .filter((point) => point === dir || point.startsWith(prefix))
    .sort((a, b) => b.split('/').length - a.split('/').length || b.length - a.length);
}

/** Loop devices whose backing file lies at or under `dir` (losetup -l -n -O NAME,BACK-FILE). */
export function loopDevicesUnder(dir: string, listing: string): string[] {
  const prefix = `${dir}/`;
  return listing
    .split('\n')
    .map((line) => /^(\/dev\/loop\d+)\s+(.+?)(?: \(deleted\))?\s*$/.exec(line.trim()))
    .filter((match): match is RegExpExecArray => match !== null)
    .filter((match) => match[2] === dir || match[2]!.startsWith(prefix))
    .map((match) => match[1]!);
}

/** Process ids (other than this one) whose working directory, command line or open files name `dir`. */
export function processesUsing(dir: string): number[] {
  const prefix = `${dir}/`;
  const names = (target: string) => target === dir || target.startsWith(prefix);
  const users: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (cmdline.some((arg) => arg.includes(dir))) {
        users.push(Number(entry));
        continue;
      }
      if (names(fs.readlinkSync(`/proc/${entry}/cwd`))) {
        users.push(Number(entry));
        continue;
      }
      const fds = fs.readdirSync(`/proc/${entry}/fd`);
      if (fds.some((fd) => names(safeReadlink(`/proc/${entry}/fd/${fd}`)))) users.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return users;
}

function safeReadlink(link: string): string {
  try {
    return fs.readlinkSync(link);
  } catch {
    return '';
  }
}

export interface StaleRelease {
  dir: string;
  unmounted: string[];
  detached: string[];
  /** Mount points that would not go (busy, or umount refused). */
  left: string[];
}

/**
 * Releases the mounts and loop devices under every listed folder no live process uses,
 * and forgets folders that are gone with nothing mounted. Never throws; what it released
 * is returned (and said through `log`).
 */
export function releaseStaleMounts(log: (line: string) => void = console.log, registry = mountRegistry(), exec: Run = run): StaleRelease[] {
  const released: StaleRelease[] = [];
  if (process.platform !== 'linux' || process.getuid?.() !== 0 || !fs.existsSync(registry)) return released;
  for (const file of fs.readdirSync(registry).filter((name) => name.endsWith('.json'))) {
    try {
      const { dir } = JSON.parse(fs.readFileSync(path.join(registry, file), 'utf8')) as { dir: string };
      const mounts = mountsUnder(dir, fs.readFileSync('/proc/self/mountinfo', 'utf8'));
      const listing = exec('losetup', ['-l', '-n', '-O', 'NAME,BACK-FILE']);
      const devices = listing.ok ? loopDevicesUnder(dir, listing.out) : [];
      if (mounts.length === 0 && devices.length === 0) {
        if (!fs.existsSync(dir)) fs.rmSync(path.join(registry, file), { force: true });
        continue;
      }
      if (processesUsing(dir).length > 0) continue;
      const outcome: StaleRelease = { dir, unmounted: [], detached: [], left: [] };
      for (const point of mounts) {
        if (exec('umount', [point]).ok || exec('umount', ['-l', point]).ok) outcome.unmounted.push(point);
        else outcome.left.push(point);
      }
      for (const device of devices) if (exec('losetup', ['-d', device]).ok) outcome.detached.push(device);
      log(
        `released what a stopped stack left mounted under ${dir}: ${outcome.unmounted.length} mount(s), ${outcome.detached.length} loop device(s)` +
          (outcome.left.length > 0 ? `; still mounted: ${outcome.left.join(', ')}` : ''),
      );
      released.push(outcome);
    } catch (error) {
      log(`stale mounts: ${file}: ${(error as Error).message}`);
    }
  }
  return released;
}
