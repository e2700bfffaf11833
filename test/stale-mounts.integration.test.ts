// What a killed stack leaves mounted is released by the next stack command of another
// checkout: a stack folder with ClickHouse's volume mounted (a real loop device, as the
// stack mounts it) and a process using it; while that process lives, `npm run stack --
// down` from another stack folder leaves the mount alone; once it is killed with SIGKILL
// (nothing left to unmount), the same command releases the mount and the loop device.
// Needs what the volume needs (Linux, root, loop devices, mkfs.ext4).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureVolume, isMountPoint, releaseVolume } from '../scripts/stack/volume.js';
import { recordMountOwner } from '../scripts/stack/stale-mounts.js';
import { SOURCE_FLAGS } from '../scripts/lib/service-process.js';
import { projectRoot } from './helpers/stack.js';

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'otm-stale-mounts-'));
const stackDir = path.join(work, 'first', '.stack');
const volume = { dir: path.join(stackDir, 'clickhouse', 'data'), image: path.join(stackDir, 'clickhouse', 'volume.img'), sizeGiB: 1 };
const env = { ...process.env, OTM_MOUNT_REGISTRY: path.join(work, 'registry'), OTM_STACK_DIR: path.join(work, 'second', '.stack') };
const canMount = process.platform === 'linux' && process.getuid?.() === 0 && fs.existsSync('/dev/loop-control');

afterAll(() => {
  if (isMountPoint(volume.dir)) releaseVolume(volume);
  fs.rmSync(work, { recursive: true, force: true });
});

/** `npm run stack -- down` as another checkout runs it: its own stack folder, the machine's list of mounts. */
function stackDownElsewhere(): string {
  const result = spawnSync(process.execPath, [...SOURCE_FLAGS, path.join(projectRoot, 'scripts/stack.ts'), 'down'], {
    cwd: projectRoot,
    env,
    encoding: 'utf8',
    timeout: 120_000,
  });
  expect(result.status, result.stderr).toBe(0);
  return result.stdout;
}

const attached = () => spawnSync('losetup', ['-j', volume.image], { encoding: 'utf8' }).stdout.trim();

describe.runIf(canMount)('mounts a killed stack left behind', () => {
  it('are kept while a process uses them and released by another checkout once it is gone', { timeout: 300_000 }, async () => {
    const state = ensureVolume(volume);
    expect(state.mounted, JSON.stringify(state)).toBe(true);
    recordMountOwner(stackDir, env.OTM_MOUNT_REGISTRY);
    // A stand-in for the stack's ClickHouse: a process working in the mounted folder.
    const holder = spawn('sleep', ['600'], { cwd: volume.dir, detached: true, stdio: 'ignore' });
    await new Promise((resolve) => setTimeout(resolve, 200));

    expect(stackDownElsewhere()).not.toContain('released what a stopped stack left mounted');
    expect(isMountPoint(volume.dir)).toBe(true);

    holder.kill('SIGKILL');
    await new Promise((resolve) => holder.once('exit', resolve));
    const said = stackDownElsewhere();
    expect(said).toContain(`released what a stopped stack left mounted under ${stackDir}: 1 mount(s), 1 loop device(s)`);
    expect(isMountPoint(volume.dir)).toBe(false);
    expect(attached()).toBe('');
    // Nothing left to release: the next command says nothing.
    expect(stackDownElsewhere()).not.toContain('released what');
  });
});
