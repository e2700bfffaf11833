// The local stack: Kafka (KRaft), Apicurio Registry, Redis and ClickHouse as real
// processes on loopback, installed from Maven Central and Debian's packages when
// missing. `up` is idempotent, `down` stops only what `up` started (by pid file).
//
//   npm run stack -- [--kafka-brokers 3 | --secure] up|down|status|logs [service]|env
//   npm run stack -- kafka <console-consumer|console-producer|topics|consumer-groups|get-offsets> [tool options]
import { spawnSync } from 'node:child_process';
import { Command, Option } from 'commander';
import { loadStackConfig, type StackConfig } from './stack/config.js';
import { kafkaServices, stackServices, stackEnvLines, stackUp } from './stack/services.js';
import { CLUSTER_NAME, clusterDown, clusterServices, clusterUp } from './stack/clickhouse-cluster.js';
import { releaseStaleMounts } from './stack/stale-mounts.js';

const program = new Command('stack')
  .description('Run the local otm-telemetry stack without Docker')
  .addOption(
    new Option('--kafka-brokers <n>', 'Kafka brokers: 1, or 3 (replication factor 3, min.insync.replicas 2)')
      .choices(['1', '3'])
      .env('OTM_STACK_KAFKA_BROKERS'),
  )
  .option(
    '--secure',
    'the secure profile: TLS and authentication only (Kafka SASL_SSL/SCRAM and mTLS, registry HTTPS with basic auth, ClickHouse HTTPS with three users, Redis TLS with an ACL user), its own CA under .stack/secure',
  );
let config: StackConfig = loadStackConfig(process.env);
program.hook('preAction', () => {
  const { kafkaBrokers, secure } = program.opts<{ kafkaBrokers?: string; secure?: boolean }>();
  config = loadStackConfig({ ...process.env, OTM_STACK_KAFKA_BROKERS: kafkaBrokers ?? '1', OTM_STACK_SECURE: secure ? '1' : '' });
});

program
  .command('up')
  .description('install what is missing, start every service not already running, wait until healthy')
  .action(async () => {
    const started = Date.now();
    await stackUp(config);
    console.log(`stack up in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await printStatus();
  });

program
  .command('down')
  .description(
    'stop the services this stack started (never a process it did not start), the brokers of both Kafka profiles and the ClickHouse cluster profile',
  )
  .action(async () => {
    releaseStaleMounts();
    await clusterDown(config);
    const replicated = loadStackConfig({ ...process.env, OTM_STACK_KAFKA_BROKERS: '3', OTM_STACK_SECURE: '' });
    const single = loadStackConfig({ ...process.env, OTM_STACK_KAFKA_BROKERS: '1', OTM_STACK_SECURE: '' });
    const secure = loadStackConfig({ ...process.env, OTM_STACK_KAFKA_BROKERS: '1', OTM_STACK_SECURE: '1' });
    for (const service of [...stackServices(secure), ...kafkaServices(replicated), ...stackServices(single)].reverse()) {
      await service.down();
    }
  });

program
  .command('cluster')
  .description(
    `the ClickHouse cluster profile: ZooKeeper and two ClickHouse servers, replicas of one shard of cluster "${CLUSTER_NAME}" (docs/clickhouse-cluster.md)`,
  )
  .argument('<action>', 'up, down or status')
  .action(async (action: string) => {
    if (action === 'up') await clusterUp(config);
    else if (action === 'down') await clusterDown(config);
    else if (action !== 'status') program.error(`unknown action "${action}"; one of up, down, status`);
    let all = true;
    for (const service of clusterServices(config)) {
      const healthy = await service.healthy();
      all &&= healthy;
      console.log(`${service.name.padEnd(14)} ${service.address.padEnd(36)} ${healthy ? 'healthy' : 'down'}`);
    }
    if (action !== 'down') process.exitCode = all ? 0 : 1;
  });

program
  .command('status')
  .description('one line per service: name, address, healthy or down')
  .action(async () => {
    const healthy = await printStatus();
    process.exitCode = healthy ? 0 : 1;
  });

program
  .command('logs')
  .argument('[service]', 'kafka (kafka-1..3 with --kafka-brokers 3), registry, redis or clickhouse; all when omitted')
  .option('-n, --lines <n>', 'lines from the end of each log', '40')
  .action(async (name: string | undefined, options: { lines: string }) => {
    for (const service of stackServices(config)) {
      if (name && service.name !== name) continue;
      console.log(`==> ${service.name} (${service.logFile})`);
      console.log(await service.tail(Number(options.lines)));
    }
  });

program
  .command('env')
  .description('the stack addresses (with --secure: and credentials and CA files) as shell-sourceable NAME=value lines')
  .action(() => {
    console.log(stackEnvLines(config).join('\n'));
  });

// Kafka's own command-line tools, from the jars the stack already fetched, pointed at
// the stack's brokers unless told otherwise.
const KAFKA_TOOLS: Record<string, string> = {
  'console-consumer': 'org.apache.kafka.tools.consumer.ConsoleConsumer',
  'console-producer': 'org.apache.kafka.tools.ConsoleProducer',
  topics: 'org.apache.kafka.tools.TopicCommand',
  'consumer-groups': 'org.apache.kafka.tools.consumer.group.ConsumerGroupCommand',
  'get-offsets': 'org.apache.kafka.tools.GetOffsetShell',
};

program
  .command('kafka')
  .description(
    `run a Kafka tool against the stack: ${Object.keys(KAFKA_TOOLS).join(', ')} (then the tool's own options; --bootstrap-server is added)`,
  )
  .argument('<tool>', 'which tool')
  .argument('[options...]', "the tool's options, e.g. --topic telemetry.usage.v1 --from-beginning --max-messages 5")
  .allowUnknownOption()
  .helpOption(false)
  .action((tool: string, options: string[]) => {
    const mainClass = KAFKA_TOOLS[tool];
    if (!mainClass) program.error(`unknown tool "${tool}"; one of ${Object.keys(KAFKA_TOOLS).join(', ')}`);
    const [broker] = kafkaServices(config);
    if (config.secure && !options.includes('--command-config'))
      program.error('the secure profile needs --command-config <client.properties>');
    const args = options.includes('--bootstrap-server') ? options : ['--bootstrap-server', broker!.address, ...options];
    const result = spawnSync('java', ['-cp', `${broker!.libs()}/*`, mainClass!, ...args], { stdio: 'inherit' });
    process.exitCode = result.status ?? 1;
  });

async function printStatus(): Promise<boolean> {
  let all = true;
  for (const service of stackServices(config)) {
    const healthy = await service.healthy();
    all &&= healthy;
    console.log(`${service.name.padEnd(10)} ${service.address.padEnd(36)} ${healthy ? 'healthy' : 'down'}`);
  }
  return all;
}

await program.parseAsync(process.argv);
