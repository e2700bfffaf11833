import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { clickhouseThreadKind, nodeThreadKind, perRecordUs, statCpuSeconds, threadCpuSeconds } from './thread-cpu.js';

describe('thread CPU by kind', () => {
  it('names the kinds of Node and ClickHouse threads', () => {
    expect(nodeThreadKind('node', true)).toBe('main');
    expect(nodeThreadKind('MainThread', true)).toBe('main');
    expect(nodeThreadKind('V8Worker', false)).toBe('v8');
    expect(nodeThreadKind('V8 DefaultWorke', false)).toBe('v8');
    expect(nodeThreadKind('libuv-worker', false)).toBe('pool');
    expect(nodeThreadKind('SignalInspector', false)).toBe('other');
    expect(nodeThreadKind('node', false)).toBe('other');
    for (const merge of ['BackgrProcPool', 'MergeMutate', 'BgSchPool', 'BgMBSchPool']) expect(clickhouseThreadKind(merge)).toBe('merges');
    for (const other of ['HTTPHandler', 'clickhouse-serv', 'AsyncMetrics', 'SystemLogFlush', 'TCPHandler'])
      expect(clickhouseThreadKind(other)).toBe('queries');
  });

  it('reads utime and stime past a name holding spaces and parentheses', () => {
    const fields = ['S', ...Array.from({ length: 10 }, () => '0'), '250', '50', '0'];
    expect(statCpuSeconds(`42 (a (b) c) ${fields.join(' ')}`)).toBe(3);
  });

  it('gives µs per record between two readings, never below zero', () => {
    expect(perRecordUs({ main: 1, other: 0.02 }, { main: 1.5, other: 0.01, v8: 0.25 }, 1000)).toEqual({ main: 500, other: 0, v8: 250 });
  });

  it('finds this process\'s own main thread busy, and a worker\'s time in "other"', async () => {
    const before = threadCpuSeconds(process.pid, nodeThreadKind, 'other');
    // Busy until the process has had 300 ms of CPU (by CPU time, not the clock: a loaded machine gives less).
    const started = process.cpuUsage();
    while (process.cpuUsage(started).user + process.cpuUsage(started).system < 300_000);
    const worker = new Worker('const s = process.cpuUsage(); while (process.cpuUsage(s).user + process.cpuUsage(s).system < 300000);', {
      eval: true,
    });
    await new Promise((resolve) => worker.once('exit', resolve));
    const after = threadCpuSeconds(process.pid, nodeThreadKind, 'other');
    const spent = perRecordUs(before, after, 1e6);
    // µs per "record" of a million records: seconds.
    expect(spent.main).toBeGreaterThan(0.2);
    // The worker has ended: its time is in the process's total and no thread's, so in "other".
    expect(spent.other).toBeGreaterThan(0.15);
    expect(threadCpuSeconds(2 ** 22 + 12345, nodeThreadKind, 'other')).toEqual({});
  });
});
