import { describe, expect, it } from 'vitest';
import { STALE_AFTER_MS, staleTestDatabases } from './stale-databases.js';
import { uniqueName } from '../../test/helpers/stack.js';

describe('staleTestDatabases', () => {
  const now = Date.UTC(2026, 10, 29, 12);
  const madeAt = (ms: number, prefix = 'ing_crash') => `${prefix}_${ms.toString(36)}_0123abcd`;

  it('names the test databases made more than a day ago, and only those', () => {
    const old = madeAt(now - STALE_AFTER_MS - 1);
    const recent = madeAt(now - 3_600_000, 'redis_cluster');
    expect(staleTestDatabases([old, recent, 'otm', 'default', 'system'], now)).toEqual([old]);
  });

  it('takes a shorter age (the bench drops those made more than two hours ago)', () => {
    const twoHours = 2 * 3_600_000;
    const older = madeAt(now - twoHours - 1);
    const younger = madeAt(now - twoHours + 60_000, 'canary');
    expect(staleTestDatabases([older, younger, 'otm'], now, twoHours)).toEqual([older]);
  });

  it('never names a database uniqueName did not make', () => {
    expect(staleTestDatabases(['otm_firstrun', 'bench_fresh_mx1e2h2d_2000', 'analytics_zzzzzzzzzz_0123abcd', 'x_1_0123abcd'], now)).toEqual(
      [],
    );
  });

  it('reads the names uniqueName makes', () => {
    const name = uniqueName('sdk');
    expect(staleTestDatabases([name], Date.now() + STALE_AFTER_MS + 1000)).toEqual([name]);
    expect(staleTestDatabases([name], Date.now())).toEqual([]);
  });
});
