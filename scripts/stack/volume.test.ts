import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ensureVolume, releaseVolume, volumeObstacle } from './volume.js';

const facts = { platform: 'linux', uid: 0, loopControl: true, mkfs: true, dirEntries: 0 };

describe('volumeObstacle', () => {
  it('lets the volume be made on Linux, as root, with loop devices and mkfs.ext4, over an empty folder', () => {
    expect(volumeObstacle(facts)).toBeNull();
  });

  it.each([
    [{ platform: 'darwin' }, /not Linux/],
    [{ uid: 1000 }, /root/],
    [{ loopControl: false }, /loop devices/],
    [{ mkfs: false }, /mkfs\.ext4/],
    [{ dirEntries: 3 }, /already holds data/],
  ])('names what stands in the way: %o', (change, reason) => {
    expect(volumeObstacle({ ...facts, ...change })).toMatch(reason);
  });
});

describe('ensureVolume and releaseVolume (the commands they would run)', () => {
  /** Whether this machine lets a test attach loop devices (root on Linux with loop-control). */
  const loopDevicesUsable = process.platform === 'linux' && process.getuid?.() === 0 && fs.existsSync('/dev/loop-control');

  const made: string[] = [];
  afterEach(() => {
    for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  });
  const folder = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'otm-volume-'));
    made.push(dir);
    return dir;
  };

  it('keeps the data on the machine when the folder already holds some, running nothing', () => {
    const home = folder();
    fs.mkdirSync(path.join(home, 'data'));
    fs.writeFileSync(path.join(home, 'data', 'status'), '');
    const commands: string[] = [];
    const state = ensureVolume({ dir: path.join(home, 'data'), image: path.join(home, 'volume.img'), sizeGiB: 1 }, (command, args) => {
      commands.push([command, ...args].join(' '));
      return { ok: true, out: '' };
    });
    expect(state.mounted).toBe(false);
    if (loopDevicesUsable) {
      expect(state).toMatchObject({ reason: expect.stringMatching(/already holds data/) });
    }
    expect(commands.filter((command) => /^(losetup|mount|mkfs)/.test(command))).toEqual([]);
    expect(fs.existsSync(path.join(home, 'volume.img'))).toBe(false);
  });

  /** A new volume made in a fresh folder, the commands answered as given (the loop device is /dev/loop9). */
  const makeVolume = (mount: { ok: boolean; out: string }) => {
    const home = folder();
    const commands: string[] = [];
    const state = ensureVolume({ dir: path.join(home, 'data'), image: path.join(home, 'volume.img'), sizeGiB: 1 }, (command, args) => {
      commands.push([command, ...args].join(' '));
      if (command === 'losetup' && args[0] === '--find') return { ok: true, out: '/dev/loop9' };
      if (command === 'mount') return mount;
      return { ok: true, out: '' };
    });
    return { home, commands, state };
  };

  it('gives the device back when the mount fails, and says why', () => {
    if (!loopDevicesUsable) return;
    const { home, commands, state } = makeVolume({ ok: false, out: 'mount: permission denied' });
    expect(state).toEqual({ mounted: false, reason: 'mount failed: mount: permission denied' });
    expect(commands).toContain('losetup -d /dev/loop9');
    // The image was made sparse, at its full size, and formatted.
    expect(fs.statSync(path.join(home, 'volume.img')).size).toBe(1024 ** 3);
    expect(commands.some((command) => command.startsWith('mkfs.ext4 -q -F'))).toBe(true);
  });

  it('mounts with online discard, so that the space of deleted parts goes back to the machine at once', () => {
    if (!loopDevicesUsable) return;
    const { home, commands, state } = makeVolume({ ok: true, out: '' });
    expect(state).toEqual({ mounted: true, device: '/dev/loop9' });
    expect(commands).toContain(`mount -t ext4 -o discard /dev/loop9 ${path.join(home, 'data')}`);
  });

  it('leaves a folder that is not its mount alone, but lets a device left attached to the image go', () => {
    const home = folder();
    fs.mkdirSync(path.join(home, 'data'));
    const commands: string[] = [];
    const released = releaseVolume({ dir: path.join(home, 'data'), image: path.join(home, 'volume.img') }, (command, args) => {
      commands.push([command, ...args].join(' '));
      if (command === 'losetup' && args[0] === '-j') return { ok: true, out: `/dev/loop7: [65024]:12 (${path.join(home, 'volume.img')})` };
      return { ok: true, out: '' };
    });
    expect(released).toBe(true);
    expect(commands).toEqual([`losetup -j ${path.join(home, 'volume.img')}`, 'losetup -d /dev/loop7']);
  });
});
