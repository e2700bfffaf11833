// Which rollup answers a query: the range is cut into pieces that cover it exactly
// (no gap, no overlap, each aligned to its table's rows), and each kind of query goes
// to the table the plan promises.
import { describe, expect, it } from 'vitest';
import { cover, planQuery, type Piece } from './rollup-plan.js';
import type { RollupMigration } from '@otm/shared/rollups/views';

const LEVELS = [
  { seconds: 86_400, table: 'day', time: 'day' },
  { seconds: 3600, table: 'hour', time: 'hour' },
  { seconds: 60, table: 'minute', time: 'minute' },
];

function expectExactCover(pieces: Piece[], fromS: number, toS: number) {
  const sorted = [...pieces].sort((a, b) => a.fromS - b.fromS);
  let at = fromS;
  for (const piece of sorted) {
    expect(piece.fromS).toBe(at);
    expect(piece.toS).toBeGreaterThan(piece.fromS);
    const seconds = LEVELS.find((level) => level.table === piece.table)!.seconds;
    expect(piece.fromS % seconds, `${piece.table} start aligned`).toBe(0);
    expect(piece.toS % seconds, `${piece.table} end aligned`).toBe(0);
    at = piece.toS;
  }
  expect(at).toBe(toS);
}

describe('cover', () => {
  it('30 days from mid-afternoon: whole days, the hours around them, the minutes at the edges', () => {
    const fromS = Date.UTC(2026, 9, 26, 14, 37) / 1000;
    const toS = Date.UTC(2026, 10, 25, 9, 13) / 1000;
    const pieces = cover(fromS, toS, LEVELS);
    expectExactCover(pieces, fromS, toS);
    const of = (table: string) => pieces.filter((piece) => piece.table === table);
    expect(of('day')).toEqual([{ table: 'day', time: 'day', fromS: Date.UTC(2026, 9, 27) / 1000, toS: Date.UTC(2026, 10, 25) / 1000 }]);
    // 9 hours before the first whole day (15:00-24:00), 9 after the last (00:00-09:00).
    expect(of('hour').reduce((sum, piece) => sum + (piece.toS - piece.fromS) / 3600, 0)).toBe(18);
    // 23 minutes to 15:00, 13 minutes from 09:00.
    expect(of('minute').reduce((sum, piece) => sum + (piece.toS - piece.fromS) / 60, 0)).toBe(36);
  });

  it('covers every range exactly, whatever its ends (random ranges up to 40 days)', () => {
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 500; i++) {
      const fromS = 1_760_000_040 + Math.floor(random() * 86_400 * 60) * 60;
      const toS = fromS + 60 * Math.floor(random() * 60 * 24 * 40 + 1);
      expectExactCover(cover(fromS, toS, LEVELS), fromS, toS);
    }
  });

  it('days the day level does not hold are read from their hours, and every range is still covered exactly', () => {
    const fromS = Date.UTC(2026, 9, 26, 14, 37) / 1000;
    const toS = Date.UTC(2026, 10, 25, 9, 13) / 1000;
    // Built: every day but the 1st and 2nd of November and the last two days of the range.
    const missing = new Set(
      [Date.UTC(2026, 10, 1), Date.UTC(2026, 10, 2), Date.UTC(2026, 10, 23), Date.UTC(2026, 10, 24)].map((ms) => ms / 1000),
    );
    const levels = LEVELS.map((level) => (level.table === 'day' ? { ...level, holds: (dayS: number) => !missing.has(dayS) } : level));
    const pieces = cover(fromS, toS, levels);
    expectExactCover(pieces, fromS, toS);
    const of = (table: string) => pieces.filter((piece) => piece.table === table).map((piece) => [piece.fromS, piece.toS]);
    expect(of('day')).toEqual([
      [Date.UTC(2026, 9, 27) / 1000, Date.UTC(2026, 10, 1) / 1000],
      [Date.UTC(2026, 10, 3) / 1000, Date.UTC(2026, 10, 23) / 1000],
    ]);
    // The two missing days in November, and the last two joined with the hours after them.
    expect(of('hour')).toEqual([
      [Date.UTC(2026, 9, 26, 15) / 1000, Date.UTC(2026, 9, 27) / 1000],
      [Date.UTC(2026, 10, 1) / 1000, Date.UTC(2026, 10, 3) / 1000],
      [Date.UTC(2026, 10, 23) / 1000, Date.UTC(2026, 10, 25, 9) / 1000],
    ]);
    let seed = 11;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 300; i++) {
      const from = 1_760_000_040 + Math.floor(random() * 86_400 * 60) * 60;
      const to = from + 60 * Math.floor(random() * 60 * 24 * 40 + 1);
      const holds = (dayS: number) => Math.floor(dayS / 86_400) % 3 !== 0;
      expectExactCover(
        cover(
          from,
          to,
          LEVELS.map((level) => (level.table === 'day' ? { ...level, holds } : level)),
        ),
        from,
        to,
      );
    }
  });

  it('an empty range has no pieces; a range inside one hour is minutes only', () => {
    expect(cover(600, 600, LEVELS)).toEqual([]);
    expect(cover(3600 + 60, 3600 + 600, LEVELS)).toEqual([{ table: 'minute', time: 'minute', fromS: 3660, toS: 4200 }]);
  });
});

describe('planQuery', () => {
  const BOTH: ReadonlySet<RollupMigration> = new Set(['0008', '0009', '0010', '0011']);
  const ONLY_0008: ReadonlySet<RollupMigration> = new Set(['0008']);
  const NONE: ReadonlySet<RollupMigration> = new Set();
  const base = { route: 'usage' as const, bucketSeconds: 0, dimensions: [], oneUser: false, fromS: 0, toS: 30 * 86_400, backfilled: BOTH };
  const tables = (input: Parameters<typeof planQuery>[0]) => {
    const { plan } = planQuery(input);
    return plan.kind === 'rollups' || plan.kind === 'histograms' ? [...new Set(plan.pieces.map((piece) => piece.table))] : plan.kind;
  };

  it('reads usage_rollup_minute until the backfill is done', () => {
    expect(tables({ ...base, backfilled: NONE })).toBe('legacy');
    expect(tables({ ...base, route: 'errors', backfilled: NONE })).toBe('legacy');
  });

  it('days when the buckets allow them, hours otherwise, the key tables when the key is asked for', () => {
    expect(tables({ ...base, fromS: 1800, toS: 30 * 86_400 + 1800 })).toEqual([
      'usage_rollup_by_day',
      'usage_rollup_by_hour',
      'usage_rollup_by_minute',
    ]);
    expect(tables({ ...base, bucketSeconds: 3600, fromS: 1800, toS: 2 * 86_400 })).toEqual([
      'usage_rollup_by_hour',
      'usage_rollup_by_minute',
    ]);
    expect(tables({ ...base, bucketSeconds: 60, toS: 86_400 })).toEqual(['usage_rollup_by_minute']);
    expect(tables({ ...base, dimensions: ['keyId', 'model'], fromS: 1800, toS: 30 * 86_400 + 1800 })).toEqual([
      'usage_rollup_key_by_day',
      'usage_rollup_key_by_hour',
      'usage_rollup_key_by_minute',
    ]);
    expect(tables({ ...base, route: 'latency', dimensions: ['model'], toS: 86_400 * 7 })).toEqual(['usage_latency_hist_by_day']);
  });

  it('usage by key alone (with the environment or the user type) reads the key totals once their backfill is done', () => {
    const keyed = { ...base, dimensions: ['keyId'], fromS: 1800, toS: 30 * 86_400 + 1800 };
    const totals = ['usage_rollup_key_totals_by_day', 'usage_rollup_key_totals_by_hour', 'usage_rollup_key_totals_by_minute'];
    expect(tables(keyed)).toEqual(totals);
    expect(tables({ ...keyed, dimensions: ['keyId', 'environment', 'userType'] })).toEqual(totals);
    expect(tables({ ...keyed, bucketSeconds: 3600 })).toEqual(totals.slice(1));
    // With the provider or the model, before 0011's backfill, or latency: the keyed rollups of 0008.
    const full = ['usage_rollup_key_by_day', 'usage_rollup_key_by_hour', 'usage_rollup_key_by_minute'];
    expect(tables({ ...keyed, dimensions: ['keyId', 'provider'] })).toEqual(full);
    expect(tables({ ...keyed, backfilled: new Set<RollupMigration>(['0008', '0009', '0010']) })).toEqual(full);
    expect(tables({ ...keyed, route: 'latency', bucketSeconds: 3600, fromS: 0, toS: 86_400 })).toEqual(['usage_rollup_key_by_hour']);
  });

  it('hourly latency reads the latency histograms when they hold every dimension asked for', () => {
    const hourly = { ...base, route: 'latency' as const, bucketSeconds: 3600, fromS: 1800, toS: 7 * 86_400 };
    expect(planQuery(hourly).plan.kind).toBe('histograms');
    expect(tables(hourly)).toEqual(['usage_latency_hist_total_by_hour']);
    expect(tables({ ...hourly, dimensions: ['environment'] })).toEqual(['usage_latency_hist_total_by_hour']);
    expect(tables({ ...hourly, dimensions: ['provider', 'model'] })).toEqual(['usage_latency_hist_by_hour']);
    expect(tables({ ...hourly, dimensions: ['model', 'environment'] })).toEqual(['usage_latency_hist_env_by_hour']);
    // User type and key: the usage rollups' t-digest states.
    expect(planQuery({ ...hourly, dimensions: ['model', 'userType'] }).plan.kind).toBe('rollups');
    expect(tables({ ...hourly, dimensions: ['model', 'userType'] })).toEqual(['usage_rollup_by_hour']);
    expect(tables({ ...hourly, dimensions: ['keyId'] })).toEqual(['usage_rollup_key_by_hour']);
    // Usage never reads them (they hold no tokens, no cost), and keeps its minutes at the edges.
    expect(tables({ ...hourly, route: 'usage', dimensions: ['model'] })).toEqual(['usage_rollup_by_hour', 'usage_rollup_by_minute']);
  });

  it('daily latency reads the latency histograms per day when they hold every dimension asked for', () => {
    const daily = { ...base, route: 'latency' as const, bucketSeconds: 86_400, fromS: 0, toS: 30 * 86_400 };
    expect(tables(daily)).toEqual(['usage_latency_hist_total_by_day']);
    expect(tables({ ...daily, dimensions: ['environment'] })).toEqual(['usage_latency_hist_total_by_day']);
    expect(tables({ ...daily, dimensions: ['provider', 'model'] })).toEqual(['usage_latency_hist_by_day']);
    expect(tables({ ...daily, dimensions: ['model', 'environment'] })).toEqual(['usage_latency_hist_env_by_day']);
    expect(tables({ ...daily, dimensions: ['model', 'userType'] })).toEqual(['usage_rollup_by_day']);
    expect(tables({ ...daily, dimensions: ['keyId'] })).toEqual(['usage_rollup_key_by_day']);
    // Over a week without buckets by model: its days from the daily histogram, the hours around them from the hourly one.
    expect(tables({ ...daily, bucketSeconds: 0, dimensions: ['model'], fromS: 1800, toS: 7 * 86_400 + 1800 })).toEqual([
      'usage_latency_hist_by_day',
      'usage_latency_hist_by_hour',
    ]);
    // Usage never reads them.
    expect(tables({ ...daily, route: 'usage', dimensions: ['model'] })).toEqual(['usage_rollup_by_day']);
  });

  it('latency reads only t-digest states when minutes are needed, or until the histograms are backfilled', () => {
    // Under a day without buckets, not on whole hours: days, hours and minutes of the usage rollups, none of the histograms.
    const short = planQuery({ ...base, route: 'latency', dimensions: ['model'], fromS: 1800, toS: 7200 + 1800 });
    expect(short.plan).toEqual({
      kind: 'rollups',
      pieces: [
        { table: 'usage_rollup_by_hour', time: 'hour', fromS: 3600, toS: 7200 },
        { table: 'usage_rollup_by_minute', time: 'minute', fromS: 1800, toS: 3600 },
        { table: 'usage_rollup_by_minute', time: 'minute', fromS: 7200, toS: 9000 },
      ],
    });
    expect(tables({ ...base, route: 'latency', bucketSeconds: 60, fromS: 0, toS: 7200 })).toEqual(['usage_rollup_by_minute']);
    // Before migration 0010's backfill: the usage rollups.
    const old = { ...base, route: 'latency' as const, backfilled: ONLY_0008 };
    expect(tables({ ...old, bucketSeconds: 3600, fromS: 0, toS: 86_400 })).toEqual(['usage_rollup_by_hour']);
    expect(tables({ ...old, bucketSeconds: 86_400, dimensions: ['model'] })).toEqual(['usage_rollup_by_day']);
    expect(tables({ ...old, bucketSeconds: 0, fromS: 1800, toS: 7 * 86_400 + 1800 })).toEqual([
      'usage_rollup_by_day',
      'usage_rollup_by_hour',
    ]);
  });

  it('latency is counted in whole buckets: the range widened to hours or days, never cut into minutes', () => {
    const at = (h: number, m = 0) => h * 3600 + m * 60;
    // Hourly from 00:30 to 23:10 of day 2: 00:00 to 24:00, hours only.
    const hourly = planQuery({ ...base, route: 'latency', bucketSeconds: 3600, fromS: 86_400 + at(0, 30), toS: 86_400 + at(23, 10) });
    expect([hourly.fromS, hourly.toS]).toEqual([86_400, 2 * 86_400]);
    expect(hourly.plan).toEqual({
      kind: 'histograms',
      pieces: [{ table: 'usage_latency_hist_total_by_hour', time: 'hour', fromS: 86_400, toS: 2 * 86_400 }],
    });
    // Daily over 30 days from mid-afternoon: whole days only.
    const daily = planQuery({ ...base, route: 'latency', bucketSeconds: 86_400, fromS: at(14, 37), toS: 30 * 86_400 + at(9, 13) });
    expect([daily.fromS, daily.toS]).toEqual([0, 31 * 86_400]);
    expect(tables({ ...base, route: 'latency', bucketSeconds: 86_400, fromS: at(14, 37), toS: 30 * 86_400 + at(9, 13) })).toEqual([
      'usage_latency_hist_total_by_day',
    ]);
    // No buckets: whole hours once the range spans a day (days inside, hours around them) ...
    const week = planQuery({ ...base, route: 'latency', fromS: at(14, 37), toS: 7 * 86_400 + at(9, 13) });
    expect([week.fromS, week.toS]).toEqual([at(14), 7 * 86_400 + at(10)]);
    expect(tables({ ...base, route: 'latency', fromS: at(14, 37), toS: 7 * 86_400 + at(9, 13) })).toEqual([
      'usage_latency_hist_total_by_day',
      'usage_latency_hist_total_by_hour',
    ]);
    // ... and as asked when shorter, or with minute buckets.
    expect(planQuery({ ...base, route: 'latency', fromS: at(1, 17), toS: at(7, 43) })).toMatchObject({ fromS: at(1, 17), toS: at(7, 43) });
    expect(planQuery({ ...base, route: 'latency', bucketSeconds: 60, fromS: at(1, 17), toS: at(30, 43) })).toMatchObject({
      fromS: at(1, 17),
      toS: at(30, 43),
    });
    // Usage, errors and one user's latency keep their range.
    for (const input of [
      { ...base, route: 'usage' as const, bucketSeconds: 3600, fromS: at(0, 30), toS: at(23, 10) },
      { ...base, route: 'errors' as const, bucketSeconds: 3600, fromS: at(0, 30), toS: at(23, 10) },
      { ...base, route: 'latency' as const, oneUser: true, bucketSeconds: 3600, fromS: at(0, 30), toS: at(23, 10) },
    ]) {
      expect(planQuery(input)).toMatchObject({ fromS: at(0, 30), toS: at(23, 10) });
    }
    // Before the backfill: usage_rollup_minute, as asked.
    expect(
      planQuery({ ...base, route: 'latency', bucketSeconds: 3600, fromS: at(0, 30), toS: at(23, 10), backfilled: NONE }),
    ).toMatchObject({
      fromS: at(0, 30),
      toS: at(23, 10),
    });
  });

  it("one user's queries read that user's records; top users read the per-user days, widened to whole days", () => {
    expect(tables({ ...base, oneUser: true, dimensions: ['userId', 'model'] })).toBe('byUser');
    const top = planQuery({ ...base, dimensions: ['userId'], fromS: 86_400 + 600, toS: 3 * 86_400 + 60 });
    expect(top.plan).toEqual({
      kind: 'rollups',
      pieces: [{ table: 'usage_rollup_user_by_day', time: 'day', fromS: 86_400, toS: 4 * 86_400 }],
    });
    expect([top.fromS, top.toS]).toEqual([86_400, 4 * 86_400]);
    // By user and model, or per hour, or latency: every record of the range, exactly.
    expect(tables({ ...base, dimensions: ['userId', 'model'] })).toBe('byUser');
    expect(tables({ ...base, dimensions: ['userId'], bucketSeconds: 3600 })).toBe('byUser');
    expect(tables({ ...base, route: 'latency', dimensions: ['userId'] })).toBe('byUser');
  });

  it('top users without buckets read the weeks the job built and the per-user days around them', () => {
    const s = (iso: string) => Date.parse(iso) / 1000;
    const range = { fromS: s('2026-11-06T10:00:00Z'), toS: s('2026-12-06T10:00:00Z') };
    const built = new Set([s('2026-11-08T00:00:00Z'), s('2026-11-22T00:00:00Z'), s('2026-12-01T00:00:00Z')]);
    const top = planQuery({ ...base, dimensions: ['userId', 'environment'], ...range, weekBuilt: (week) => built.has(week) });
    // 11-15 to 11-22 is not built (changed since): its days are read; 12-01 to 12-08 runs past the range.
    expect(top.plan).toEqual({
      kind: 'rollups',
      pieces: [
        { table: 'usage_rollup_user_by_day', time: 'day', fromS: s('2026-11-06T00:00:00Z'), toS: s('2026-11-08T00:00:00Z') },
        { table: 'usage_rollup_user_by_day', time: 'day', fromS: s('2026-11-15T00:00:00Z'), toS: s('2026-11-22T00:00:00Z') },
        { table: 'usage_rollup_user_by_day', time: 'day', fromS: s('2026-12-01T00:00:00Z'), toS: s('2026-12-07T00:00:00Z') },
        { table: 'usage_rollup_user_by_week', time: 'week', fromS: s('2026-11-08T00:00:00Z'), toS: s('2026-11-15T00:00:00Z') },
        { table: 'usage_rollup_user_by_week', time: 'week', fromS: s('2026-11-22T00:00:00Z'), toS: s('2026-12-01T00:00:00Z') },
      ],
    });
    expect([top.fromS, top.toS]).toEqual([s('2026-11-06T00:00:00Z'), s('2026-12-07T00:00:00Z')]);
    // Daily buckets, or no week built: the days alone.
    const daily = planQuery({ ...base, dimensions: ['userId'], bucketSeconds: 86_400, ...range, weekBuilt: () => true });
    expect(daily.plan).toEqual({
      kind: 'rollups',
      pieces: [{ table: 'usage_rollup_user_by_day', time: 'day', fromS: top.fromS, toS: top.toS }],
    });
    const none = planQuery({ ...base, dimensions: ['userId'], ...range, weekBuilt: () => false });
    expect(none.plan).toEqual(daily.plan);
  });

  it('errors read the days, the hours around them and the minutes at the edges', () => {
    expect(tables({ ...base, route: 'errors', fromS: 1800, toS: 86_400 })).toEqual(['usage_errors_by_hour', 'usage_errors_minute']);
    // Whole days from usage_errors_by_day once the backfill of migration 0009 is done.
    expect(tables({ ...base, route: 'errors', fromS: 1800, toS: 30 * 86_400 + 1800 })).toEqual([
      'usage_errors_by_day',
      'usage_errors_by_hour',
      'usage_errors_minute',
    ]);
    expect(tables({ ...base, route: 'errors', fromS: 1800, toS: 30 * 86_400 + 1800, backfilled: ONLY_0008 })).toEqual([
      'usage_errors_by_hour',
      'usage_errors_minute',
    ]);
    expect(tables({ ...base, route: 'errors', bucketSeconds: 3600, fromS: 0, toS: 30 * 86_400 })).toEqual(['usage_errors_by_hour']);
  });
});
