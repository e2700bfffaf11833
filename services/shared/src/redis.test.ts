import { describe, expect, it } from 'vitest';
import { redisKeyPrefix } from './redis.js';

describe('redisKeyPrefix', () => {
  it('is the prefix on one server, and a hash tag on a cluster unless it holds one', () => {
    expect(redisKeyPrefix('otm:', false)).toBe('otm:');
    expect(redisKeyPrefix('otm:', true)).toBe('{otm:}');
    expect(redisKeyPrefix('{otm}:', true)).toBe('{otm}:');
    // Empty braces are no hash tag: Redis hashes the whole key.
    expect(redisKeyPrefix('{}otm:', true)).toBe('{{}otm:}');
  });
});
