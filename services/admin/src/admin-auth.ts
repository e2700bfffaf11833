// The admin token guards everything on the admin port. The comparison is on
// SHA-256 digests with timingSafeEqual, so neither the token's content nor its
// length leaks through timing. Ingest keys are never admin credentials.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { ServiceError } from '@otm/shared/errors';

export function adminTokenCheck(token: string) {
  const expected = createHash('sha256').update(token).digest();
  return function requireAdmin(request: FastifyRequest): void {
    const header = request.headers.authorization;
    const match = header ? /^Bearer[ ]+(\S+)[ ]*$/i.exec(header) : null;
    const presented = match?.[1];
    if (!presented || !timingSafeEqual(createHash('sha256').update(presented).digest(), expected)) {
      throw new ServiceError('AuthError', 'Admin token missing or incorrect.');
    }
  };
}
