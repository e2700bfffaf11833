// The admin token check: either token of a rotation is accepted, nothing else is.
import { describe, expect, it } from 'vitest';
import type { FastifyRequest } from 'fastify';
import { adminTokenCheck } from './admin-auth.js';

const current = 'current-token-0123456789abcdef0123456789';
const next = 'next-token-0123456789abcdef0123456789abcd';
const ask = (check: (request: FastifyRequest) => void, authorization?: string) => {
  try {
    check({ headers: authorization === undefined ? {} : { authorization } } as FastifyRequest);
    return 'accepted';
  } catch (error) {
    return (error as { errorType?: string }).errorType ?? String(error);
  }
};

describe('adminTokenCheck', () => {
  it('accepts the current token and, during a rotation, the next one; nothing else', () => {
    const rotating = adminTokenCheck([current, next]);
    expect(ask(rotating, `Bearer ${current}`)).toBe('accepted');
    expect(ask(rotating, `Bearer ${next}`)).toBe('accepted');
    expect(ask(rotating, `Bearer ${current}x`)).toBe('AuthError');
    expect(ask(rotating, 'Bearer ')).toBe('AuthError');
    expect(ask(rotating)).toBe('AuthError');
  });

  it('an empty next token (none configured) accepts nothing more', () => {
    const single = adminTokenCheck([current, '']);
    expect(ask(single, `Bearer ${current}`)).toBe('accepted');
    expect(ask(single, 'Bearer ')).toBe('AuthError');
    expect(ask(single, `Bearer ${next}`)).toBe('AuthError');
  });
});
