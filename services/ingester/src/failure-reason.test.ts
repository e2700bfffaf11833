import { describe, expect, it } from 'vitest';
import { ReplyError } from 'ioredis';
import { failureReason } from './failure-reason.js';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

describe('failureReason', () => {
  it('a Redis at maxmemory with noeviction is full', () => {
    expect(failureReason(new ReplyError("OOM command not allowed when used memory > 'maxmemory'."))).toBe('full');
  });

  it('a MULTI refused by a full Redis (the erasure lease) is full too: ioredis reports EXECABORT with the OOM inside', () => {
    const execAbort = Object.assign(new ReplyError('EXECABORT Transaction discarded because of previous errors.'), {
      previousErrors: [new ReplyError("OOM command not allowed when used memory > 'maxmemory'.")],
    });
    expect(failureReason(execAbort)).toBe('full');
  });

  it('ClickHouse out of memory or with too many parts is overloaded', () => {
    expect(failureReason(withCode('Memory limit (for query) exceeded', '241'))).toBe('overloaded');
    expect(failureReason(withCode('Too many parts (600). Merges are processing significantly slower than inserts', '252'))).toBe(
      'overloaded',
    );
  });

  it('refused, reset and closed connections are unreachable', () => {
    expect(failureReason(withCode('connect ECONNREFUSED 127.0.0.1:16379', 'ECONNREFUSED'))).toBe('unreachable');
    expect(failureReason(withCode('read ECONNRESET', 'ECONNRESET'))).toBe('unreachable');
    expect(failureReason(new Error("Stream isn't writeable and enableOfflineQueue options is false"))).toBe('unreachable');
    expect(failureReason(new Error('Connection is closed.'))).toBe('unreachable');
  });

  it('timeouts are timeouts', () => {
    expect(failureReason(new Error('Command timed out'))).toBe('timeout');
    expect(failureReason(new Error('Timeout error.'))).toBe('timeout');
    expect(failureReason(withCode('connect ETIMEDOUT', 'ETIMEDOUT'))).toBe('timeout');
  });

  it('anything else is an error, including a ClickHouse data error and a non-error value', () => {
    expect(failureReason(withCode('Cannot parse input', '27'))).toBe('error');
    expect(failureReason(new Error('READONLY You cannot write against a read only replica.'))).toBe('error');
    expect(failureReason('a string')).toBe('error');
    expect(failureReason(undefined)).toBe('error');
  });
});
