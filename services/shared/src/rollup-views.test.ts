// The rebuild SQL is the views' own SELECT from the migrations, with the job's condition.
import { describe, expect, it } from 'vitest';
import { rebuildRollupSql } from './rollup-views.js';

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
