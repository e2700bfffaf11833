// A filesystem of its own for the local ClickHouse's data: an ext4 image with a journal,
// attached to a loop device and mounted on the data folder (docs/development.md, "ClickHouse's
// own volume"). ClickHouse 18.16 writes every part as a folder of files, two or three per
// column: an insert into usage_events creates about a thousand files across its tables,
// and merges delete as many. On ext4 without a journal (this project's machines' root
// filesystem) every file created after a burst of deletions searches past the inodes
// freed in the last half minute, and an insert of 1,000 rows took 0.6–0.8 s of
// ClickHouse's CPU instead of 0.1 s. A journaled filesystem has no such search.
//
// Used only where it can be (Linux, root, loop devices, mkfs.ext4) and never over data
// already in the folder; otherwise the folder stays on the machine's filesystem, said once.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { onPath } from './process-service.js';

export interface VolumeOptions {
  /** The folder ClickHouse keeps its data in (the mount point). */
  dir: string;
  /** The image file (sparse: it takes what the filesystem in it holds). */
  image: string;
  sizeGiB: number;
}

export type VolumeState = { mounted: true; device: string } | { mounted: false; reason: string };

type Run = (command: string, args: string[]) => { ok: boolean; out: string };

const run: Run = (command, args) => {
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 120_000, stdio: ['ignore', 'pipe', 'pipe'] });
  return { ok: result.status === 0, out: `${result.stdout ?? ''}${result.stderr ?? ''}`.trim() };
};

/** Whether `dir` is a mount point: another device than its parent's. */
export function isMountPoint(dir: string): boolean {
  try {
    return fs.statSync(dir).dev !== fs.statSync(path.dirname(dir)).dev;
  } catch {
    return false;
  }
}

/** Why the volume cannot be used here, or null when it can (pure but for what it is given). */
export function volumeObstacle(facts: {
  platform: string;
  uid: number | undefined;
  loopControl: boolean;
  mkfs: boolean;
  dirEntries: number;
}): string | null {
  if (facts.platform !== 'linux') return 'not Linux';
  if (facts.uid !== 0) return 'not running as root (mounting needs it)';
  if (!facts.loopControl) return 'no loop devices (/dev/loop-control)';
  if (!facts.mkfs) return 'mkfs.ext4 not installed';
  if (facts.dirEntries > 0)
    return "the folder already holds data on the machine's filesystem (remove it to move ClickHouse onto its own volume)";
  return null;
}

/** The loop devices attached to `image` (losetup -j). */
function attachedDevices(image: string, exec: Run): string[] {
  const listed = exec('losetup', ['-j', image]);
  if (!listed.ok) return [];
  return listed.out
    .split('\n')
    .map((line) => line.split(':')[0]!.trim())
    .filter((device) => device.startsWith('/dev/loop'));
}

/**
 * Mounts the image on `dir` (creating and formatting it the first time) unless it is
 * mounted already; says why not when it cannot. Never throws.
 */
export function ensureVolume(options: VolumeOptions, exec: Run = run): VolumeState {
  const { dir, image, sizeGiB } = options;
  try {
    if (isMountPoint(dir)) return { mounted: true, device: exec('findmnt', ['-n', '-o', 'SOURCE', dir]).out || 'mounted' };
    fs.mkdirSync(dir, { recursive: true });
    const obstacle = volumeObstacle({
      platform: process.platform,
      uid: process.getuid?.(),
      loopControl: fs.existsSync('/dev/loop-control'),
      mkfs: onPath('mkfs.ext4'),
      dirEntries: fs.readdirSync(dir).length,
    });
    if (obstacle) return { mounted: false, reason: obstacle };
    // A device left attached by a stop that did not finish is let go first.
    for (const device of attachedDevices(image, exec)) exec('losetup', ['-d', device]);
    if (!fs.existsSync(image)) {
      const handle = fs.openSync(image, 'w');
      try {
        fs.ftruncateSync(handle, sizeGiB * 1024 ** 3);
      } finally {
        fs.closeSync(handle);
      }
      const formatted = exec('mkfs.ext4', ['-q', '-F', '-L', 'otm-clickhouse', image]);
      if (!formatted.ok) {
        fs.rmSync(image, { force: true });
        return { mounted: false, reason: `mkfs.ext4 failed: ${formatted.out}` };
      }
    }
    const attached = exec('losetup', ['--find', '--show', '--direct-io=on', image]);
    if (!attached.ok) return { mounted: false, reason: `losetup failed: ${attached.out}` };
    const device = attached.out.split('\n')[0]!.trim();
    // Online discard: a deleted file's blocks leave the sparse image at once, so it takes
    // on disk what it holds now, not the most it has held since the last `down` (ClickHouse
    // writes each merged part before it deletes the parts it replaces: the analytics
    // benchmark's 100 million events grew the image to 60 GB holding 29 GB, and filled
    // the machine's disk).
    const mounted = exec('mount', ['-t', 'ext4', '-o', 'discard', device, dir]);
    if (!mounted.ok) {
      exec('losetup', ['-d', device]);
      return { mounted: false, reason: `mount failed: ${mounted.out}` };
    }
    return { mounted: true, device };
  } catch (error) {
    return { mounted: false, reason: (error as Error).message };
  }
}

/**
 * Unmounts the volume from `dir` once ClickHouse has stopped, after giving the space its
 * deleted files held back to the machine (fstrim), and lets its loop device go; the data
 * stays in the image for the next start. Does nothing when `dir` is not this image's
 * mount. Never throws; false when it is still mounted.
 */
export function releaseVolume(options: Pick<VolumeOptions, 'dir' | 'image'>, exec: Run = run): boolean {
  const { dir, image } = options;
  try {
    const devices = attachedDevices(image, exec);
    if (isMountPoint(dir)) {
      const source = exec('findmnt', ['-n', '-o', 'SOURCE', dir]).out;
      if (!devices.includes(source)) return true;
      exec('fstrim', [dir]);
      let unmounted = false;
      for (let attempt = 0; attempt < 10 && !unmounted; attempt++) {
        unmounted = exec('umount', [dir]).ok;
        if (!unmounted) spawnSync('sleep', ['0.5']);
      }
      if (!unmounted) return false;
    }
    for (const device of devices) exec('losetup', ['-d', device]);
    return true;
  } catch {
    return false;
  }
}
