import fs from 'node:fs';
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import {
  CLICKHOUSE_BYTES_BY_SECTION,
  CLICKHOUSE_BYTES_PER_ANALYTICS_EVENT,
  DISK_MARGIN_BYTES,
  KAFKA_BYTES_BY_SECTION,
  QUICK_SHARE,
  diskNeed,
  diskShortfall,
  freeBytesUnder,
} from './disk-need.js';

const allSections = Object.keys(KAFKA_BYTES_BY_SECTION);
/** A full run as `npm run bench` makes it. */
const full = (analyticsEvents = 100_000_000) => ({ analyticsEvents, runs: 3, quick: false });
const GiB = 1024 ** 3;

describe('diskNeed', () => {
  it('knows every section the runner runs, and no other', () => {
    const runner = fs.readFileSync(new URL('../bench.ts', import.meta.url), 'utf8');
    const run = [...runner.matchAll(/^\s*\['(\w+)', bench\w+\],$/gm)].map((match) => match[1]);
    expect(run.length).toBeGreaterThan(10);
    expect(allSections).toEqual(run);
  });

  it("adds up the sections' Kafka bytes, which stay until the run ends", () => {
    const need = diskNeed(['batch', 'codecs'], full());
    expect(need.kafkaBytes).toBe(KAFKA_BYTES_BY_SECTION.batch! + KAFKA_BYTES_BY_SECTION.codecs!);
    expect(need.kafkaBytes).toBeGreaterThan(0);
    expect(need.totalBytes).toBe(need.kafkaBytes + need.clickhouseBytes + DISK_MARGIN_BYTES);
  });

  it("counts ClickHouse's bytes of the section that holds most, as each drops its databases when it ends", () => {
    expect(diskNeed(['batch'], full()).clickhouseBytes).toBe(0);
    expect(diskNeed(['freshness', 'endToEnd'], full()).clickhouseBytes).toBe(CLICKHOUSE_BYTES_BY_SECTION.endToEnd);
    expect(diskNeed(['endToEnd', 'analytics'], full(1_000_000)).clickhouseBytes).toBe(CLICKHOUSE_BYTES_BY_SECTION.endToEnd);
  });

  it("counts the analytics section's events by their number", () => {
    const all = diskNeed(['analytics'], full());
    const tenth = diskNeed(['analytics'], full(10_000_000));
    expect(all.clickhouseBytes).toBe(100_000_000 * CLICKHOUSE_BYTES_PER_ANALYTICS_EVENT);
    expect(all.clickhouseBytes).toBeCloseTo(10 * tenth.clickhouseBytes, 0);
  });

  it('needs more for the whole run than for any part of it, and the whole run tens of gigabytes', () => {
    const whole = diskNeed(allSections, full());
    for (const name of allSections) expect(diskNeed([name], full()).totalBytes).toBeLessThanOrEqual(whole.totalBytes);
    expect(whole.totalBytes).toBeGreaterThan(30e9);
  });

  it('counts the repeated sections once per run, and a quick run at its share', () => {
    expect(diskNeed(['batch'], { ...full(), runs: 6 }).kafkaBytes).toBeCloseTo(2 * KAFKA_BYTES_BY_SECTION.batch!, 0);
    expect(diskNeed(['codecs', 'endToEnd'], { ...full(), runs: 6 }).kafkaBytes).toBe(diskNeed(['codecs', 'endToEnd'], full()).kafkaBytes);
    const quick = diskNeed(['endToEnd'], { ...full(), quick: true });
    expect(quick.kafkaBytes).toBeCloseTo(KAFKA_BYTES_BY_SECTION.endToEnd! * QUICK_SHARE, 0);
    expect(quick.clickhouseBytes).toBeCloseTo(CLICKHOUSE_BYTES_BY_SECTION.endToEnd! * QUICK_SHARE, 0);
  });
});

describe('diskShortfall', () => {
  const need = diskNeed(allSections, full());

  it('lets a run start with the room it needs', () => {
    expect(diskShortfall(need, need.totalBytes, 64)).toBeUndefined();
    expect(diskShortfall(need, need.totalBytes + 1, 0)).toBeUndefined();
  });

  it('refuses a run short of the room, saying what it needs, what there is and what to leave out', () => {
    const reason = diskShortfall(need, need.totalBytes - 1e9, 64);
    expect(reason).toContain(`${(need.totalBytes / 1e9).toFixed(1)} GB`);
    expect(reason).toContain(`${((need.totalBytes - 1e9) / 1e9).toFixed(1)} GB`);
    expect(reason).toContain('BENCH_ANALYTICS_EVENTS');
  });

  it("refuses analytics events that ClickHouse's volume cannot hold, whatever the disk has", () => {
    const small = Math.floor(need.clickhouseBytes / GiB) - 1;
    expect(diskShortfall(need, 1e15, small)).toContain(`its volume holds ${small} GiB`);
    // Without a volume of its own ClickHouse writes on the disk, which the first check covers.
    expect(diskShortfall(need, 1e15, 0)).toBeUndefined();
  });
});

describe('freeBytesUnder', () => {
  it("reads the free bytes of a folder's filesystem", () => {
    const free = freeBytesUnder(os.tmpdir());
    expect(free).toBeGreaterThan(0);
    expect(Number.isSafeInteger(free)).toBe(true);
  });
});
