// The four services of the local stack. Each knows how to install itself when
// missing, start as a detached process that writes a pid file, tell whether it is
// healthy, and stop only the process it started.
import { createHash } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
// Relative, not @otm/shared: the test setup loads this file before any workspace is built.
import { kafkaRefusal } from '../../services/shared/src/kafka.js';
import { Agent as UndiciAgent, request as undiciRequest } from 'undici';
// Not @otm/shared: the test setup loads this file before any workspace is built.
import { Redis } from 'ioredis';
import { type StackConfig, kafkaNodePorts, stackAddresses } from './config.js';
import { SECURE_USERS, ensureSecureMaterial, secureEnvLines } from './secure.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** How long the local brokers keep messages (docs/topic-contract.md states it). */
export const BROKER_RETENTION_HOURS = 48;

export interface StackService {
  readonly name: string;
  readonly address: string;
  readonly logFile: string;
  /** Install when missing and start unless already healthy on its port. */
  start(): Promise<'started' | 'running'>;
  waitHealthy(timeoutMs: number): Promise<void>;
  healthy(): Promise<boolean>;
  down(): Promise<void>;
  tail(lines: number): Promise<string>;
  readonly startTimeoutMs: number;
  /** Sends `signal` to the process this stack started (kill -9, SIGSTOP/SIGCONT in the chaos suite); false when none runs. */
  signal(signal: NodeJS.Signals): boolean;
}

export function run(command: string, args: string[], options: { cwd?: string } = {}): void {
  const result = spawnSync(command, args, { stdio: ['ignore', 'inherit', 'inherit'], cwd: options.cwd });
  if (result.status !== 0) {
    throw new Error(`"${command} ${args.join(' ')}" failed with exit code ${result.status ?? result.signal}`);
  }
}

function onPath(binary: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${binary}`], { stdio: 'ignore' }).status === 0;
}

let aptUpdated = false;
/** Debian packages the stack needs, installed with apt when their binary is missing. */
export function ensureDebianPackage(binary: string, pkg: string): void {
  if (onPath(binary)) return;
  const sudo = process.getuid?.() === 0 ? [] : ['sudo'];
  const apt = (args: string[]) => {
    const command = [...sudo, 'env', 'DEBIAN_FRONTEND=noninteractive', 'apt-get', ...args];
    run(command[0]!, command.slice(1));
  };
  console.log(`installing ${pkg} (apt-get) ...`);
  if (!aptUpdated) {
    apt(['update', '-q']);
    aptUpdated = true;
  }
  apt(['install', '-y', '-q', '--no-install-recommends', pkg]);
}

function pomProperty(config: StackConfig, name: string): string {
  const pom = fs.readFileSync(path.join(config.root, 'deploy/maven/pom.xml'), 'utf8');
  const match = pom.match(new RegExp(`<${name}>([^<]+)</${name}>`));
  if (!match) throw new Error(`deploy/maven/pom.xml has no <${name}> property`);
  return match[1]!;
}

function mvn(config: StackConfig, args: string[]): void {
  if (!onPath('mvn')) throw new Error('Maven (mvn) is required to fetch Kafka and Apicurio Registry; see README prerequisites');
  run('mvn', ['-q', '-B', '-f', path.join(config.root, 'deploy/maven/pom.xml'), ...args]);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * True when pid is a live process that runs in, or names, our stack folder, so a
 * pid reused by an unrelated process is never signalled. (Redis rewrites its
 * command line, hence the working-directory check.)
 */
function isOurs(pid: number, stackDir: string): boolean {
  if (!isAlive(pid)) return false;
  try {
    const cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
    if (cwd.startsWith(stackDir)) return true;
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(stackDir);
  } catch {
    return false;
  }
}

export abstract class ProcessService implements StackService {
  abstract readonly name: string;
  abstract readonly address: string;
  abstract readonly startTimeoutMs: number;
  protected abstract readonly home: string;
  abstract healthy(): Promise<boolean>;
  /** Install binaries, write configuration; returns the command to start. */
  protected abstract prepare(): { command: string; args: string[]; cwd?: string };

  constructor(protected readonly config: StackConfig) {}

  get logFile(): string {
    return path.join(this.home, `${this.name}.log`);
  }
  private get pidFile(): string {
    return path.join(this.home, `${this.name}.pid`);
  }

  async start(): Promise<'started' | 'running'> {
    if (await this.healthy()) return 'running';
    fs.mkdirSync(this.home, { recursive: true });
    const { command, args, cwd } = this.prepare();
    const log = fs.openSync(this.logFile, 'a');
    const child = spawn(command, args, { cwd: cwd ?? this.home, detached: true, stdio: ['ignore', log, log] });
    fs.closeSync(log);
    if (child.pid === undefined) throw new Error(`${this.name}: could not start ${command}`);
    fs.writeFileSync(this.pidFile, String(child.pid));
    child.unref();
    return 'started';
  }

  async waitHealthy(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (await this.healthy()) return;
      const pid = this.pid();
      if (pid !== undefined && !isAlive(pid)) {
        throw new Error(`${this.name} exited during startup; last log lines:\n${await this.tail(30)}`);
      }
      await sleep(250);
    }
    throw new Error(`${this.name} not healthy after ${timeoutMs} ms; last log lines:\n${await this.tail(30)}`);
  }

  signal(signal: NodeJS.Signals): boolean {
    const pid = this.pid();
    if (pid === undefined || !isOurs(pid, this.config.dir)) return false;
    process.kill(pid, signal);
    return true;
  }

  private pid(): number | undefined {
    try {
      const pid = Number(fs.readFileSync(this.pidFile, 'utf8'));
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  async down(): Promise<void> {
    const pid = this.pid();
    if (pid === undefined) return;
    if (isOurs(pid, this.config.dir)) {
      process.kill(pid, 'SIGTERM');
      const deadline = Date.now() + 20_000;
      while (isAlive(pid) && Date.now() < deadline) await sleep(100);
      if (isAlive(pid)) process.kill(pid, 'SIGKILL');
      console.log(`${this.name} stopped`);
    }
    fs.rmSync(this.pidFile, { force: true });
  }

  async tail(lines: number): Promise<string> {
    try {
      return fs
        .readFileSync(this.logFile, 'utf8')
        .split('\n')
        .slice(-lines - 1)
        .join('\n');
    } catch {
      return '(no log yet)';
    }
  }
}

export class KafkaService extends ProcessService {
  readonly startTimeoutMs = 90_000;

  /** `node` is this broker's id (1-based) among `config.kafkaBrokers`. */
  constructor(
    config: StackConfig,
    private readonly node = 1,
  ) {
    super(config);
  }

  get name() {
    return this.config.kafkaBrokers === 1 ? 'kafka' : `kafka-${this.node}`;
  }
  protected get home() {
    return this.config.kafkaBrokers === 1
      ? path.join(this.config.dir, 'kafka')
      : path.join(this.config.dir, 'kafka-r3', `node-${this.node}`);
  }
  get address() {
    return `${this.config.host}:${kafkaNodePorts(this.config, this.node).broker}`;
  }

  /** The jars, fetched once per stack folder and shared by every broker. */
  libs(): string {
    const version = pomProperty(this.config, 'kafka.version');
    const libs = path.join(this.config.installDir, 'kafka', 'libs');
    const marker = path.join(libs, '.version');
    // The pom's digest beside the version: a dependency added to it fetches the jars again.
    const fetched = `${version} ${createHash('sha256')
      .update(fs.readFileSync(path.join(this.config.root, 'deploy/maven/pom.xml')))
      .digest('hex')}`;
    if (!fs.existsSync(marker) || fs.readFileSync(marker, 'utf8') !== fetched) {
      console.log(`fetching Kafka ${version} jars (mvn dependency:copy-dependencies) ...`);
      fs.rmSync(libs, { recursive: true, force: true });
      mvn(this.config, ['dependency:copy-dependencies', `-DoutputDirectory=${libs}`, '-DincludeScope=runtime']);
      fs.writeFileSync(marker, fetched);
    }
    return libs;
  }

  /** One cluster id for every broker of the profile: a random one, kept beside their folders. */
  private clusterId(classpath: string): string {
    const file = path.join(this.home, '..', 'cluster-id');
    if (this.config.kafkaBrokers > 1 && fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
    const uuid = spawnSync('java', ['-cp', classpath, 'kafka.tools.StorageTool', 'random-uuid'], { encoding: 'utf8' });
    const clusterId = uuid.stdout.trim().split('\n').pop() ?? '';
    if (uuid.status !== 0 || clusterId === '') throw new Error(`kafka storage tool failed: ${uuid.stderr}`);
    if (this.config.kafkaBrokers > 1) fs.writeFileSync(file, clusterId);
    return clusterId;
  }

  protected prepare() {
    const libs = this.libs();
    const data = path.join(this.home, 'data');
    const properties = path.join(this.home, 'server.properties');
    const { host, kafkaBrokers } = this.config;
    const ports = kafkaNodePorts(this.config, this.node);
    const voters = Array.from(
      { length: kafkaBrokers },
      (_, index) => `${index + 1}@${host}:${kafkaNodePorts(this.config, index + 1).controller}`,
    );
    // Single node: every internal topic has one replica. Three nodes: three replicas,
    // and a write needs two of them (acks=all then means "on two brokers").
    const replicas = kafkaBrokers;
    const minInSync = kafkaBrokers === 1 ? 1 : 2;
    fs.writeFileSync(
      properties,
      [
        'process.roles=broker,controller',
        `node.id=${this.node}`,
        `controller.quorum.voters=${voters.join(',')}`,
        ...(this.config.secure ? this.secureListeners(ports) : this.plainListeners(ports)),
        `log.dirs=${data}`,
        'num.partitions=1',
        `offsets.topic.replication.factor=${replicas}`,
        'offsets.topic.num.partitions=4',
        `transaction.state.log.replication.factor=${replicas}`,
        `transaction.state.log.min.isr=${minInSync}`,
        `share.coordinator.state.topic.replication.factor=${replicas}`,
        `share.coordinator.state.topic.min.isr=${minInSync}`,
        `default.replication.factor=${replicas}`,
        `min.insync.replicas=${minInSync}`,
        // A replica behind for longer than this leaves the in-sync set (Kafka's default, 30 s).
        'replica.lag.time.max.ms=30000',
        // Leader election after a broker dies: the controller fences a broker whose
        // heartbeats stop for the session timeout (Kafka's default 9 s; 6 s here) and moves
        // its partitions' leadership to in-sync replicas at once.
        'broker.session.timeout.ms=6000',
        'broker.heartbeat.interval.ms=1500',
        'group.initial.rebalance.delay.ms=0',
        'auto.create.topics.enable=false',
        `log.retention.hours=${BROKER_RETENTION_HOURS}`,
        // Topics are created with max.message.bytes=16 MiB (see services/shared/src/kafka.ts).
        'message.max.bytes=16777216',
        'replica.fetch.max.bytes=16777216',
        '',
      ].join('\n'),
    );
    const classpath = `${libs}/*`;
    // Storage is formatted once; the cluster id lives in meta.properties afterwards. The
    // secure profile's SCRAM users are written into the cluster's metadata then (KRaft).
    if (!fs.existsSync(path.join(data, 'meta.properties'))) {
      run('java', [
        '-cp',
        classpath,
        'kafka.tools.StorageTool',
        'format',
        '-t',
        this.clusterId(classpath),
        '-c',
        properties,
        ...(this.config.secure ? this.scramUsers() : []),
      ]);
    }
    return {
      command: 'java',
      args: [
        `-Xms${Math.min(256, this.config.kafkaHeapMb)}m`,
        `-Xmx${this.config.kafkaHeapMb}m`,
        // Kafka's own start script's GC settings (kafka-run-class.sh): G1 with a 20 ms
        // pause goal, not the JVM's default 200 ms, which shows in produce latency.
        '-server',
        '-XX:+UseG1GC',
        '-XX:MaxGCPauseMillis=20',
        '-XX:InitiatingHeapOccupancyPercent=35',
        '-XX:+ExplicitGCInvokesConcurrent',
        `-Dlog4j2.configurationFile=${path.join(this.config.root, 'deploy/kafka/log4j2.yaml')}`,
        '-cp',
        classpath,
        'kafka.Kafka',
        properties,
      ],
    };
  }

  private plainListeners(ports: { broker: number; controller: number }): string[] {
    const { host } = this.config;
    return [
      `listeners=PLAINTEXT://${host}:${ports.broker},CONTROLLER://${host}:${ports.controller}`,
      `advertised.listeners=PLAINTEXT://${host}:${ports.broker}`,
      'controller.listener.names=CONTROLLER',
      'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
      'inter.broker.listener.name=PLAINTEXT',
    ];
  }

  /**
   * The secure profile: clients reach the broker over SASL_SSL (SCRAM-SHA-256, SCRAM-SHA-512,
   * PLAIN) or over SSL with a client certificate the profile's CA signed (mTLS); nothing
   * in plaintext. The controller listener is the broker's own, on loopback.
   */
  private secureListeners(ports: { broker: number; controller: number }): string[] {
    const { host } = this.config;
    const material = ensureSecureMaterial(this.config);
    const { passwords } = material;
    const scram = 'org.apache.kafka.common.security.scram.ScramLoginModule required';
    return [
      `listeners=SASL_SSL://${host}:${ports.broker},SSL://${host}:${this.config.kafkaMtlsPort},CONTROLLER://${host}:${ports.controller}`,
      `advertised.listeners=SASL_SSL://${host}:${ports.broker},SSL://${host}:${this.config.kafkaMtlsPort}`,
      'controller.listener.names=CONTROLLER',
      'listener.security.protocol.map=SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT',
      'inter.broker.listener.name=SASL_SSL',
      'sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512',
      'sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN',
      `listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=${scram} username="${SECURE_USERS.kafkaBroker}" password="${passwords.kafkaBroker}";`,
      `listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=${scram};`,
      `listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_${SECURE_USERS.kafkaPlain}="${passwords.kafkaPlain}";`,
      'ssl.keystore.type=PEM',
      `ssl.keystore.location=${material.serverKeystoreFile}`,
      'ssl.truststore.type=PEM',
      `ssl.truststore.location=${material.caFile}`,
      'listener.name.ssl.ssl.client.auth=required',
      'ssl.endpoint.identification.algorithm=https',
    ];
  }

  private scramUsers(): string[] {
    const { passwords } = ensureSecureMaterial(this.config);
    const user = (mechanism: string, name: string, password: string) => ['--add-scram', `${mechanism}=[name=${name},password=${password}]`];
    return [
      ...user('SCRAM-SHA-512', SECURE_USERS.kafkaBroker, passwords.kafkaBroker),
      ...user('SCRAM-SHA-512', SECURE_USERS.kafkaServices, passwords.kafkaServices),
      ...user('SCRAM-SHA-256', SECURE_USERS.kafkaServices, passwords.kafkaServices),
    ];
  }

  async healthy(): Promise<boolean> {
    // Healthy means a metadata request succeeds, not merely an open port.
    return (await kafkaRefusal([this.address], this.config.secure ? secureKafkaClient(this.config) : {})) === undefined;
  }
}

export class RegistryService extends ProcessService {
  readonly name = 'registry';
  readonly startTimeoutMs = 150_000;
  protected get home() {
    return path.join(this.config.dir, 'registry');
  }
  get address() {
    return stackAddresses(this.config).SCHEMA_REGISTRY_URL;
  }

  protected prepare() {
    const version = pomProperty(this.config, 'apicurio.version');
    const app = path.join(this.config.installDir, 'registry', 'app');
    const marker = path.join(app, '.version');
    if (!fs.existsSync(marker) || fs.readFileSync(marker, 'utf8') !== version) {
      console.log(`fetching Apicurio Registry ${version} (mvn dependency:copy) ...`);
      fs.rmSync(app, { recursive: true, force: true });
      fs.mkdirSync(app, { recursive: true });
      const artifact = `io.apicurio:apicurio-registry-app:${version}:tar.gz:all`;
      // Run outside the pom: newer dependency plugins insist on the artifact's parent
      // pom, which is not published; the 2.8 copy goal does not read it.
      run(
        'mvn',
        ['-q', '-B', 'org.apache.maven.plugins:maven-dependency-plugin:2.8:copy', `-Dartifact=${artifact}`, `-DoutputDirectory=${app}`],
        { cwd: app },
      );
      const archive = path.join(app, `apicurio-registry-app-${version}-all.tar.gz`);
      run('tar', ['xzf', archive, '-C', app]);
      fs.rmSync(archive);
      fs.writeFileSync(marker, version);
    }
    // 3.0.x ships a legacy runner jar; later 3.x the fast-jar quarkus-run.jar.
    const jar = fs.existsSync(path.join(app, 'quarkus-run.jar'))
      ? 'quarkus-run.jar'
      : fs.readdirSync(app).find((file) => file.endsWith('-runner.jar'));
    if (!jar) throw new Error(`no runnable jar in ${app}`);
    return {
      command: 'java',
      cwd: app,
      args: [
        `-Xmx${this.config.registryHeapMb}m`,
        '-XX:TieredStopAtLevel=1',
        `-Dquarkus.http.host=${this.config.host}`,
        ...(this.config.secure ? this.secureProperties() : [`-Dquarkus.http.port=${this.config.registryPort}`]),
        // Persistent storage: a restart must keep every schema id, or messages
        // already on the topic become undecodable.
        '-Dapicurio.storage.kind=sql',
        '-Dapicurio.storage.sql.kind=h2',
        `-Dapicurio.datasource.url=jdbc:h2:file:${path.join(this.home, 'db', 'registry')}`,
        '-Dapicurio.datasource.username=sa',
        '-Dapicurio.datasource.password=sa',
        // Pinned: the Confluent-compatible API hands out content ids.
        '-Dapicurio.ccompat.legacy-id-mode.enabled=false',
        '-Dquarkus.log.level=WARN',
        '-jar',
        jar,
      ],
    };
  }

  /**
   * The secure profile: HTTPS only (the plain port closed) with the profile's certificate,
   * and HTTP basic auth on every path for one user: Quarkus' own HTTPS and embedded-user
   * settings, which Apicurio is built on (no proxy in front).
   */
  private secureProperties(): string[] {
    const material = ensureSecureMaterial(this.config);
    return [
      `-Dquarkus.http.ssl-port=${this.config.registryPort}`,
      '-Dquarkus.http.insecure-requests=disabled',
      `-Dquarkus.http.ssl.certificate.files=${material.serverCertFile}`,
      `-Dquarkus.http.ssl.certificate.key-files=${material.serverKeyFile}`,
      '-Dquarkus.http.auth.basic=true',
      '-Dquarkus.security.users.embedded.enabled=true',
      '-Dquarkus.security.users.embedded.plain-text=true',
      `-Dquarkus.security.users.embedded.users.${SECURE_USERS.registry}=${material.passwords.registry}`,
      '-Dquarkus.http.auth.permission.everything.paths=/*',
      '-Dquarkus.http.auth.permission.everything.policy=authenticated',
    ];
  }

  async healthy(): Promise<boolean> {
    try {
      if (this.config.secure) {
        const material = ensureSecureMaterial(this.config);
        const response = await undiciRequest(`${this.address}/subjects`, {
          dispatcher: new UndiciAgent({ connect: { ca: fs.readFileSync(material.caFile) } }),
          headers: { authorization: `Basic ${Buffer.from(`${SECURE_USERS.registry}:${material.passwords.registry}`).toString('base64')}` },
          signal: AbortSignal.timeout(2000),
        });
        await response.body.dump();
        return response.statusCode === 200;
      }
      const response = await fetch(`${this.address}/subjects`, { signal: AbortSignal.timeout(2000) });
      return response.ok;
    } catch {
      return false;
    }
  }
}

export class RedisService extends ProcessService {
  readonly name = 'redis';
  readonly startTimeoutMs = 20_000;
  protected get home() {
    return path.join(this.config.dir, 'redis');
  }
  get address() {
    return stackAddresses(this.config).REDIS_URL;
  }

  protected prepare() {
    ensureDebianPackage('redis-server', 'redis-server');
    const configFile = path.join(this.home, 'redis.conf');
    fs.writeFileSync(
      configFile,
      [
        `bind ${this.config.host}`,
        ...(this.config.secure ? this.secureLines() : [`port ${this.config.redisPort}`]),
        `dir ${this.home}`,
        'daemonize no',
        'protected-mode yes',
        // Dedupe keys survive a restart (AOF, fsync every second). What a crash
        // still loses, ClickHouse's event-key collapsing absorbs.
        'appendonly yes',
        'appendfsync everysec',
        'save ""',
        'maxmemory 1gb',
        'maxmemory-policy noeviction',
        'notify-keyspace-events ""',
        '',
      ].join('\n'),
    );
    return { command: 'redis-server', args: [configFile] };
  }

  /**
   * The secure profile: TLS only (the plain port closed) and one ACL user, the default user
   * off. The user may run what the services run on the keys and channels under the prefix
   * `otm:`, and nothing from @dangerous but INFO (ioredis' ready check).
   */
  private secureLines(): string[] {
    const material = ensureSecureMaterial(this.config);
    return [
      'port 0',
      `tls-port ${this.config.redisPort}`,
      `tls-cert-file ${material.serverCertFile}`,
      `tls-key-file ${material.serverKeyFile}`,
      `tls-ca-cert-file ${material.caFile}`,
      'tls-auth-clients no',
      'user default off',
      `user ${SECURE_USERS.redis} on >${material.passwords.redis} ~otm:* &otm:* +@all -@dangerous +info`,
    ];
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

  private plainHealthy(): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = net.connect({ host: this.config.host, port: this.config.redisPort });
      const done = (ok: boolean) => {
        socket.destroy();
        resolve(ok);
      };
      socket.setTimeout(1000, () => done(false));
      socket.on('error', () => done(false));
      socket.on('connect', () => socket.write('PING\r\n'));
      socket.on('data', (chunk) => done(chunk.toString().startsWith('+PONG')));
    });
  }
}

export class ClickHouseService extends ProcessService {
  readonly name: string = 'clickhouse';
  readonly startTimeoutMs = 60_000;
  protected get home() {
    return path.join(this.config.dir, 'clickhouse');
  }
  get address() {
    return `http${this.config.secure ? 's' : ''}://${this.config.host}:${this.httpPort}`;
  }
  protected get httpPort(): number {
    return this.config.clickhouseHttpPort;
  }
  protected get tcpPort(): number {
    return this.config.clickhouseTcpPort;
  }
  /** Configuration beside config.xml (config.d/, which ClickHouse merges into it); none for the single server. */
  protected extraConfig(): string | undefined {
    return undefined;
  }

  protected prepare() {
    ensureDebianPackage('clickhouse-server', 'clickhouse-server');
    for (const folder of ['log', 'data', 'tmp', 'user_files', 'format_schemas', 'config.d']) {
      fs.mkdirSync(path.join(this.home, folder), { recursive: true });
    }
    const template = fs.readFileSync(path.join(this.config.root, 'deploy/clickhouse/config.xml.template'), 'utf8');
    const values: Record<string, string> = {
      dir: this.home,
      listenHost: '127.0.0.1',
      httpPort: String(this.httpPort),
      tcpPort: String(this.tcpPort),
    };
    const configXml = template.replace(/\$\{(\w+)\}/g, (_, key: string) => values[key] ?? '');
    fs.writeFileSync(path.join(this.home, 'config.xml'), this.config.secure ? this.secureConfig(configXml) : configXml);
    const extra = this.extraConfig();
    const extraFile = path.join(this.home, 'config.d', 'otm.xml');
    if (extra) fs.writeFileSync(extraFile, extra);
    else fs.rmSync(extraFile, { force: true });
    if (this.config.secure) fs.writeFileSync(path.join(this.home, 'users.xml'), this.secureUsers());
    else fs.copyFileSync(path.join(this.config.root, 'deploy/clickhouse/users.xml'), path.join(this.home, 'users.xml'));
    const binary = onPath('clickhouse-server') ? 'clickhouse-server' : '/usr/sbin/clickhouse-server';
    return { command: binary, args: [`--config-file=${path.join(this.home, 'config.xml')}`] };
  }

  /** The secure profile: HTTPS and the native protocol over TLS only, with the profile's certificate. */
  private secureConfig(configXml: string): string {
    const material = ensureSecureMaterial(this.config);
    return configXml
      .replace(/^\s*<http_port>.*\n/m, `    <https_port>${this.httpPort}</https_port>\n`)
      .replace(/^\s*<tcp_port>.*\n/m, `    <tcp_port_secure>${this.tcpPort}</tcp_port_secure>\n`)
      .replace(
        '</yandex>',
        [
          '    <openSSL>',
          '        <server>',
          `            <certificateFile>${material.serverCertFile}</certificateFile>`,
          `            <privateKeyFile>${material.serverKeyFile}</privateKeyFile>`,
          '            <verificationMode>none</verificationMode>',
          '            <loadDefaultCAFile>false</loadDefaultCAFile>',
          '            <cacheSessions>true</cacheSessions>',
          '            <disableProtocols>sslv2,sslv3,tlsv1,tlsv1_1</disableProtocols>',
          '            <preferServerCiphers>true</preferServerCiphers>',
          '        </server>',
          '    </openSSL>',
          '</yandex>',
        ].join('\n'),
      );
  }

  /**
   * The secure profile's users (18.16 has no SQL users or GRANT: users.xml). `default` has a
   * password nobody is given; otm_migrator changes the schema (npm run migrate); otm_writer
   * (ingester, admin jobs) and otm_reader (analytics, readonly=2: SELECT and settings) see
   * only the profile's database. docs/production.md gives the GRANTs of current releases.
   */
  private secureUsers(): string {
    const { passwords } = ensureSecureMaterial(this.config);
    const sha256 = (password: string) => createHash('sha256').update(password).digest('hex');
    const user = (name: string, password: string, profile: string, databases?: string[]) =>
      [
        `        <${name}>`,
        `            <password_sha256_hex>${sha256(password)}</password_sha256_hex>`,
        '            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>',
        `            <profile>${profile}</profile>`,
        '            <quota>default</quota>',
        ...(databases
          ? [
              '            <allow_databases>',
              ...databases.map((name) => `                <database>${name}</database>`),
              '            </allow_databases>',
            ]
          : []),
        `        </${name}>`,
      ].join('\n');
    const database = this.config.clickhouseDatabase;
    const limits = '<max_memory_usage>4000000000</max_memory_usage><load_balancing>random</load_balancing>';
    return [
      '<?xml version="1.0"?>',
      "<!-- The secure profile's users, written by scripts/stack/services.ts. -->",
      '<yandex>',
      '    <profiles>',
      `        <default>${limits}</default>`,
      `        <reader>${limits}<readonly>2</readonly></reader>`,
      '    </profiles>',
      '    <users>',
      user('default', passwords.clickhouseDefault, 'default'),
      user(SECURE_USERS.clickhouseMigrator, passwords.clickhouseMigrator, 'default'),
      user(SECURE_USERS.clickhouseWriter, passwords.clickhouseWriter, 'default', [database, 'system']),
      user(SECURE_USERS.clickhouseReader, passwords.clickhouseReader, 'reader', [database, 'system']),
      '    </users>',
      '    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>',
      '</yandex>',
      '',
    ].join('\n');
  }

  async healthy(): Promise<boolean> {
    try {
      if (this.config.secure) {
        const material = ensureSecureMaterial(this.config);
        const response = await undiciRequest(`${this.address}/ping`, {
          dispatcher: new UndiciAgent({ connect: { ca: fs.readFileSync(material.caFile) } }),
          signal: AbortSignal.timeout(2000),
        });
        await response.body.dump();
        return response.statusCode === 200;
      }
      const response = await fetch(`${this.address}/ping`, { signal: AbortSignal.timeout(2000) });
      return response.ok;
    } catch {
      return false;
    }
  }
}

/** Debian's Chromium, for the dashboard's browser tests (never a downloaded browser). */
export function ensureChromium(): string {
  ensureDebianPackage('chromium', 'chromium');
  return '/usr/bin/chromium';
}

export function kafkaServices(config: StackConfig): KafkaService[] {
  return Array.from({ length: config.kafkaBrokers }, (_, index) => new KafkaService(config, index + 1));
}

export function stackServices(config: StackConfig): StackService[] {
  return [...kafkaServices(config), new RegistryService(config), new RedisService(config), new ClickHouseService(config)];
}

/** Start every service (installing what is missing), then wait for all to be healthy. */
export async function stackUp(config: StackConfig): Promise<void> {
  const services = stackServices(config);
  for (const service of services) {
    const state = await service.start();
    if (state === 'started') console.log(`${service.name}: starting`);
  }
  await Promise.all(services.map((service) => service.waitHealthy(service.startTimeoutMs)));
}

export function stackEnvLines(config: StackConfig): string[] {
  if (config.secure) return secureEnvLines(config);
  return Object.entries(stackAddresses(config)).map(([name, value]) => `${name}=${value}`);
}

/** kafkajs settings of the secure profile's services: SASL_SSL, SCRAM-SHA-512, the profile's CA. */
export function secureKafkaClient(config: StackConfig): {
  ssl: { ca: Buffer[] };
  sasl: { mechanism: 'scram-sha-512'; username: string; password: string };
} {
  const material = ensureSecureMaterial(config);
  return {
    ssl: { ca: [fs.readFileSync(material.caFile)] },
    sasl: { mechanism: 'scram-sha-512', username: SECURE_USERS.kafkaServices, password: material.passwords.kafkaServices },
  };
}
