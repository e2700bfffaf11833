// The decisions of loading without Redis (without-redis.ts): which failures it goes on
// without, how often it asks Redis again, and the bound on the marks it keeps.
import { describe, expect, it } from 'vitest';
import { createLogger } from '@otm/shared/logger';
import { createIngesterMetrics } from './metrics.js';
import type { Deduplicator, Erasures, SeenMark } from './ports.js';
import { DedupeWithoutRedis, ErasuresWithoutRedis, PENDING_MARKS_PER_WRITE, REDIS_PROBE_MS, RedisOutage } from './without-redis.js';

const logger = createLogger('ingester-test', 'silent');
const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
const full = () => new Error("OOM command not allowed when used memory > 'maxmemory'.");

function outage() {
  const metrics = createIngesterMetrics();
  const clock = { now: 0 };
  return { metrics, clock, outage: new RedisOutage(metrics, logger, () => clock.now) };
}

describe('RedisOutage', () => {
  it('goes without Redis when it cannot be reached, asks it again after REDIS_PROBE_MS, and is back when it answers', async () => {
    const { metrics, clock, outage: state } = outage();
    expect(state.shouldAsk()).toBe(true);
    expect(state.failed(refused(), 'dedupe check')).toBe(true);
    expect(state.degraded).toBe(true);
    expect((await metrics.redisDegraded.get()).values[0]?.value).toBe(1);
    expect(state.shouldAsk()).toBe(false);
    clock.now += REDIS_PROBE_MS;
    expect(state.shouldAsk()).toBe(true);
    state.answered();
    expect(state.degraded).toBe(false);
    expect((await metrics.redisDegraded.get()).values[0]?.value).toBe(0);
  });

  it('a Redis that answers with an error (full) is not gone without: the error is retried', () => {
    const { outage: state } = outage();
    expect(state.failed(full(), 'mark seen')).toBe(false);
    expect(state.degraded).toBe(false);
    expect(state.failed(new Error('Command timed out'), 'dedupe check')).toBe(true);
  });
});

describe('DedupeWithoutRedis', () => {
  const failing: Deduplicator = { filterSeen: () => Promise.reject(refused()), markSeen: () => Promise.reject(refused()) };

  it("without Redis only the unit's own repeats are known: the first of each key is fresh, a repeat with another record a collision", async () => {
    const { metrics, outage: state } = outage();
    const dedupe = new DedupeWithoutRedis(failing, state, metrics, 10);
    const items = [
      { key: 'a', digest: '1' },
      { key: 'a', digest: '1' },
      { key: 'b', digest: '2' },
      { key: 'b', digest: '3' },
    ];
    const seen = await dedupe.filterSeen(
      items,
      (item) => item.key,
      (item) => item.digest,
    );
    expect(seen.fresh).toEqual([items[0], items[2]]);
    expect(seen.duplicates).toBe(1);
    expect(seen.collisions).toEqual([items[3]]);
  });

  it('keeps at most the bound of marks, the newest, each key once, and counts those it lets go', async () => {
    const { metrics, outage: state } = outage();
    const dedupe = new DedupeWithoutRedis(failing, state, metrics, 3);
    const marks = (keys: string[]): SeenMark[] => keys.map((eventKey) => ({ eventKey, digest: `d-${eventKey}` }));
    await dedupe.markSeen(marks(['a', 'b']));
    await dedupe.markSeen(marks(['b', 'c', 'd']));
    expect((await metrics.pendingMarks.get()).values[0]?.value).toBe(3);
    expect((await metrics.droppedMarks.get()).values[0]?.value).toBe(1);
  });

  it("once Redis answers, the outage's marks go with the units' own a slice at a time, the oldest first, each once", async () => {
    const { metrics, clock, outage: state } = outage();
    let up = false;
    const written: SeenMark[][] = [];
    const flaky: Deduplicator = {
      filterSeen: () => Promise.reject(refused()),
      markSeen: async (marks) => {
        if (!up) throw refused();
        written.push([...marks]);
      },
    };
    const dedupe = new DedupeWithoutRedis(flaky, state, metrics, 100_000);
    const outageMarks = Array.from({ length: 25_000 }, (_, index) => ({ eventKey: `k${index}`, digest: `d${index}` }));
    await dedupe.markSeen(outageMarks);
    expect((await metrics.pendingMarks.get()).values[0]?.value).toBe(25_000);
    up = true;
    clock.now += REDIS_PROBE_MS;
    for (let unit = 0; unit < 4; unit++) await dedupe.markSeen([{ eventKey: `own${unit}`, digest: 'o' }]);
    expect(written.map((marks) => marks.length)).toEqual([PENDING_MARKS_PER_WRITE + 1, PENDING_MARKS_PER_WRITE + 1, 5_001, 1]);
    expect(written[0]![0]).toEqual({ eventKey: 'k0', digest: 'd0' });
    const keys = written.flat().map((mark) => mark.eventKey);
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys.filter((key) => key.startsWith('k'))).toHaveLength(25_000);
    expect((await metrics.pendingMarks.get()).values[0]?.value).toBe(0);
  });

  it('a failure that is not unreachability is thrown to be retried', async () => {
    const { metrics, outage: state } = outage();
    const dedupe = new DedupeWithoutRedis(
      { filterSeen: () => Promise.reject(full()), markSeen: () => Promise.reject(full()) },
      state,
      metrics,
      3,
    );
    await expect(dedupe.markSeen([{ eventKey: 'a', digest: 'd' }])).rejects.toThrow(/^OOM/);
  });
});

describe('ErasuresWithoutRedis', () => {
  it('takes the lease from the ledger without Redis and ends it there; a ledger failure names ClickHouse', async () => {
    const { metrics, outage: state } = outage();
    const ended: string[] = [];
    const ledger: Erasures = {
      beginInsert: async () => ({ lease: 'l1', dayWatermarkMs: 0, erasedAt: new Map(), fenced: [] }),
      markDays: async () => undefined,
      endInsert: async (lease) => void ended.push(lease),
    };
    const redis: Erasures = {
      beginInsert: () => Promise.reject(refused()),
      endInsert: () => Promise.reject(refused()),
      markDays: () => Promise.reject(refused()),
    };
    const erasures = new ErasuresWithoutRedis(redis, ledger, state, metrics);
    const check = await erasures.beginInsert([{ environment: 'prod', userId: 'u' }]);
    await erasures.endInsert(check.lease);
    expect(ended).toEqual(['l1']);

    const broken = new ErasuresWithoutRedis(
      redis,
      { ...ledger, beginInsert: () => Promise.reject(new Error('socket hang up')) },
      state,
      metrics,
    );
    await expect(broken.beginInsert([])).rejects.toMatchObject({ dependency: 'clickhouse (erasure lease)' });
  });
});
