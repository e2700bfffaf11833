// Redis (Debian's package) for the local stack: append-only, TLS and an ACL user in the
// secure profile.
import fs from 'node:fs';
import path from 'node:path';
// Not @otm/shared: the test setup loads this file before any workspace is built.
import { Redis } from 'ioredis';
import { stackAddresses, type StackConfig } from './config.js';
import { SECURE_USERS, ensureSecureMaterial } from './secure.js';
import { ProcessService, ensureDebianPackage } from './process-service.js';

/** Writes `home`/redis.conf (Debian's redis-server installed when missing): bound to `host`, its files in `home`, in the foreground, then `lines`. */
export function writeRedisConf(home: string, host: string, lines: string[]): string {
  ensureDebianPackage('redis-server', 'redis-server');
  const configFile = path.join(home, 'redis.conf');
  fs.writeFileSync(configFile, [`bind ${host}`, `dir ${home}`, 'daemonize no', ...lines, ''].join('\n'));
  return configFile;
}

/**
 * A node's lines on the secure profile: TLS only (the plain port closed; on a cluster the
 * bus too) and one ACL user, the default user off. The user may run what the services run
 * on the keys and channels under the prefix `otm:` (on a cluster also `{otm:`, the prefix
 * as a hash tag), and nothing from @dangerous but INFO (ioredis' ready check); a cluster's
 * nodes also hold the administrator that creates and checks the cluster.
 */
export function secureRedisLines(config: StackConfig, port: number, cluster = false): string[] {
  const material = ensureSecureMaterial(config);
  const patterns = cluster ? '~otm:* ~{otm:* &otm:* &{otm:*' : '~otm:* &otm:*';
  return [
    'port 0',
    `tls-port ${port}`,
    ...(cluster ? ['tls-cluster yes'] : []),
    `tls-cert-file ${material.serverCertFile}`,
    `tls-key-file ${material.serverKeyFile}`,
    `tls-ca-cert-file ${material.caFile}`,
    'tls-auth-clients no',
    'user default off',
    `user ${SECURE_USERS.redis} on >${material.passwords.redis} ${patterns} +@all -@dangerous +info`,
    ...(cluster ? [`user ${SECURE_USERS.redisAdmin} on >${material.passwords.redisAdmin} ~* &* +@all`] : []),
  ];
}

export class RedisService extends ProcessService {
  readonly name = 'redis';
  // Redis answers only once it has read its append-only file back: a stack that ran
  // many benchmarks held 2.9 million keys and took 20 s, past the 20 s this was.
  readonly startTimeoutMs = 120_000;
  protected get home() {
    return path.join(this.config.dir, 'redis');
  }
  get address() {
    return stackAddresses(this.config).REDIS_URL;
  }

  protected prepare() {
    const configFile = writeRedisConf(this.home, this.config.host, [
      ...(this.config.secure ? secureRedisLines(this.config, this.config.redisPort) : [`port ${this.config.redisPort}`]),
      'protected-mode yes',
      // Dedupe keys survive a restart (AOF, fsync every second). What a crash
      // still loses, ClickHouse's event-key collapsing absorbs.
      'appendonly yes',
      'appendfsync everysec',
      'save ""',
      'maxmemory 1gb',
      'maxmemory-policy noeviction',
      'notify-keyspace-events ""',
    ]);
    return { command: 'redis-server', args: [configFile] };
  }

  async healthy(): Promise<boolean> {
    if (!this.config.secure) return this.plainHealthy();
    const material = ensureSecureMaterial(this.config);
    const url = new URL(this.address);
    url.username = SECURE_USERS.redis;
    url.password = material.passwords.redis;
    const redis = new Redis(url.toString(), {
      tls: { ca: [fs.readFileSync(material.caFile)] },
      lazyConnect: true,
      connectTimeout: 1000,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      return (await redis.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      redis.disconnect();
    }
  }

  private async plainHealthy(): Promise<boolean> {
    return (await redisReply(this.config.host, this.config.redisPort, 'PING'))[0] === 'PONG';
  }
}

/**
 * A command's reply from the Redis (or Sentinel) at host:port within a second, as its
 * words (an array reply flattened, numbers as text); [] when nothing answers.
 */
export async function redisReply(host: string, port: number, command: string, ...args: string[]): Promise<string[]> {
  const redis = new Redis({
    host,
    port,
    lazyConnect: true,
    connectTimeout: 1000,
    commandTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableReadyCheck: false,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return words(await redis.call(command, ...args));
  } catch {
    return [];
  } finally {
    redis.disconnect();
  }
}

function words(reply: unknown): string[] {
  if (Array.isArray(reply)) return reply.flatMap(words);
  return reply === null || reply === undefined ? [] : [String(reply)];
}
