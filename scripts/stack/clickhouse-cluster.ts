// The ClickHouse cluster profile of the local stack: ZooKeeper (the server's jars from
// Maven Central, run with the machine's JDK) and two ClickHouse servers, two replicas
// of the one shard of the cluster `otm`, on ports of their own beside the single
// server's. `npm run stack -- cluster up|down|status`; the cluster test starts it itself
// (test/clickhouse-cluster.faults.test.ts; docs/clickhouse-cluster.md).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { StackConfig } from './config.js';
import { ClickHouseService, ProcessService, run } from './services.js';

export const CLUSTER_NAME = 'otm';
export const REPLICAS = 2;

/** Ports of the profile: ZooKeeper's client port, and per replica (1-based) HTTP, native and interserver ports. */
export function clusterPorts(replica: number) {
  return { zookeeper: 12181, http: 18123 + 10 * replica, tcp: 19000 + 10 * replica, interserver: 19005 + 10 * replica };
}

export class ZooKeeperService extends ProcessService {
  readonly name = 'zookeeper';
  readonly startTimeoutMs = 60_000;
  protected get home() {
    return path.join(this.config.dir, 'clickhouse-cluster', 'zookeeper');
  }
  get address() {
    return `${this.config.host}:${clusterPorts(1).zookeeper}`;
  }

  /** The server's jars, fetched once per version of deploy/maven/zookeeper/pom.xml. */
  private libs(): string {
    const pom = path.join(this.config.root, 'deploy/maven/zookeeper/pom.xml');
    const libs = path.join(this.home, 'libs');
    const marker = path.join(libs, '.pom');
    const fetched = createHash('sha256').update(fs.readFileSync(pom)).digest('hex');
    if (!fs.existsSync(marker) || fs.readFileSync(marker, 'utf8') !== fetched) {
      console.log('fetching ZooKeeper jars (mvn dependency:copy-dependencies) ...');
      fs.rmSync(libs, { recursive: true, force: true });
      run('mvn', ['-q', '-B', '-f', pom, 'dependency:copy-dependencies', `-DoutputDirectory=${libs}`, '-DincludeScope=runtime']);
      fs.writeFileSync(marker, fetched);
    }
    return libs;
  }

  protected prepare() {
    const libs = this.libs();
    fs.mkdirSync(path.join(this.home, 'data'), { recursive: true });
    const configFile = path.join(this.home, 'zoo.cfg');
    fs.writeFileSync(
      configFile,
      [
        'tickTime=2000',
        `dataDir=${path.join(this.home, 'data')}`,
        `clientPort=${clusterPorts(1).zookeeper}`,
        `clientPortAddress=${this.config.host}`,
        'admin.enableServer=false',
        '4lw.commands.whitelist=srvr',
        // ClickHouse's sessions; its default 30 s timeout is within these bounds.
        'maxSessionTimeout=60000',
      ].join('\n') + '\n',
    );
    return {
      command: 'java',
      args: ['-Xmx128m', '-cp', `${libs}/*`, 'org.apache.zookeeper.server.ZooKeeperServerMain', configFile],
    };
  }

  /**
   * `srvr` answers with the server's version once it serves requests (`ruok` says `imok`
   * while it still loads its data, and ClickHouse 18.16 will not start its replicated
   * tables against a ZooKeeper that is not serving).
   */
  healthy(): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = net.connect({ host: this.config.host, port: clusterPorts(1).zookeeper });
      let answer = '';
      socket.setTimeout(2000, () => socket.destroy());
      socket.on('connect', () => socket.write('srvr'));
      socket.on('data', (data) => (answer += data.toString()));
      socket.on('close', () => resolve(answer.startsWith('Zookeeper version')));
      socket.on('error', () => resolve(false));
    });
  }
}

/** One replica (1-based) of the shard: the single server's configuration plus the cluster's. */
export class ClickHouseReplicaService extends ClickHouseService {
  override readonly name: string;
  constructor(
    config: StackConfig,
    readonly replica: number,
  ) {
    super(config);
    this.name = `clickhouse-${replica}`;
  }
  protected override get home() {
    return path.join(this.config.dir, 'clickhouse-cluster', `replica-${this.replica}`);
  }
  /** The replicas keep their data on the machine's filesystem (the cluster test's data is small). */
  protected override get volumeGiB() {
    return 0;
  }
  protected override get httpPort() {
    return clusterPorts(this.replica).http;
  }
  protected override get tcpPort() {
    return clusterPorts(this.replica).tcp;
  }
  protected override prepare() {
    const command = super.prepare();
    // A replica killed mid-insert (the cluster test does it) may hold parts ZooKeeper does
    // not list, and 18.16 then refuses to start ("The local set of parts … doesn't look
    // like the set of parts in ZooKeeper"). This flag, removed by the server once read,
    // lets it set those parts aside and fetch what it lacks from the other replica: the
    // recovery ClickHouse documents, applied to every start of this local test cluster.
    fs.mkdirSync(path.join(this.home, 'data', 'flags'), { recursive: true });
    fs.writeFileSync(path.join(this.home, 'data', 'flags', 'force_restore_data'), '');
    return command;
  }

  protected override extraConfig() {
    const replicas = Array.from({ length: REPLICAS }, (_, index) => clusterPorts(index + 1))
      .map((ports) => `                <replica><host>${this.config.host}</host><port>${ports.tcp}</port></replica>`)
      .join('\n');
    return `<?xml version="1.0"?>
<!-- Written by scripts/stack/clickhouse-cluster.ts: replica ${this.replica} of the one shard of cluster ${CLUSTER_NAME}. -->
<yandex>
    <interserver_http_host>${this.config.host}</interserver_http_host>
    <interserver_http_port>${clusterPorts(this.replica).interserver}</interserver_http_port>
    <zookeeper>
        <node><host>${this.config.host}</host><port>${clusterPorts(1).zookeeper}</port></node>
        <session_timeout_ms>30000</session_timeout_ms>
    </zookeeper>
    <remote_servers>
        <${CLUSTER_NAME}>
            <shard>
                <!-- The replicated tables copy the rows; a Distributed insert writes one replica. -->
                <internal_replication>true</internal_replication>
${replicas}
            </shard>
        </${CLUSTER_NAME}>
    </remote_servers>
    <macros>
        <shard>01</shard>
        <replica>replica-${this.replica}</replica>
    </macros>
    <distributed_ddl>
        <path>/clickhouse/task_queue/ddl</path>
    </distributed_ddl>
</yandex>
`;
  }
}

export function clusterServices(config: StackConfig): [ZooKeeperService, ...ClickHouseReplicaService[]] {
  return [new ZooKeeperService(config), ...Array.from({ length: REPLICAS }, (_, index) => new ClickHouseReplicaService(config, index + 1))];
}

/** Starts ZooKeeper, then the replicas, and waits until all are healthy. */
export async function clusterUp(config: StackConfig): Promise<void> {
  const [zookeeper, ...replicas] = clusterServices(config);
  if ((await zookeeper.start()) === 'started') console.log('zookeeper: starting');
  await zookeeper.waitHealthy(zookeeper.startTimeoutMs);
  for (const replica of replicas) if ((await replica.start()) === 'started') console.log(`${replica.name}: starting`);
  await Promise.all(replicas.map((replica) => replica.waitHealthy(replica.startTimeoutMs)));
}

export async function clusterDown(config: StackConfig): Promise<void> {
  for (const service of clusterServices(config).reverse()) await service.down();
}
