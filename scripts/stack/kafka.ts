// Kafka (Apache's jars from Maven Central, KRaft) for the local stack, plaintext or the
// secure profile's SASL_SSL and mTLS listeners.
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
// Relative, not @otm/shared: the test setup loads this file before any workspace is built.
import { kafkaRefusal, kafkaSecurityFrom, type KafkaSecurity } from '../../services/shared/src/kafka.js';
import { type StackConfig, kafkaNodePorts } from './config.js';
import { SECURE_USERS, ensureSecureMaterial, secureServiceEnv } from './secure.js';
import { ProcessService, mvn, pomProperty, run, BROKER_RETENTION_HOURS } from './process-service.js';

/**
 * The secure profile's super users: the broker itself, the controller listener's
 * anonymous principal (that listener is the broker's own, on loopback), the operator
 * (`otm`: tooling, the tests' own clients), and the PLAIN and mTLS clients the profile's
 * tests sign in as. Each service signs in as a principal of its own with only its ACLs.
 */
const SUPER_USERS = [
  `User:${SECURE_USERS.kafkaBroker}`,
  'User:ANONYMOUS',
  `User:${SECURE_USERS.kafkaServices}`,
  `User:${SECURE_USERS.kafkaPlain}`,
  'User:CN=otm-client',
];

/** Written beside a secure broker's data once it was formatted with these SCRAM users; a folder formatted with others is formatted again. */
const SECURE_FORMAT = 'scram users: otm-broker otm otm-gateway otm-ingester otm-admin';

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
    // A secure broker formatted before its users were these holds no others: formatted
    // again (the profile's local data; its topics and offsets start anew).
    const formatMarker = path.join(this.home, 'secure-format');
    if (
      this.config.secure &&
      fs.existsSync(path.join(data, 'meta.properties')) &&
      !(fs.existsSync(formatMarker) && fs.readFileSync(formatMarker, 'utf8') === SECURE_FORMAT)
    ) {
      console.log("kafka: the secure profile's users changed; its data folder is formatted again");
      fs.rmSync(data, { recursive: true, force: true });
    }
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
      if (this.config.secure) fs.writeFileSync(formatMarker, SECURE_FORMAT);
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
      // Every request is authorized (kafka-acls.ts): the services by their ACLs, these
      // principals as super users.
      'authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer',
      `super.users=${SUPER_USERS.join(';')}`,
    ];
  }

  private scramUsers(): string[] {
    const { passwords } = ensureSecureMaterial(this.config);
    const user = (mechanism: string, name: string, password: string) => ['--add-scram', `${mechanism}=[name=${name},password=${password}]`];
    return [
      ...user('SCRAM-SHA-512', SECURE_USERS.kafkaBroker, passwords.kafkaBroker),
      ...user('SCRAM-SHA-512', SECURE_USERS.kafkaServices, passwords.kafkaServices),
      ...user('SCRAM-SHA-256', SECURE_USERS.kafkaServices, passwords.kafkaServices),
      ...user('SCRAM-SHA-512', SECURE_USERS.kafkaGateway, passwords.kafkaGateway),
      ...user('SCRAM-SHA-512', SECURE_USERS.kafkaIngester, passwords.kafkaIngester),
      ...user('SCRAM-SHA-512', SECURE_USERS.kafkaAdmin, passwords.kafkaAdmin),
    ];
  }

  async healthy(): Promise<boolean> {
    // Healthy means a metadata request succeeds, not merely an open port.
    return (await kafkaRefusal([this.address], this.config.secure ? secureKafkaClient(this.config) : {})) === undefined;
  }
}

export function kafkaServices(config: StackConfig): KafkaService[] {
  return Array.from({ length: config.kafkaBrokers }, (_, index) => new KafkaService(config, index + 1));
}

/** The Kafka client settings of the secure profile's operator (SASL_SSL, SCRAM-SHA-512, the profile's CA), by the services' own mapping. */
export function secureKafkaClient(config: StackConfig): KafkaSecurity {
  const env = secureServiceEnv(config, 'operator');
  return kafkaSecurityFrom({
    KAFKA_SECURITY_PROTOCOL: env.KAFKA_SECURITY_PROTOCOL ?? '',
    KAFKA_SASL_MECHANISM: env.KAFKA_SASL_MECHANISM ?? '',
    KAFKA_SASL_USERNAME: env.KAFKA_SASL_USERNAME ?? '',
    KAFKA_SASL_PASSWORD: env.KAFKA_SASL_PASSWORD ?? '',
    KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: '',
    KAFKA_SASL_OAUTHBEARER_TOKEN_COMMAND: '',
    KAFKA_TLS_CA_FILE: env.KAFKA_TLS_CA_FILE ?? '',
    KAFKA_TLS_CERT_FILE: '',
    KAFKA_TLS_KEY_FILE: '',
  });
}
