// The admin token guards everything on the admin port. The comparison is on
// SHA-256 digests with timingSafeEqual, so neither the token's content nor its
// length leaks through timing. Ingest keys are never admin credentials.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { ServiceError } from '@otm/shared/errors';

/**
 * The check of every admin request: the Bearer token must be one of `tokens` (ADMIN_TOKEN,
 * and ADMIN_TOKEN_NEXT while a rotation is under way). Every token is compared, whichever
 * matches, so the time taken says nothing about which one did.
 */
export function adminTokenCheck(tokens: readonly string[]) {
  const expected = tokens.filter((token) => token !== '').map((token) => createHash('sha256').update(token).digest());
  if (expected.length === 0) throw new Error('no admin token configured');
  return function requireAdmin(request: FastifyRequest): void {
    const header = request.headers.authorization;
    const match = header ? /^Bearer[ ]+(\S+)[ ]*$/i.exec(header) : null;
    const presented = match?.[1];
    const digest = createHash('sha256')
      .update(presented ?? '')
      .digest();
    let matched = false;
    for (const token of expected) matched = timingSafeEqual(digest, token) || matched;
    if (!presented || !matched) {
      throw new ServiceError('AuthError', 'Admin token missing or incorrect.');
    }
  };
}
