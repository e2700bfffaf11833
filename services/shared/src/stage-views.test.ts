import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { migrationsDir, splitStatements } from './migrate.js';
import { stageTables, stageViewStatement } from './stage-views.js';

const statements = fs
  .readdirSync(migrationsDir)
  .filter((file) => file.endsWith('.sql'))
  .sort()
  .flatMap((file) => splitStatements(fs.readFileSync(path.join(migrationsDir, file), 'utf8')));

describe('the views over the stages', () => {
  it('finds the four stages of the migrations (tables of engine Null)', () => {
    expect([...stageTables(statements)].sort()).toEqual([
      'usage_errors_stage',
      'usage_latency_hist_stage',
      'usage_rollup_stage',
      'usage_ttft_hist_stage',
    ]);
  });

  it('makes a view over a stage read the stage view on a server of the view-name form, and leaves every other statement', () => {
    const stages = stageTables(statements);
    const byHour = statements.findLast((statement) =>
      statement.startsWith('CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_by_hour_mv'),
    )!;
    expect(byHour).toMatch(/\nFROM usage_rollup_stage\n/);
    expect(stageViewStatement(byHour, 'target table', stages)).toBe(byHour);
    expect(stageViewStatement(byHour, 'view name', stages)).toBe(
      byHour.replace('FROM usage_rollup_stage\n', 'FROM usage_rollup_stage_mv\n'),
    );
    const stageView = statements.find((statement) => statement.startsWith('CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_stage_mv'))!;
    expect(stageViewStatement(stageView, 'view name', stages)).toBe(stageView);
    // Every rollup of a stage, in each form, reads exactly one source.
    const overStages = statements.filter((statement) => /\bFROM usage_\w+_stage\b/.test(statement));
    expect(overStages).toHaveLength(24);
    for (const statement of overStages) expect(stageViewStatement(statement, 'view name', stages)).toMatch(/\bFROM usage_\w+_stage_mv\n/);
  });
});
