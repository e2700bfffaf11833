// The one-line explanations of dependency failures, from the errors the clients throw
// (shapes as ioredis, @clickhouse/client, fetch and node:tls give them).
import { describe, expect, it } from 'vitest';
import { clickhouseFailure, networkFailure, redisFailure, safeAddress } from './dependency-failure.js';

const socketError = (code: string, message = code) => Object.assign(new Error(message), { code });

describe('dependency failures in one line', () => {
  it('never shows the credentials of a URL', () => {
    expect(safeAddress('redis://user:secret@10.0.0.1:6379/2')).toBe('redis://10.0.0.1:6379/2');
    expect(safeAddress('https://u:p@ch.example:8443')).toBe('https://ch.example:8443');
    expect(redisFailure(socketError('ECONNREFUSED'), 'redis://user:secret@10.0.0.1:6379').message).not.toContain('secret');
  });

  it('names refused, unknown hosts, silence, untrusted certificates and TLS mixed with plaintext', () => {
    const of = (error: unknown, address = 'https://h:1') => networkFailure('ClickHouse', error, address, ['CLICKHOUSE_URL'])?.message;
    expect(of(socketError('ECONNREFUSED'))).toBe('ClickHouse: connection refused at https://h:1; check CLICKHOUSE_URL');
    expect(of(socketError('ENOTFOUND'))).toBe('ClickHouse: the host of https://h:1 is not known; check CLICKHOUSE_URL');
    expect(of(socketError('ETIMEDOUT'))).toBe('ClickHouse: no answer from https://h:1 (TLS to a plaintext port?); check CLICKHOUSE_URL');
    expect(of(socketError('ETIMEDOUT'), 'http://h:1')).toBe('ClickHouse: no answer from http://h:1; check CLICKHOUSE_URL');
    expect(of(socketError('SELF_SIGNED_CERT_IN_CHAIN'))).toBe(
      'ClickHouse: the certificate of https://h:1 is not trusted (SELF_SIGNED_CERT_IN_CHAIN); check CLICKHOUSE_URL, CLICKHOUSE_CA_FILE, NODE_EXTRA_CA_CERTS',
    );
    expect(of(socketError('EPROTO', 'wrong version number'))).toBe(
      'ClickHouse: TLS and plaintext mixed up at https://h:1 (EPROTO); check CLICKHOUSE_URL',
    );
    // fetch wraps the socket's error in its cause.
    expect(of(Object.assign(new TypeError('fetch failed'), { cause: socketError('ECONNREFUSED') }))).toBe(
      'ClickHouse: connection refused at https://h:1; check CLICKHOUSE_URL',
    );
    expect(of(new Error('something else'))).toBeUndefined();
  });

  it('tells a refused password from a missing database and a missing privilege, on 18.16 and on current releases', () => {
    const url = 'http://ch:8123';
    const credentials = 'ClickHouse: http://ch:8123 refused the user and password; check CLICKHOUSE_USER, CLICKHOUSE_PASSWORD';
    // 18.16's text answer, as the client passes it on.
    expect(clickhouseFailure(new Error('Code: 193, e.displayText() = DB::Exception: Wrong password for user default'), url).message).toBe(
      credentials,
    );
    expect(clickhouseFailure(Object.assign(new Error('default: Authentication failed'), { code: '516' }), url).message).toBe(credentials);
    expect(
      clickhouseFailure(new Error("Code: 81, e.displayText() = DB::Exception: Database nope doesn't exist"), url, 'nope').message,
    ).toBe('ClickHouse: the database nope does not exist (npm run migrate creates it); check CLICKHOUSE_DATABASE');
    expect(clickhouseFailure(Object.assign(new Error('reader: Not enough privileges.'), { code: '497' }), url).message).toMatch(
      /^ClickHouse: the user lacks a privilege this needs \(reader: Not enough privileges\.\); check CLICKHOUSE_USER$/,
    );
  });

  it('reads Redis ACL refusals', () => {
    expect(redisFailure(new Error('WRONGPASS invalid username-password pair or user is disabled.'), 'redis://r:6379').message).toBe(
      'Redis: redis://r:6379 refused the user and password (WRONGPASS invalid username-password pair or user is disabled.); check REDIS_URL (user and password)',
    );
    expect(redisFailure(new Error('NOAUTH Authentication required.'), 'rediss://r:6380').message).toMatch(/refused the user and password/);
  });
});
