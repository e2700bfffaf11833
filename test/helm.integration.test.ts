// The Helm chart (deploy/helm/otm-telemetry): rendered with `helm template` for the
// default and the highly available values, and every manifest validated against the
// Kubernetes API schemas (kubernetes-validate, strict: unknown fields are errors).
// helm comes from the Go module proxy (go install, once per machine) when it is not on the PATH.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { pythonWith } from './helpers/python.js';
import { projectRoot } from './helpers/stack.js';
import { machineCache } from '../scripts/lib/machine-cache.js';

const run = promisify(execFile);
const HELM_VERSION = 'v3.19.0';
const KUBERNETES_VERSION = '1.33.0';
const chart = path.join(projectRoot, 'deploy/helm/otm-telemetry');
const rendered = path.join(projectRoot, '.stack', 'helm');

/**
 * helm from the PATH, else built once per machine with `go install` (a minute or two on
 * two cores) and kept in ~/.cache/otm-telemetry/tools (OTM_TOOL_CACHE to move it), so
 * a new checkout does not build it again.
 */
async function helm(): Promise<string> {
  try {
    await run('helm', ['version', '--short']);
    return 'helm';
  } catch {
    const tools = machineCache('tools', process.env.OTM_TOOL_CACHE);
    const binary = path.join(tools, `helm-${HELM_VERSION}`, 'helm');
    if (!fs.existsSync(binary)) {
      // Built beside, then renamed into place: a checkout running at the same time never sees half a binary.
      fs.mkdirSync(tools, { recursive: true });
      const staging = fs.mkdtempSync(path.join(tools, 'building-'));
      try {
        await run('go', ['install', `helm.sh/helm/v3/cmd/helm@${HELM_VERSION}`], {
          env: { ...process.env, GOBIN: staging, GOFLAGS: '-mod=mod' },
          timeout: 900_000,
          maxBuffer: 64 * 1024 * 1024,
        });
        fs.mkdirSync(path.dirname(binary), { recursive: true });
        fs.renameSync(path.join(staging, 'helm'), binary);
      } finally {
        fs.rmSync(staging, { recursive: true, force: true });
      }
    }
    return binary;
  }
}

async function template(name: string, args: string[]): Promise<{ file: string; kinds: string[]; text: string }> {
  const { stdout } = await run(await helm(), ['template', 'otm', chart, ...args], { maxBuffer: 16 * 1024 * 1024 });
  fs.mkdirSync(rendered, { recursive: true });
  const file = path.join(rendered, `${name}.yaml`);
  fs.writeFileSync(file, stdout);
  const kinds = [...stdout.matchAll(/^kind: (\w+)$/gm)].map((match) => match[1]!);
  return { file, kinds, text: stdout };
}

async function validate(file: string): Promise<{ ok: boolean; output: string }> {
  const python = await pythonWith(['deploy/helm/requirements.txt']);
  if (!python) throw new Error('python3 is not on the PATH');
  const validator = path.join(path.dirname(python), 'kubernetes-validate');
  try {
    const { stdout, stderr } = await run(validator, ['--strict', '-k', KUBERNETES_VERSION, file]);
    return { ok: true, output: stdout + stderr };
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string };
    return { ok: false, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

describe('helm chart', () => {
  it(
    'default values: a gateway, an ingester, an admin service, the deploy step as a Job; valid Kubernetes objects',
    { timeout: 1_200_000 },
    async () => {
      const { file, kinds, text } = await template('default', []);
      expect(kinds.sort()).toEqual(['Deployment', 'Deployment', 'Deployment', 'Job', 'Service', 'Service']);
      // Least privilege by default: the Job migrates and registers; the services only check.
      expect(text.match(/name: MIGRATE_ON_START\s+value: "false"/g)).toHaveLength(3);
      expect(text.match(/name: SCHEMA_REGISTRY_REGISTER\s+value: "false"/g)).toHaveLength(3);
      const result = await validate(file);
      expect(result.ok, result.output).toBe(true);
    },
  );

  it(
    'a metrics token Secret: every service reads METRICS_TOKEN from it; the admin service exposes its metrics port',
    { timeout: 600_000 },
    async () => {
      const { file, text } = await template('metrics-token', ['--set', 'metrics.token.secretName=otm-metrics']);
      expect(text.match(/name: METRICS_TOKEN\s+valueFrom:\s+secretKeyRef:\s+name: otm-metrics\s+key: token/g)).toHaveLength(3);
      expect(text).toMatch(/name: otm-admin[\s\S]*?name: metrics\s+containerPort: 9466/);
      expect((await template('no-metrics-token', [])).text).not.toContain('METRICS_TOKEN');
      const result = await validate(file);
      expect(result.ok, result.output).toBe(true);
    },
  );

  it(
    'every credential from a Secret: Kafka SASL and mTLS, registry basic auth, the Redis URL, ClickHouse writer and reader, CA files mounted; valid Kubernetes objects',
    { timeout: 600_000 },
    async () => {
      const secrets = [
        'kafka.securityProtocol=SASL_SSL',
        'kafka.saslMechanism=SCRAM-SHA-512',
        'kafka.credentials.secretName=otm-kafka',
        // The gateway and the ingester with principals of their own; the admin service on kafka.credentials.
        'gateway.kafkaCredentials.secretName=otm-kafka-gateway',
        'ingester.kafkaCredentials.secretName=otm-kafka-ingester',
        'kafka.tls.secretName=otm-kafka-tls',
        'kafka.tls.clientCertificate=true',
        'schemaRegistry.credentials.secretName=otm-registry',
        'schemaRegistry.caSecretName=otm-ca',
        'redis.urlSecret.secretName=otm-redis',
        'redis.caSecretName=otm-ca',
        'clickhouse.credentials.secretName=otm-clickhouse-writer',
        'clickhouse.analyticsCredentials.secretName=otm-clickhouse-reader',
        'clickhouse.caSecretName=otm-ca',
        'clickhouse.migrateOnStart=false',
        'admin.tls.secretName=otm-admin-tls',
      ];
      const { file, text } = await template('secrets', ['--set', secrets.join(',')]);
      const fromSecret = (variable: string, secret: string) =>
        text.match(new RegExp(`name: ${variable}\\s+valueFrom:\\s+secretKeyRef:\\s+name: ${secret}(?![\\w-])`, 'g'))?.length ?? 0;
      // Every service: Kafka, registry and Redis credentials; the ingester and admin: ClickHouse's writer; the admin: the reader.
      // The deploy Job: the registry's and ClickHouse's (its own Secrets when named; here the services').
      expect(fromSecret('KAFKA_SASL_PASSWORD', 'otm-kafka')).toBe(1);
      expect(fromSecret('KAFKA_SASL_PASSWORD', 'otm-kafka-gateway')).toBe(1);
      expect(fromSecret('KAFKA_SASL_USERNAME', 'otm-kafka-ingester')).toBe(1);
      expect(fromSecret('SCHEMA_REGISTRY_PASSWORD', 'otm-registry')).toBe(4);
      expect(fromSecret('REDIS_URL', 'otm-redis')).toBe(3);
      expect(fromSecret('CLICKHOUSE_PASSWORD', 'otm-clickhouse-writer')).toBe(3);
      expect(fromSecret('ANALYTICS_CLICKHOUSE_PASSWORD', 'otm-clickhouse-reader')).toBe(1);
      expect(text.match(/mountPath: \/etc\/otm\/kafka/g)).toHaveLength(3);
      expect(text.match(/value: \/etc\/otm\/clickhouse\/ca\.crt/g)).toHaveLength(4);
      expect(text.match(/value: \/etc\/otm\/registry\/ca\.crt/g)).toHaveLength(4);
      expect(text).toMatch(/name: ADMIN_TLS_CERT_FILE\s+value: \/tls\/tls\.crt/);
      expect(text).toMatch(/path: \/readyz, port: http, scheme: HTTPS/);
      // No credential is written into the objects themselves.
      expect(text).not.toMatch(/name: (KAFKA_SASL_PASSWORD|SCHEMA_REGISTRY_PASSWORD|CLICKHOUSE_PASSWORD)\s+value:/);
      const result = await validate(file);
      expect(result.ok, result.output).toBe(true);
    },
  );

  it('HA values: HPA on CPU, disruption budgets, one ingester per partition; valid Kubernetes objects', { timeout: 600_000 }, async () => {
    const { file, kinds, text } = await template('ha', ['-f', path.join(chart, 'values-ha.yaml')]);
    expect(kinds.filter((kind) => kind === 'HorizontalPodAutoscaler')).toHaveLength(1);
    expect(kinds.filter((kind) => kind === 'PodDisruptionBudget')).toHaveLength(2);
    expect(text).toMatch(/name: otm-ingester[\s\S]*?replicas: 6/);
    expect(text).toContain('path: /readyz');
    const result = await validate(file);
    expect(result.ok, result.output).toBe(true);
  });

  it(
    'what a cluster asks: a ServiceAccount with a cloud identity, pull secrets, placement, annotations, sidecars and volumes, ingresses, the migration Job; valid Kubernetes objects',
    { timeout: 600_000 },
    async () => {
      const knobs = [
        'serviceAccount.create=true',
        'serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::123456789012:role/otm',
        'imagePullSecrets[0].name=registry-pull',
        'nodeSelector.pool=otm',
        'gateway.nodeSelector.pool=edge',
        'tolerations[0].key=dedicated,tolerations[0].operator=Equal,tolerations[0].value=otm,tolerations[0].effect=NoSchedule',
        'podAnnotations.team=platform',
        'gateway.podAnnotations.scrape=yes',
        'extraEnv[0].name=OTEL_SERVICE_NAME,extraEnv[0].value=otm',
        'kafka.securityProtocol=SASL_SSL,kafka.saslMechanism=AWS_MSK_IAM,kafka.awsRegion=eu-west-1',
        'extraVolumes[0].name=token,extraVolumes[0].emptyDir.medium=Memory',
        'extraVolumeMounts[0].name=token,extraVolumeMounts[0].mountPath=/var/run/otm-token',
        'extraContainers[0].name=token-writer,extraContainers[0].image=example/token-writer:1',
        'gateway.ingress.enabled=true,gateway.ingress.className=nginx,gateway.ingress.hosts[0].host=usage.example.com',
        'gateway.ingress.tls[0].secretName=usage-tls,gateway.ingress.tls[0].hosts[0]=usage.example.com',
        'admin.ingress.enabled=true,admin.ingress.hosts[0].host=admin.example.com',
        'clickhouse.credentials.secretName=otm-clickhouse-writer',
        'migrations.job.credentials.secretName=otm-clickhouse-ddl,migrations.job.registryCredentials.secretName=otm-registry-writer',
        'redis.cluster=true',
        'redis.sentinelMaster=otm-master',
      ];
      const { file, kinds, text } = await template('cluster-knobs', ['--set', knobs.join(',')]);
      expect(kinds.sort()).toEqual([
        'Deployment',
        'Deployment',
        'Deployment',
        'Ingress',
        'Ingress',
        'Job',
        'Service',
        'Service',
        'ServiceAccount',
      ]);
      const objects = text.split(/^---$/m);
      const object = (kind: string, name: string) =>
        objects.find((doc) => doc.includes(`kind: ${kind}\n`) && doc.includes(`name: ${name}\n`)) ?? '';
      expect(object('ServiceAccount', 'otm')).toContain('eks.amazonaws.com/role-arn: arn:aws:iam::123456789012:role/otm');
      for (const service of ['gateway', 'ingester', 'admin']) {
        const deployment = object('Deployment', `otm-${service}`);
        expect(deployment, service).toContain('serviceAccountName: otm');
        expect(deployment, service).toMatch(/imagePullSecrets:\s+- name: registry-pull/);
        expect(deployment, service).toMatch(new RegExp(`nodeSelector:\\s+pool: ${service === 'gateway' ? 'edge' : 'otm'}\\n`));
        expect(deployment, service).toContain('key: dedicated');
        expect(deployment, service).toContain('team: platform');
        expect(deployment, service).toMatch(/name: OTEL_SERVICE_NAME\s+value: otm/);
        expect(deployment, service).toMatch(
          /name: KAFKA_SASL_MECHANISM\s+value: "AWS_MSK_IAM"\s+- name: KAFKA_AWS_REGION\s+value: "eu-west-1"/,
        );
        expect(deployment, service).toMatch(/- mountPath: \/var\/run\/otm-token\s+name: token/);
        expect(deployment, service).toMatch(/- image: example\/token-writer:1\s+name: token-writer/);
        expect(deployment, service).toMatch(/name: MIGRATE_ON_START\s+value: "false"/);
        expect(deployment, service).toMatch(/name: REDIS_CLUSTER\s+value: "true"\s+- name: REDIS_SENTINEL_MASTER\s+value: "otm-master"/);
      }
      expect(object('Deployment', 'otm-gateway')).toContain('scrape: "yes"');
      expect(object('Deployment', 'otm-admin')).not.toContain('scrape:');
      expect(object('Ingress', 'otm-gateway')).toMatch(
        /ingressClassName: nginx[\s\S]*host: "usage.example.com"[\s\S]*name: otm-gateway\s+port:\s+name: https/,
      );
      expect(object('Ingress', 'otm-admin')).toMatch(/name: otm-admin\s+port:\s+name: http\n/);
      // The Job: a hook before install and upgrade, the image's own migrate command, the DDL user.
      const job = object('Job', 'otm-migrate');
      expect(job).toMatch(/helm.sh\/hook: pre-install,pre-upgrade/);
      expect(job).toContain('args: ["node", "services/ingester/dist/migrate.js"]');
      expect(job).toMatch(/name: CLICKHOUSE_PASSWORD\s+valueFrom:\s+secretKeyRef:\s+name: otm-clickhouse-ddl/);
      expect(job).toMatch(/initContainers:\s+- name: migrate[\s\S]*containers:\s+- name: register-schemas/);
      expect(job).toContain('args: ["node", "services/ingester/dist/register-schemas.js"]');
      expect(job).toMatch(/name: SCHEMA_REGISTRY_PASSWORD\s+valueFrom:\s+secretKeyRef:\s+name: otm-registry-writer/);
      expect(job).not.toContain('KAFKA_BROKERS');
      expect(job).not.toContain('serviceAccountName');
      const result = await validate(file);
      expect(result.ok, result.output).toBe(true);
    },
  );

  it(
    "a name the values set again replaces the chart's own entry: each name once in every container's env; valid Kubernetes objects",
    { timeout: 600_000 },
    async () => {
      const { file, text } = await template('env-overrides', [
        '--set',
        [
          'gateway.env.NODE_OPTIONS=--max-old-space-size=300',
          'ingester.env.INGEST_UNIT_INTERVAL_MS=500',
          'extraEnv[0].name=METRICS_HOST,extraEnv[0].value=127.0.0.1',
          'env.SCHEMA_REGISTRY_URL=https://registry.example:8081',
        ].join(','),
      ]);
      // The migration Job's schema registration takes SCHEMA_* from env too: its own URL entry gives way.
      const job = text.split(/^---$/m).find((doc) => doc.includes('kind: Job\n'))!;
      const jobNames = [...job.matchAll(/^ {12}- name: (\S+)$/gm)].map((match) => match[1]!);
      expect(new Set(jobNames).size, `repeated in the migration Job: ${jobNames}`).toBe(jobNames.length);
      expect(job).toMatch(/name: SCHEMA_REGISTRY_URL\s+value: https:\/\/registry\.example:8081\n/);
      const deployments = text.split(/^---$/m).filter((doc) => doc.includes('kind: Deployment\n'));
      expect(deployments).toHaveLength(3);
      for (const deployment of deployments) {
        const names = [...deployment.matchAll(/^ {12}- name: (\S+)$/gm)].map((match) => match[1]!);
        expect(names.length).toBeGreaterThan(10);
        expect(new Set(names).size, `repeated in ${/name: (otm-\w+)/.exec(deployment)?.[1]}: ${names}`).toBe(names.length);
        expect(deployment).toMatch(/name: METRICS_HOST\s+value: 127\.0\.0\.1/);
      }
      const gateway = deployments.find((doc) => doc.includes('name: otm-gateway\n'))!;
      expect(gateway).toMatch(/name: NODE_OPTIONS\s+value: --max-old-space-size=300\n/);
      expect(gateway).not.toContain('--max-semi-space-size=8');
      expect(deployments.find((doc) => doc.includes('name: otm-ingester\n'))).toMatch(/name: INGEST_UNIT_INTERVAL_MS\s+value: "500"/);
      // Without a repeated name the list is as the chart writes it.
      expect((await template('default', [])).text).toContain('value: "--max-semi-space-size=8"');
      const result = await validate(file);
      expect(result.ok, result.output).toBe(true);
    },
  );

  it('values.schema.json refuses a value of the wrong type and a key the chart does not know', { timeout: 600_000 }, async () => {
    await expect(template('wrong-type', ['--set-string', 'admin.replicas=two'])).rejects.toThrow(
      /\/admin\/replicas': got string, want integer/,
    );
    await expect(template('typo', ['--set', 'gateway.replica=2'])).rejects.toThrow(/additional properties 'replica' not allowed/);
    await expect(template('protocol', ['--set', 'kafka.securityProtocol=TLS'])).rejects.toThrow(/securityProtocol/);
  });

  it('the validation can fail: a replica count that is not a number is refused', { timeout: 600_000 }, async () => {
    // Past the chart's own schema, so the Kubernetes validation is what refuses it.
    const { file } = await template('broken', ['--skip-schema-validation', '--set-string', 'admin.replicas=two']);
    const result = await validate(file);
    expect(result.ok).toBe(false);
    expect(result.output).toMatch(/replicas/);
  });

  it('more ingesters than partitions is refused at render time', { timeout: 600_000 }, async () => {
    await expect(template('too-many', ['--set', 'ingester.replicas=7'])).rejects.toThrow(/above kafka.partitions/);
  });
});
