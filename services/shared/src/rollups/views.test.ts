// The rebuild SQL is the views' own SELECT from the migrations, with the job's condition.
import { describe, expect, it } from 'vitest';
import { aggregateViews, derivedFrom, derivedRollupSql, rebuildRollupSql, rollupsFinestFirst, selectItems } from './views.js';

describe('rebuildRollupSql', () => {
  it("runs the usage rollup view's SELECT with the condition before its GROUP BY", () => {
    const sql = rebuildRollupSql('usage_rollup_minute_mv', "provider = 'openai'");
    expect(sql).toMatch(/^INSERT INTO usage_rollup_minute SELECT\s+toStartOfMinute\(event_time\) AS minute,/);
    expect(sql).toContain('sumState(ifNull(cost_usd, toFloat64(0))) AS cost_usd');
    expect(sql).toMatch(
      /FROM usage_events WHERE \(provider = 'openai'\) GROUP BY minute, environment, provider, model_id, user_type, user_id, api_key_id$/,
    );
  });

  it("keeps the errors view's own condition and adds the job's", () => {
    expect(rebuildRollupSql('usage_errors_minute_mv', 'x = 1')).toMatch(
      /^INSERT INTO usage_errors_minute SELECT[\s\S]+FROM usage_events WHERE \(status = 'error'\) AND \(x = 1\) GROUP BY minute, environment, provider, model_id, error_code, error_message$/,
    );
  });
});

describe('aggregateViews', () => {
  it('reads each view on usage_events with its groups, their expressions and its count column', () => {
    const views = aggregateViews();
    // Every view of migrations 0002 and 0007 to 0011 but the copy ordered by user and the retired
    // usage_rollup_minute_mv, and not the t-digest latency views of 0008 and 0009 (0010 drops them).
    expect(views.map((view) => view.view).sort()).toEqual(
      [
        'usage_errors_by_hour_mv',
        'usage_errors_by_day_mv',
        'usage_errors_minute_mv',
        'usage_latency_hist_total_by_hour_mv',
        'usage_latency_hist_total_by_day_mv',
        'usage_latency_hist_by_hour_mv',
        'usage_latency_hist_by_day_mv',
        'usage_latency_hist_env_by_hour_mv',
        'usage_latency_hist_env_by_day_mv',
        'usage_ttft_hist_total_by_hour_mv',
        'usage_ttft_hist_total_by_day_mv',
        'usage_ttft_hist_by_hour_mv',
        'usage_ttft_hist_by_day_mv',
        'usage_ttft_hist_env_by_hour_mv',
        'usage_ttft_hist_env_by_day_mv',
        'usage_rollup_by_day_mv',
        'usage_rollup_by_hour_mv',
        'usage_rollup_by_minute_mv',
        'usage_rollup_key_by_day_mv',
        'usage_rollup_key_by_hour_mv',
        'usage_rollup_key_by_minute_mv',
        'usage_rollup_key_totals_by_minute_mv',
        'usage_rollup_key_totals_by_hour_mv',
        'usage_rollup_key_totals_by_day_mv',
        'usage_rollup_user_by_day_mv',
      ].sort(),
    );
    const errors = views.find((view) => view.view === 'usage_errors_minute_mv')!;
    expect(errors.where).toBe("status = 'error'");
    expect(errors.groups).toEqual([
      { name: 'minute', expression: 'toStartOfMinute(event_time)' },
      { name: 'environment', expression: 'environment' },
      { name: 'provider', expression: 'provider' },
      { name: 'model_id', expression: 'model_id' },
      { name: 'error_code', expression: "ifNull(error_code, '')" },
      { name: 'error_message', expression: "substring(ifNull(error_message, ''), 1, 200)" },
    ]);
    expect(errors.count).toEqual({ column: 'errors', merge: 'countMerge' });
    const byUser = views.find((view) => view.view === 'usage_rollup_user_by_day_mv')!;
    expect(byUser.groups[0]).toEqual({ name: 'day', expression: 'toDateTime(intDiv(toUInt32(event_time), 86400) * 86400)' });
    expect(byUser.count).toEqual({ column: 'requests', merge: 'sum' });
  });

  it('splits a SELECT list at top-level commas only, outside quotes, and reads aliases', () => {
    expect(
      selectItems(
        "SELECT a, f(b, ', x') AS c, quantilesIfState(0.5, 0.9)(x, y) AS q, CAST(z AS String), 'it\\'s, here' AS s FROM usage_events",
      ),
    ).toEqual([
      { name: 'a', expression: 'a' },
      { name: 'c', expression: "f(b, ', x')" },
      { name: 'q', expression: 'quantilesIfState(0.5, 0.9)(x, y)' },
      { name: 'CAST(z AS String)', expression: 'CAST(z AS String)' },
      { name: 's', expression: "'it\\'s, here'" },
    ]);
  });

  it('merges a rollup from the finer one holding its groups, finest first, and from usage_events otherwise', () => {
    const source = (view: Parameters<typeof derivedFrom>[0]) => derivedFrom(view);
    expect(source('usage_rollup_key_by_hour_mv')).toBeUndefined();
    expect(source('usage_rollup_by_minute_mv')).toBeUndefined();
    expect(source('usage_rollup_user_by_day_mv')).toBeUndefined();
    expect(source('usage_errors_by_hour_mv')).toBeUndefined();
    expect(source('usage_rollup_by_hour_mv')).toBe('usage_rollup_key_by_hour');
    expect(source('usage_latency_hist_env_by_hour_mv')).toBeUndefined();
    expect(source('usage_latency_hist_by_hour_mv')).toBe('usage_latency_hist_env_by_hour');
    expect(source('usage_latency_hist_total_by_hour_mv')).toBe('usage_latency_hist_env_by_hour');
    expect(source('usage_latency_hist_env_by_day_mv')).toBe('usage_latency_hist_env_by_hour');
    // Time to first token's buckets are not latency's.
    expect(source('usage_ttft_hist_env_by_hour_mv')).toBeUndefined();
    expect(source('usage_ttft_hist_by_hour_mv')).toBe('usage_ttft_hist_env_by_hour');
    expect(source('usage_rollup_key_by_day_mv')).toBe('usage_rollup_key_by_hour');
    expect(source('usage_rollup_by_day_mv')).toBe('usage_rollup_key_by_day');
    expect(source('usage_latency_hist_total_by_day_mv')).toBe('usage_latency_hist_env_by_day');
    expect(source('usage_errors_by_day_mv')).toBe('usage_errors_by_hour');
    // The key totals (0011) from the keyed rollups of the same time (more groups); their minutes from the records.
    expect(source('usage_rollup_key_totals_by_hour_mv')).toBe('usage_rollup_key_by_hour');
    expect(source('usage_rollup_key_totals_by_day_mv')).toBe('usage_rollup_key_by_day');
    expect(source('usage_rollup_key_totals_by_minute_mv')).toBeUndefined();
    // Each source comes before what is merged from it.
    const order: string[] = rollupsFinestFirst().map(({ table }) => table);
    for (const { view, table } of rollupsFinestFirst()) {
      const from = source(view);
      if (from) expect(order.indexOf(from), `${from} before ${table}`).toBeLessThan(order.indexOf(table));
    }
    // A day from hours: the hour's day is computed.
    expect(derivedRollupSql('usage_errors_by_day_mv', '(x)')).toMatch(
      /^INSERT INTO usage_errors_by_day SELECT toDateTime\(intDiv\(toUInt32\(hour\), 86400\) \* 86400\) AS day, environment, provider, model_id, error_code, error_message, countMergeState\(errors\) AS errors FROM usage_errors_by_hour WHERE \(toDateTime\(intDiv\(toUInt32\(hour\), 86400\) \* 86400\), environment, provider, model_id, error_code, error_message\) IN \(\(x\)\) GROUP BY day, environment, provider, model_id, error_code, error_message$/,
    );
    expect(derivedRollupSql('usage_latency_hist_total_by_day_mv', "(toDateTime(86400), 'prod', 130)")).toBe(
      'INSERT INTO usage_latency_hist_total_by_day SELECT day, environment, bucket, ' +
        'countMergeState(requests) AS requests, avgIfMergeState(tokens_per_sec) AS tokens_per_sec ' +
        "FROM usage_latency_hist_env_by_day WHERE (day, environment, bucket) IN ((toDateTime(86400), 'prod', 130)) " +
        'GROUP BY day, environment, bucket',
    );
  });
});
