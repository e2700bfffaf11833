import fs from 'node:fs';
import { Redis } from 'ioredis';

export type { Redis };

/**
 * A Redis connection that fails commands fast while disconnected instead of
 * queueing them forever: callers turn the failure into a 503 or a retry.
 */
export function createRedis(url: string, options: { name?: string; caFile?: string } = {}): Redis {
  // rediss:// is TLS (ioredis: tls {}); a CA file of our own for a private CA.
  const tlsOptions = url.startsWith('rediss:') && options.caFile ? { tls: { ca: [fs.readFileSync(options.caFile)] } } : {};
  const redis = new Redis(url, {
    ...tlsOptions,
    connectionName: options.name,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 2000,
    commandTimeout: 2000,
    retryStrategy: (attempt) => Math.min(50 * attempt, 1000),
    lazyConnect: true,
  });
  // The socket's errors (refused, TLS, a refused password) reach callers through the
  // commands that fail meanwhile; kept here, not printed as ioredis' "Unhandled error event".
  redis.on('error', (error: Error) => lastErrors.set(redis, error));
  return redis;
}

const lastErrors = new WeakMap<Redis, Error>();

/** The last error the connection's socket reported: says more than a command's "Connection is closed". */
export function lastRedisError(redis: Redis): Error | undefined {
  return lastErrors.get(redis);
}
