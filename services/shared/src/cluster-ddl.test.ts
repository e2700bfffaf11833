import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { alteredTable, clusterStatements, recreateDistributed } from './cluster-ddl.js';
import { migrationsDir, splitStatements } from './migrate.js';

const target = { cluster: 'otm', database: 'otm' };

describe('clusterStatements', () => {
  it('makes a replicated local table and a Distributed table sharded by event_key', () => {
    const [local, distributed] = clusterStatements(
      'CREATE TABLE IF NOT EXISTS usage_io (event_key String, ingested_at DateTime) ENGINE = ReplacingMergeTree(ingested_at) ORDER BY event_key',
      target,
    );
    expect(local).toBe(
      "CREATE TABLE IF NOT EXISTS otm.usage_io_local ON CLUSTER otm (event_key String, ingested_at DateTime) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/otm/usage_io_local', '{replica}', ingested_at) ORDER BY event_key",
    );
    expect(distributed).toBe(
      'CREATE TABLE IF NOT EXISTS otm.usage_io ON CLUSTER otm AS otm.usage_io_local ENGINE = Distributed(otm, otm, usage_io_local, cityHash64(event_key))',
    );
  });

  it('shards a table without event_key at random, and keeps an engine without arguments', () => {
    const [local, distributed] = clusterStatements(
      'CREATE TABLE IF NOT EXISTS probes (probe_id String) ENGINE = MergeTree ORDER BY probe_id',
      target,
    );
    expect(local).toContain("ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/otm/probes_local', '{replica}') ORDER BY probe_id");
    expect(distributed).toContain('Distributed(otm, otm, probes_local, rand())');
  });

  it('points a materialized view from local table to local table', () => {
    const [view] = clusterStatements(
      'CREATE MATERIALIZED VIEW IF NOT EXISTS r_mv TO r AS\nSELECT a, countState() AS n FROM usage_events GROUP BY a',
      target,
    );
    expect(view).toBe(
      'CREATE MATERIALIZED VIEW IF NOT EXISTS otm.r_mv ON CLUSTER otm TO otm.r_local AS\nSELECT a, countState() AS n FROM otm.usage_events_local GROUP BY a',
    );
  });

  it('adds a column to the local tables and names the table whose Distributed table is made again', () => {
    const statement = 'ALTER TABLE usage_events ADD COLUMN x UInt8 DEFAULT 0 AFTER y';
    expect(clusterStatements(statement, target)).toEqual([
      'ALTER TABLE otm.usage_events_local ON CLUSTER otm ADD COLUMN x UInt8 DEFAULT 0 AFTER y',
    ]);
    expect(alteredTable(statement)).toBe('usage_events');
    expect(
      recreateDistributed(
        'usage_events',
        'CREATE TABLE otm.usage_events (x UInt8) ENGINE = Distributed(otm, otm, usage_events_local, cityHash64(event_key))',
        target,
      ),
    ).toEqual([
      'DROP TABLE IF EXISTS otm.usage_events ON CLUSTER otm',
      'CREATE TABLE IF NOT EXISTS otm.usage_events ON CLUSTER otm AS otm.usage_events_local ENGINE = Distributed(otm, otm, usage_events_local, cityHash64(event_key))',
    ]);
  });

  it('copies rows once, from Distributed table to Distributed table', () => {
    expect(
      clusterStatements(
        'INSERT INTO usage_event_keys (stored_date, source, event_key)\nSELECT toDate(ingested_at) AS stored_date, toUInt8(1) AS source, event_key FROM usage_events WHERE ingested_at >= now() - 864000',
        target,
      ),
    ).toEqual([
      'INSERT INTO otm.usage_event_keys (stored_date, source, event_key) SELECT toDate(ingested_at) AS stored_date, toUInt8(1) AS source, event_key FROM otm.usage_events WHERE ingested_at >= now() - 864000',
    ]);
  });

  it('drops a table with its local table', () => {
    expect(clusterStatements('DROP TABLE IF EXISTS usage_latency_by_hour', target)).toEqual([
      'DROP TABLE IF EXISTS otm.usage_latency_by_hour ON CLUSTER otm',
      'DROP TABLE IF EXISTS otm.usage_latency_by_hour_local ON CLUSTER otm',
    ]);
  });

  it('refuses what it does not know, so no migration passes unconverted', () => {
    expect(() => clusterStatements('INSERT INTO usage_events SELECT * FROM somewhere', target)).toThrow(/no cluster form/);
    expect(() => clusterStatements('CREATE TABLE IF NOT EXISTS t (a String) ENGINE = Log', target)).toThrow(
      /no replicated form of engine Log/,
    );
  });

  it('converts every statement of every migration', () => {
    for (const file of fs.readdirSync(migrationsDir).filter((name) => name.endsWith('.sql'))) {
      for (const statement of splitStatements(fs.readFileSync(path.join(migrationsDir, file), 'utf8'))) {
        expect(clusterStatements(statement, target).length, `${file}: ${statement.slice(0, 60)}`).toBeGreaterThan(0);
      }
    }
  });
});
