// A Redis master, its replica and a Sentinel watching them, on loopback (Debian's
// redis-server; the Sentinel is the same binary with --sentinel), for the tests that run
// the project through Sentinel and fail the master over. `redisSentinel(config,
// firstPort)` starts what is not running (each from empty) and returns once the
// Sentinel knows the master and its replica.
import fs from 'node:fs';
import path from 'node:path';
import type { StackConfig } from './config.js';
import { ProcessService } from './process-service.js';
import { redisReply, writeRedisConf } from './redis.js';

/** The name the Sentinel knows the master by (REDIS_SENTINEL_MASTER). */
export const SENTINEL_MASTER = 'otm-master';

type Role = 'master' | 'replica' | 'sentinel';

class SentinelSetNode extends ProcessService {
  readonly startTimeoutMs = 60_000;
  constructor(
    config: StackConfig,
    readonly role: Role,
    readonly port: number,
    private readonly masterPort: number,
  ) {
    super(config);
  }
  get name() {
    return `redis-${this.role}-${this.port}`;
  }
  protected get home() {
    return path.join(this.config.dir, 'redis-sentinel', String(this.port));
  }
  get address() {
    return `${this.config.host}:${this.port}`;
  }

  protected prepare() {
    const { host } = this.config;
    if (this.role === 'sentinel') {
      const configFile = writeRedisConf(this.home, host, [
        `port ${this.port}`,
        `sentinel monitor ${SENTINEL_MASTER} ${host} ${this.masterPort} 1`,
        `sentinel down-after-milliseconds ${SENTINEL_MASTER} 1000`,
        `sentinel failover-timeout ${SENTINEL_MASTER} 3000`,
        `sentinel parallel-syncs ${SENTINEL_MASTER} 1`,
      ]);
      return { command: 'redis-server', args: [configFile, '--sentinel'] };
    }
    const configFile = writeRedisConf(this.home, host, [
      `port ${this.port}`,
      'appendonly no',
      'save ""',
      // The replica's first copy at once (not after Redis's default 5 s wait for more replicas).
      'repl-diskless-sync-delay 0',
      ...(this.role === 'replica' ? [`replicaof ${host} ${this.masterPort}`] : []),
    ]);
    return { command: 'redis-server', args: [configFile] };
  }

  async healthy(): Promise<boolean> {
    return (await redisReply(this.config.host, this.port, 'PING'))[0] === 'PONG';
  }

  /** Removes what the node kept: it starts empty (a Sentinel's rewritten file names the master it saw last). */
  forget(): void {
    fs.rmSync(this.home, { recursive: true, force: true });
  }
}

export interface SentinelSetHandle {
  /** REDIS_URL: the Sentinel, with REDIS_SENTINEL_MASTER=SENTINEL_MASTER. */
  url: string;
  master: { port: number; kill(): boolean };
  replica: { port: number };
  down(): Promise<void>;
}

/** Starts the master (firstPort), its replica (+1) and the Sentinel (+2), each from empty. */
export async function redisSentinel(config: StackConfig, firstPort: number): Promise<SentinelSetHandle> {
  const master = new SentinelSetNode(config, 'master', firstPort, firstPort);
  const replica = new SentinelSetNode(config, 'replica', firstPort + 1, firstPort);
  const sentinel = new SentinelSetNode(config, 'sentinel', firstPort + 2, firstPort);
  const nodes = [master, replica, sentinel];
  for (const node of nodes) await node.down();
  for (const node of nodes) node.forget();
  for (const node of nodes) await node.start();
  await Promise.all(nodes.map((node) => node.waitHealthy(node.startTimeoutMs)));
  const deadline = Date.now() + 30_000;
  // Ready once the replica copies the master (its link up) and the Sentinel has found it.
  const ready = async () =>
    (await redisReply(config.host, replica.port, 'ROLE')).includes('connected') &&
    (await redisReply(config.host, sentinel.port, 'SENTINEL', 'REPLICAS', SENTINEL_MASTER)).includes(String(replica.port));
  while (!(await ready())) {
    if (Date.now() > deadline) throw new Error('the replica did not copy the master, or the Sentinel did not find it, within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    url: `redis://${sentinel.address}`,
    master: { port: master.port, kill: () => master.signal('SIGKILL') },
    replica: { port: replica.port },
    async down() {
      for (const node of nodes) await node.down();
    },
  };
}
