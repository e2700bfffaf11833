// A Redis Cluster of three masters on loopback (Debian's redis-server in cluster mode,
// the slots assigned once by `redis-cli --cluster create`), for the tests that run the
// project on a cluster. Each node is a process of its own under the stack's folder;
// `redisCluster(config, firstPort)` starts what is not running and returns once every
// slot is served. On the secure profile the nodes speak TLS only (clients and the
// cluster bus, with the profile's certificate) and know two users, the default off: the
// services' ACL user, with the key patterns of a cluster (docs/production.md, "Redis
// Cluster"), and an administrator that makes the cluster.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { StackConfig } from './config.js';
import { ProcessService } from './process-service.js';
import { redisReply, secureRedisLines, writeRedisConf } from './redis.js';
import { SECURE_USERS, ensureSecureMaterial } from './secure.js';

const NODES = 3;

class RedisClusterNode extends ProcessService {
  readonly startTimeoutMs = 60_000;
  constructor(
    config: StackConfig,
    readonly port: number,
  ) {
    super(config);
  }
  get name() {
    return `redis-cluster-${this.port}`;
  }
  protected get home() {
    return path.join(this.config.dir, 'redis-cluster', String(this.port));
  }
  get address() {
    return `${this.config.host}:${this.port}`;
  }

  protected prepare() {
    const configFile = writeRedisConf(this.home, this.config.host, [
      ...(this.config.secure ? secureRedisLines(this.config, this.port, true) : [`port ${this.port}`]),
      'cluster-enabled yes',
      'cluster-config-file nodes.conf',
      'cluster-node-timeout 5000',
      'appendonly no',
      'save ""',
      'maxmemory 256mb',
      'maxmemory-policy noeviction',
    ]);
    return { command: 'redis-server', args: [configFile] };
  }

  /** One command through redis-cli (TLS and the administrator on the secure profile); its output. */
  cli(args: string[]): string {
    const material = this.config.secure ? ensureSecureMaterial(this.config) : undefined;
    const secure = material
      ? [
          '--tls',
          '--cacert',
          material.caFile,
          '--user',
          SECURE_USERS.redisAdmin,
          '--pass',
          material.passwords.redisAdmin,
          '--no-auth-warning',
        ]
      : [];
    const result = spawnSync('redis-cli', [...secure, ...args], { encoding: 'utf8', timeout: 60_000 });
    return `${result.stdout ?? ''}${result.stderr ?? ''}`;
  }

  async healthy(): Promise<boolean> {
    if (this.config.secure) return this.cli(['-h', this.config.host, '-p', String(this.port), 'PING']).includes('PONG');
    return (await redisReply(this.config.host, this.port, 'PING'))[0] === 'PONG';
  }

  /** Removes what the node kept (its keys are the tests' own; its nodes.conf names a cluster made before). */
  forget(): void {
    fs.rmSync(this.home, { recursive: true, force: true });
  }

  /** Whether this node sees every slot served. */
  async clusterOk(): Promise<boolean> {
    if (this.config.secure)
      return this.cli(['-h', this.config.host, '-p', String(this.port), 'CLUSTER', 'INFO']).includes('cluster_state:ok');
    return (await redisReply(this.config.host, this.port, 'CLUSTER', 'INFO')).some((text) => text.includes('cluster_state:ok'));
  }
}

export interface RedisClusterHandle {
  /** REDIS_URL of one node (the others are found from it), with REDIS_CLUSTER=true; on the secure profile TLS, as the services' ACL user. */
  url: string;
  down(): Promise<void>;
}

/**
 * Starts the three nodes from `firstPort` on (what runs already is kept) and assigns the
 * slots once. Each node's cluster bus listens 10,000 above its port (Redis's default), so
 * callers pick a `firstPort` below 22768: the bus then stays below Linux's ephemeral ports
 * (32768-60999), where an outgoing connection may already hold it.
 */
export async function redisCluster(config: StackConfig, firstPort: number): Promise<RedisClusterHandle> {
  const nodes = Array.from({ length: NODES }, (_, index) => new RedisClusterNode(config, firstPort + index));
  // A node not running starts empty (its data and its view of the cluster gone): the
  // cluster is made again unless every node still runs one.
  for (const node of nodes) if (!(await node.healthy())) node.forget();
  for (const node of nodes) await node.start();
  await Promise.all(nodes.map((node) => node.waitHealthy(node.startTimeoutMs)));
  if (!(await nodes[0]!.clusterOk())) {
    const created = nodes[0]!.cli([
      '--cluster',
      'create',
      ...nodes.map((node) => node.address),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
    if (!created.includes('All 16384 slots covered')) throw new Error(`redis-cli --cluster create failed: ${created}`);
  }
  const deadline = Date.now() + 30_000;
  while (!(await Promise.all(nodes.map((node) => node.clusterOk()))).every(Boolean)) {
    if (Date.now() > deadline) throw new Error('the Redis Cluster did not reach cluster_state:ok within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const material = config.secure ? ensureSecureMaterial(config) : undefined;
  return {
    url: material ? `rediss://${SECURE_USERS.redis}:${material.passwords.redis}@${nodes[0]!.address}` : `redis://${nodes[0]!.address}`,
    async down() {
      for (const node of nodes) await node.down();
    },
  };
}
