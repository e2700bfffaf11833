// A bearer token check shared by the admin API and the metrics ports: the presented token
// is compared with every accepted one as SHA-256 digests with timingSafeEqual, so neither
// a token's content nor its length, nor which token matched, leaks through timing.
import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (text: string) => createHash('sha256').update(text).digest();

/** Whether an `Authorization` header carries `Bearer <one of tokens>` (empty tokens are none). */
export function bearerTokenCheck(tokens: readonly string[]): (authorization: string | undefined) => boolean {
  const expected = tokens.filter((token) => token !== '').map(digest);
  if (expected.length === 0) throw new Error('no token configured');
  return (authorization) => {
    const presented = authorization ? /^Bearer[ ]+(\S+)[ ]*$/i.exec(authorization)?.[1] : undefined;
    const presentedDigest = digest(presented ?? '');
    let matched = false;
    for (const token of expected) matched = timingSafeEqual(presentedDigest, token) || matched;
    return presented !== undefined && matched;
  };
}
