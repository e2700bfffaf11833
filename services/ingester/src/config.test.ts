import { describe, expect, it } from 'vitest';
import { loadIngesterConfig, loadsQuerySettings } from './config.js';

describe("the loads' query settings", () => {
  it("by default feed the views in parallel and yield to the analytics API's queries (priority 2 after its 1)", () => {
    expect(loadsQuerySettings(loadIngesterConfig({}))).toEqual({ parallel_view_processing: 1, priority: 2 });
  });

  it('carry no priority at 0, and no parallel views when they are turned off', () => {
    expect(loadsQuerySettings(loadIngesterConfig({ INGEST_CLICKHOUSE_PRIORITY: '0', INGEST_PARALLEL_VIEWS: 'false' }))).toEqual({});
    expect(loadsQuerySettings(loadIngesterConfig({ INGEST_CLICKHOUSE_PRIORITY: '5' }))).toEqual({
      parallel_view_processing: 1,
      priority: 5,
    });
  });
});
