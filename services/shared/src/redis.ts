// Redis connections: one server (REDIS_URL), a master found through Sentinel
// (REDIS_SENTINEL_MASTER, REDIS_URL naming the Sentinel), or a Redis Cluster
// (REDIS_CLUSTER=true, REDIS_URL naming one of its nodes or its configuration endpoint:
// the others are found from it). On a cluster, keys a command or a transaction uses together must
// share a slot: every key and channel of the project goes under the prefix in braces,
// a hash tag (redisKeyPrefix: `{otm:}apikey:…`), except the dedupe marks, which spread
// over the cluster in buckets of their own (services/ingester/src/dedupe-step.ts).
import fs from 'node:fs';
import { Cluster, Redis as RedisNode, type RedisOptions } from 'ioredis';

/** A connection to one Redis server, or to a Redis Cluster. */
export type Redis = RedisNode | Cluster;

export interface RedisConnectOptions {
  name?: string;
  caFile?: string;
  /** REDIS_CLUSTER: the URL names a node of a Redis Cluster. */
  cluster?: boolean;
  /** REDIS_SENTINEL_MASTER: the URL names a Sentinel, which names this master's address. */
  sentinelMaster?: string;
}

/** The connection options the REDIS_* settings give, for a connection called `name`. */
export function redisOptionsFrom(
  config: { REDIS_TLS_CA_FILE: string; REDIS_CLUSTER: boolean; REDIS_SENTINEL_MASTER: string },
  name: string,
): RedisConnectOptions {
  return { name, caFile: config.REDIS_TLS_CA_FILE, cluster: config.REDIS_CLUSTER, sentinelMaster: config.REDIS_SENTINEL_MASTER };
}

/**
 * A Redis connection that fails commands fast while disconnected instead of
 * queueing them forever: callers turn the failure into a 503 or a retry.
 */
export function createRedis(url: string, options: RedisConnectOptions = {}): Redis {
  // rediss:// is TLS (ioredis: tls {}); a CA file of our own for a private CA.
  const tls = url.startsWith('rediss:') ? { tls: options.caFile ? { ca: [fs.readFileSync(options.caFile)] } : {} } : {};
  const common: RedisOptions = {
    connectionName: options.name,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: 2000,
    retryStrategy: (attempt) => Math.min(50 * attempt, 1000),
  };
  let redis: Redis;
  if (options.sentinelMaster) {
    // The Sentinel is asked for the master's address at every (re)connection: after a
    // failover the connection comes back on the promoted replica. The URL's user and
    // password are the master's; the Sentinel is reached without them.
    const sentinel = new URL(url);
    redis = new RedisNode({
      ...common,
      ...tls,
      sentinels: [{ host: sentinel.hostname, port: Number(sentinel.port || 26379) }],
      name: options.sentinelMaster,
      username: decodeURIComponent(sentinel.username) || undefined,
      password: decodeURIComponent(sentinel.password) || undefined,
      enableTLSForSentinelMode: url.startsWith('rediss:'),
      sentinelRetryStrategy: (attempt) => Math.min(50 * attempt, 1000),
      enableOfflineQueue: false,
      lazyConnect: true,
    });
  } else if (options.cluster) {
    const seed = new URL(url);
    redis = new Cluster([{ host: seed.hostname, port: Number(seed.port || 6379) }], {
      redisOptions: {
        ...common,
        ...tls,
        username: decodeURIComponent(seed.username) || undefined,
        password: decodeURIComponent(seed.password) || undefined,
      },
      enableOfflineQueue: false,
      lazyConnect: true,
      clusterRetryStrategy: (attempt) => Math.min(50 * attempt, 1000),
      // A node answering "the cluster is down" (a slot without its master) is asked again shortly.
      retryDelayOnClusterDown: 100,
    });
  } else {
    redis = new RedisNode(url, { ...common, ...tls, enableOfflineQueue: false, lazyConnect: true });
  }
  // The socket's errors (refused, TLS, a refused password) reach callers through the
  // commands that fail meanwhile; kept here, not printed as ioredis' "Unhandled error event".
  redis.on('error', (error: Error) => lastErrors.set(redis, error));
  return redis;
}

/** Whether `redis` is a Redis Cluster connection. */
export function isCluster(redis: Redis): redis is Cluster {
  return redis instanceof Cluster;
}

/**
 * The prefix the project's keys and channels take: REDIS_KEY_PREFIX, in braces on a
 * cluster (a hash tag: the keys a transaction uses together share a slot).
 */
/** The key prefix the services use, from a parsed configuration (REDIS_KEY_PREFIX, as a hash tag on a cluster). */
export function redisPrefixFrom(config: { REDIS_KEY_PREFIX: string; REDIS_CLUSTER: boolean }): string {
  return redisKeyPrefix(config.REDIS_KEY_PREFIX, config.REDIS_CLUSTER);
}

export function redisKeyPrefix(prefix: string, cluster: boolean): string {
  if (!cluster) return prefix;
  // A hash tag already (Redis hashes what stands between the first `{` and the next `}`, if anything does).
  const open = prefix.indexOf('{');
  const tagged = open !== -1 && prefix.indexOf('}', open + 1) > open + 1;
  return tagged ? prefix : `{${prefix}}`;
}

const lastErrors = new WeakMap<Redis, Error>();

/** The last error the connection's socket reported: says more than a command's "Connection is closed". */
export function lastRedisError(redis: Redis): Error | undefined {
  return lastErrors.get(redis);
}
