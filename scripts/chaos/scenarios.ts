// The faults of the chaos suite, one per scenario. Each injects its fault while the
// traffic flows and clears it after the hold; the run counts what was acknowledged
// against what ClickHouse holds. Scenarios that kill or pause a service of the stack
// run only on the suite's own stack (never on the one `npm start` or the tests use).
import type { FaultProxy } from './fault-proxy.js';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Harness {
  /** Between the ingester and ClickHouse. */
  readonly proxy: FaultProxy;
  /** The stack's own services by name (kafka or kafka-1..3, registry, redis, clickhouse); absent on a shared stack. */
  readonly services?: ReadonlyMap<string, { signal(signal: NodeJS.Signals): boolean; start(): Promise<void> }>;
  killIngester(): Promise<void>;
  startIngester(): Promise<void>;
  /** kill -9 of one gateway worker (the gateway's primary starts a new one at once). */
  killGatewayWorker(): Promise<void>;
  /** The broker that leads partition 0 of the usage topic (kafka, or kafka-N of the replicated profile). */
  leaderBroker(): Promise<string>;
  redisCommand(...args: string[]): Promise<unknown>;
  /** Sets a setting of the run's usage topic (as `kafka-configs --alter` would). */
  setTopicConfig(name: string, value: string): Promise<void>;
  log(line: string): void;
}

export interface Scenario {
  readonly name: string;
  readonly title: string;
  readonly privateStackOnly: boolean;
  /** The longest all-refusals stretch (s) the scenario allows on a stack of this many brokers; unbounded when absent. */
  maxRefusalSeconds?(kafkaBrokers: number): number | undefined;
  /** False: any record refused during the scenario fails it (the fault must not reach the clients). */
  readonly refusalsAllowed?: boolean;
  /** The scenario's own hold (s), in place of the run's. */
  readonly holdSeconds?: number;
  /**
   * How far the consumer lag may grow over the fault, in seconds of offered traffic: the
   * mean lag over the hold's last LAG_WINDOW_SECONDS against its first; unbounded when absent.
   */
  readonly maxLagGrowthSeconds?: number;
  inject(harness: Harness, holdMs: number): Promise<void>;
  clear(harness: Harness): Promise<void>;
}

function service(harness: Harness, name: string) {
  const found = harness.services?.get(name);
  if (!found) throw new Error(`scenario needs the chaos suite's own ${name}`);
  return found;
}

function kill9(name: string, title: string, more: Partial<Scenario> = {}): Scenario {
  return {
    name: `${name}-kill`,
    title,
    privateStackOnly: true,
    ...more,
    async inject(harness) {
      if (!service(harness, name).signal('SIGKILL')) throw new Error(`${name} was not running`);
    },
    async clear(harness) {
      await service(harness, name).start();
    },
  };
}

let killedBroker = 'kafka';

/** The stretch at each end of a hold whose mean lags are compared (maxLagGrowthSeconds). */
export const LAG_WINDOW_SECONDS = 10;

/** What the replicated profile documents for a leader's death: fencing (6 s) plus the gateway's produce timeout (5 s), rounded up. */
export const LEADER_ELECTION_BOUND_SECONDS = 12;

export const scenarios: readonly Scenario[] = [
  {
    name: 'gateway-worker-kill',
    title: 'kill -9 of a gateway worker, twice (its primary starts a new one)',
    privateStackOnly: false,
    async inject(harness, holdMs) {
      await harness.killGatewayWorker();
      await sleep(holdMs / 2);
      await harness.killGatewayWorker();
    },
    async clear() {},
  },
  {
    name: 'ingester-kill',
    title: 'kill -9 of the ingester mid-batch (its insert held in flight by the proxy), restarted after the hold',
    privateStackOnly: false,
    async inject(harness) {
      // Hold ClickHouse's answers so a load is surely in flight, then kill.
      harness.proxy.set('stall');
      await sleep(1500);
      await harness.killIngester();
      harness.proxy.set('pass');
    },
    async clear(harness) {
      await harness.startIngester();
    },
  },
  // Kafka is the only dependency a 202 needs: with Redis gone the gateway answers the
  // suite's key from its key cache and the ingester loads without it; no record may be
  // refused, and over the long outage the lag must not grow.
  kill9('redis', 'kill -9 of Redis (append-only file, fsync every second), restarted after the hold', { refusalsAllowed: false }),
  kill9('redis', 'Redis down for 60 s (kill -9, restarted after 60 s): no record refused, whatever the hold; the lag does not grow', {
    name: 'redis-down-60s',
    refusalsAllowed: false,
    holdSeconds: 60,
    maxLagGrowthSeconds: 5,
  }),
  kill9('clickhouse', 'kill -9 of ClickHouse, restarted after the hold'),
  kill9('registry', 'kill -9 of the schema registry, restarted after the hold'),
  {
    name: 'kafka-broker-kill',
    title: 'kill -9 of the Kafka broker leading partition 0, restarted after the hold',
    privateStackOnly: true,
    // Replicated: leadership moves once the controller fences the dead broker (broker
    // session timeout 6 s); a request may wait the gateway's produce timeout (5 s) on top.
    maxRefusalSeconds: (kafkaBrokers) => (kafkaBrokers >= 3 ? LEADER_ELECTION_BOUND_SECONDS : undefined),
    async inject(harness) {
      killedBroker = await harness.leaderBroker();
      harness.log(`killing ${killedBroker}`);
      if (!service(harness, killedBroker).signal('SIGKILL')) throw new Error(`${killedBroker} was not running`);
    },
    async clear(harness) {
      await service(harness, killedBroker).start();
    },
  },
  {
    name: 'topic-zstd',
    title:
      "the usage topic's compression.type set to zstd for the hold (the broker recompresses every batch, the gateway's included), then back to producer",
    privateStackOnly: false,
    async inject(harness) {
      await harness.setTopicConfig('compression.type', 'zstd');
    },
    async clear(harness) {
      await harness.setTopicConfig('compression.type', 'producer');
    },
  },
  {
    name: 'clickhouse-slow',
    title: 'ClickHouse paused (SIGSTOP) for the hold, then resumed (SIGCONT)',
    privateStackOnly: true,
    async inject(harness) {
      service(harness, 'clickhouse').signal('SIGSTOP');
    },
    async clear(harness) {
      service(harness, 'clickhouse').signal('SIGCONT');
    },
  },
  {
    name: 'redis-full',
    title: 'Redis at maxmemory (noeviction): every write refused for the hold',
    privateStackOnly: true,
    async inject(harness) {
      const info = String(await harness.redisCommand('info', 'memory'));
      const used = Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 1_000_000);
      await harness.redisCommand('config', 'set', 'maxmemory', String(Math.max(1, used - 1024)));
    },
    async clear(harness) {
      await harness.redisCommand('config', 'set', 'maxmemory', '1gb');
    },
  },
  {
    name: 'clickhouse-disk-full',
    title: 'every ClickHouse request answered with its disk-full error (code 243, NOT_ENOUGH_SPACE) by the proxy',
    privateStackOnly: false,
    async inject(harness) {
      harness.proxy.set('disk-full');
    },
    async clear(harness) {
      harness.proxy.set('pass');
    },
  },
  {
    name: 'network-partition',
    title: 'ingester to ClickHouse partitioned: connections stalled for half the hold, then reset and refused',
    privateStackOnly: false,
    async inject(harness, holdMs) {
      harness.proxy.set('stall');
      await sleep(holdMs / 2);
      harness.proxy.set('reset');
    },
    async clear(harness) {
      harness.proxy.set('pass');
    },
  },
];

export const scenarioNames = scenarios.map((scenario) => scenario.name);
