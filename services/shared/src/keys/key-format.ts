// API keys are `otm_<environment>_<secret>`. The secret is 256 bits from a CSPRNG,
// base64url (43 characters); anything of another shape is refused before any
// store look-up, so malformed keys cost nothing.
import { hash, randomBytes } from 'node:crypto';
import { ENVIRONMENTS, type Environment } from '@otm/schemas';

export const KEY_PATTERN = /^otm_(prod|qa|preview|dev)_[A-Za-z0-9_-]{32,128}$/;
const MAX_KEY_LENGTH = 4 + 8 + 128;

export function generateKey(environment: Environment): string {
  return `otm_${environment}_${randomBytes(32).toString('base64url')}`;
}

export function generateKeyId(): string {
  return `key_${randomBytes(9).toString('base64url')}`;
}

/** The environment of a well-formed key, or undefined for anything else. */
export function parseKey(candidate: string): Environment | undefined {
  if (candidate.length > MAX_KEY_LENGTH) return undefined;
  const match = KEY_PATTERN.exec(candidate);
  return match ? (match[1] as Environment) : undefined;
}

/** Keys are stored and looked up only by this digest (one-shot: a third of a Hash object's cost, on every request). */
export function hashKey(key: string): string {
  return hash('sha256', key, 'hex');
}

export function isEnvironment(value: string): value is Environment {
  return (ENVIRONMENTS as readonly string[]).includes(value);
}
