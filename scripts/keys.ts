// Operators' key management against the key store in Redis.
//   npm run keys -- create --env prod --name checkout-service [--description ...] [--capture redact] [--json]
//   npm run keys -- list [--json]
//   npm run keys -- delete <id>
//   npm run keys -- capture <id> <full|redact|metadata-only>
//   npm run keys -- env-capture [<environment> <full|redact|metadata-only>]
import { redisPrefixFrom, redisOptionsFrom } from '@otm/shared/redis';
import { Command, Option } from 'commander';
import { CAPTURE_POLICIES, ENVIRONMENTS, isSafeIdentifier, type CapturePolicy, type Environment } from '@otm/schemas';
import { infrastructureSpec, parseConfig } from '@otm/shared/config';
import { reachClickHouse, reachRedis, runCommand } from '@otm/shared/dependency-failure';
import { KeyStore } from '@otm/shared/keys/key-store';
import { generateKeyId } from '@otm/shared/keys/key-format';
import { AuditLog, AuditUnavailableError, type AuditEntry } from '@otm/shared/audit';
import { clickhouseSettingsFrom, createClickHouse } from '@otm/shared/clickhouse';
import os from 'node:os';

const config = parseConfig(process.env, infrastructureSpec);
// On a Redis Cluster the prefix is a hash tag (services/shared/src/redis.ts).
const redisPrefix = redisPrefixFrom(config);

async function withStore<T>(work: (store: KeyStore) => Promise<T>): Promise<T> {
  const redis = await reachRedis(config.REDIS_URL, redisOptionsFrom(config, 'keys-cli'));
  try {
    return await work(new KeyStore(redis, redisPrefix));
  } finally {
    redis.disconnect();
  }
}

/** A change through the audit log (admin_audit): its entry first; none written, no change (exit 1). */
async function audited<T>(entry: Omit<AuditEntry, 'actor'>, change: (store: KeyStore) => Promise<T>): Promise<T> {
  const clickhouse = createClickHouse(clickhouseSettingsFrom(config));
  const audit = new AuditLog(clickhouse);
  try {
    // The audit log is in ClickHouse: a wrong address or password said as such, before anything changes.
    await reachClickHouse(clickhouse, config.CLICKHOUSE_URL, config.CLICKHOUSE_DATABASE);
    return await withStore((store) =>
      audit.around({ ...entry, actor: `cli:${os.userInfo().username}@${os.hostname()}` }, () => change(store)),
    );
  } catch (error) {
    if (!(error instanceof AuditUnavailableError)) throw error;
    console.error(`the audit log is unavailable (${error.message}); nothing was changed`);
    process.exit(1);
  } finally {
    await clickhouse.close();
  }
}

const program = new Command('keys').description('Issue, list and delete ingest API keys');

program
  .command('create')
  .description('create a key; it is printed once and stored only as a hash')
  .addOption(new Option('--env <environment>', 'key environment').choices([...ENVIRONMENTS]).makeOptionMandatory())
  .requiredOption('--name <name>', 'what the key is for, e.g. checkout-service')
  .option('--description <text>', 'longer note', '')
  .addOption(
    new Option('--capture <policy>', "what is kept of the key's prompts and responses").choices([...CAPTURE_POLICIES]).default('full'),
  )
  .option('--json', 'print {"id","key","environment","name","capture"} as JSON')
  .action(async (options: { env: Environment; name: string; description: string; capture: CapturePolicy; json?: boolean }) => {
    if (!isSafeIdentifier(options.name)) {
      console.error('--name: must not contain control characters or bidirectional overrides');
      process.exit(2);
    }
    const id = generateKeyId();
    const created = await audited(
      { action: 'key.create', target: id, details: { environment: options.env, name: options.name, capture: options.capture } },
      (store) =>
        store.create({ id, environment: options.env, name: options.name, description: options.description, capture: options.capture }),
    );
    if (options.json) {
      console.log(
        JSON.stringify({
          id: created.id,
          key: created.key,
          environment: created.environment,
          name: created.name,
          capture: created.capture,
        }),
      );
    } else {
      console.log(`created ${created.id} (${created.environment}, "${created.name}", capture ${created.capture})`);
      console.log(`key: ${created.key}`);
      console.log('This is the only time the key is shown; store it in your secret manager now.');
    }
  });

program
  .command('list')
  .description('ids, names, environments and created times (never secrets or hashes)')
  .option('--json', 'print a JSON array')
  .action(async (options: { json?: boolean }) => {
    const keys = await withStore((store) => store.list());
    if (options.json) {
      console.log(
        JSON.stringify(
          keys.map(({ id, name, environment, createdAt, description, capture }) => ({
            id,
            name,
            environment,
            createdAt,
            description,
            capture,
          })),
        ),
      );
      return;
    }
    if (keys.length === 0) {
      console.log('no keys');
      return;
    }
    console.table(keys.map(({ id, name, environment, createdAt, capture }) => ({ id, name, environment, capture, createdAt })));
  });

program
  .command('delete')
  .argument('<id>', 'key id as shown by list')
  .description('delete a key; every gateway refuses it within 2 seconds')
  .action(async (id: string) => {
    const deleted = await audited({ action: 'key.delete', target: id }, (store) => store.delete(id));
    if (!deleted) {
      console.error(`no key with id ${id}`);
      process.exitCode = 1;
      return;
    }
    console.log(`deleted ${id}`);
  });

const policyArgument = () => program.createArgument('<policy>', 'full, redact or metadata-only').choices([...CAPTURE_POLICIES]);

program
  .command('capture')
  .argument('<id>', 'key id as shown by list')
  .addArgument(policyArgument())
  .description("set what is kept of a key's prompts and responses; every gateway applies it within 2 seconds")
  .action(async (id: string, policy: CapturePolicy) => {
    const updated = await audited({ action: 'key.capture', target: id, details: { capture: policy } }, (store) =>
      store.setCapture(id, policy),
    );
    if (!updated) {
      console.error(`no key with id ${id}`);
      process.exitCode = 1;
      return;
    }
    console.log(`${id}: capture ${updated.capture}`);
  });

program
  .command('env-capture')
  .addArgument(program.createArgument('[environment]', 'environment to set').choices([...ENVIRONMENTS]))
  .addArgument(policyArgument().argOptional())
  .description("show each environment's capture policy, or set one (a key keeps the stricter of its own and its environment's)")
  .action(async (environment: Environment | undefined, policy: CapturePolicy | undefined) => {
    if (environment && !policy) program.error('env-capture: give both an environment and a policy, or neither');
    if (environment && policy) {
      await audited({ action: 'environment.capture', target: environment, details: { capture: policy } }, (store) =>
        store.setEnvironmentCapture(environment, policy),
      );
    }
    const policies = await withStore((store) => store.environmentCaptures());
    for (const [name, value] of Object.entries(policies)) console.log(`${name.padEnd(8)} ${value}`);
  });

await runCommand('keys', async () => {
  await program.parseAsync(process.argv);
});
