// The admin token guards everything on the admin port. The comparison is on
// SHA-256 digests with timingSafeEqual, so neither the token's content nor its
// length leaks through timing. Ingest keys are never admin credentials.
import type { FastifyRequest } from 'fastify';
import { bearerTokenCheck } from '@otm/shared/bearer-token';
import { refuse } from '@otm/shared/errors';

/**
 * The check of every admin request: the Bearer token must be one of `tokens` (ADMIN_TOKEN,
 * and ADMIN_TOKEN_NEXT while a rotation is under way), compared in constant time.
 */
export function adminTokenCheck(tokens: readonly string[]) {
  const accepted = bearerTokenCheck(tokens);
  return function requireAdmin(request: FastifyRequest): void {
    if (!accepted(request.headers.authorization)) throw refuse('adminTokenInvalid');
  };
}
