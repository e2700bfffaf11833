import { describe, expect, it } from 'vitest';
import { loopDevicesUnder, mountsUnder } from './stale-mounts.js';

describe('mountsUnder', () => {
  const mountinfo = [
    '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
    '120 22 7:0 / /srv/a/.stack/clickhouse/data rw,relatime shared:60 - ext4 /dev/loop0 rw',
    '121 22 0:55 / /srv/a/.stack/docker/data/overlay2/abc/merged rw - overlay overlay rw',
    '122 22 0:56 / /srv/a/.stack/docker/exec/netns/x rw - nsfs nsfs rw',
    '123 22 7:1 / /srv/a/.stackother/data rw - ext4 /dev/loop1 rw',
    '124 22 7:2 / /srv/b\\040c/.stack/clickhouse/data rw - ext4 /dev/loop2 rw',
  ].join('\n');

  it('lists the mount points at or under a folder, deepest first, and not a sibling sharing its prefix', () => {
    expect(mountsUnder('/srv/a/.stack', mountinfo)).toEqual([
      '/srv/a/.stack/docker/data/overlay2/abc/merged',
      '/srv/a/.stack/docker/exec/netns/x',
      '/srv/a/.stack/clickhouse/data',
    ]);
  });

  it('decodes the octal escapes of mountinfo (a space in a path)', () => {
    expect(mountsUnder('/srv/b c/.stack', mountinfo)).toEqual(['/srv/b c/.stack/clickhouse/data']);
  });
});

describe('loopDevicesUnder', () => {
  it('finds loop devices by backing file, the deleted ones too', () => {
    const listing = [
      '/dev/loop0 /srv/a/.stack/clickhouse/volume.img',
      '/dev/loop3 /srv/a/.stack/secure/clickhouse/volume.img (deleted)',
      '/dev/loop1 /srv/a/.stackother/volume.img',
      '/dev/loop2 /var/lib/snapd/snaps/core.snap',
    ].join('\n');
    expect(loopDevicesUnder('/srv/a/.stack', listing)).toEqual(['/dev/loop0', '/dev/loop3']);
  });
});
