import { Redis } from 'ioredis';

export type { Redis };

/**
 * A Redis connection that fails commands fast while disconnected instead of
 * queueing them forever: callers turn the failure into a 503 or a retry.
 */
export function createRedis(url: string, options: { name?: string } = {}): Redis {
  return new Redis(url, {
    connectionName: options.name,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 2000,
    commandTimeout: 2000,
    retryStrategy: (attempt) => Math.min(50 * attempt, 1000),
    lazyConnect: true,
  });
}
