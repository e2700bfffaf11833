// One migration statement against a runner that meets another applying it at the same
// time (migrate.ts, apply): what ClickHouse 18.16 answers then, from the concurrent
// runners of migrate.integration.test.ts.
import { describe, expect, it } from 'vitest';
import { apply } from './migrate.js';

const collision = new Error(
  "Code: 179, e.displayText() = DB::Exception: Different expressions with the same alias cache_reported_input_tokens_tmp:\nCAST(0, 'UInt64') AS cache_reported_input_tokens_tmp\nand\n0 AS cache_reported_input_tokens_tmp\n, e.what() = DB::Exception\n",
);
const exists = new Error(
  'Code: 44, e.displayText() = DB::Exception: Cannot add column cache_reported_input_tokens: column with this name already exists',
);

/** A client whose command answers with each of `answers` in turn (an Error is thrown). */
function runner(...answers: (Error | undefined)[]) {
  const queries: string[] = [];
  return {
    queries,
    command: async ({ query }: { query: string }) => {
      queries.push(query);
      const answer = answers.shift();
      if (answer) throw answer;
      return {} as never;
    },
  };
}

describe('apply (one migration statement)', () => {
  const statement = 'ALTER TABLE usage_events ADD COLUMN cache_reported_input_tokens UInt64 DEFAULT 0';

  it('asks again when 18.16 trips over the same column added meanwhile, then takes its "already exists"', async () => {
    const client = runner(collision, exists);
    const lines: string[] = [];
    await apply(client, '0007.sql', statement, (line) => lines.push(line), 0);
    expect(client.queries).toEqual([statement, statement]);
    expect(lines).toHaveLength(2);
  });

  it('gives up after three tries, and never retries another error', async () => {
    await expect(apply(runner(collision, collision, collision), 'f', statement, () => {}, 0)).rejects.toBe(collision);
    const other = new Error('Code: 62, e.displayText() = DB::Exception: Syntax error');
    const client = runner(other);
    await expect(apply(client, 'f', statement, () => {}, 0)).rejects.toBe(other);
    expect(client.queries).toHaveLength(1);
  });
});
