// docker-compose.yml for real: the whole stack from the images `npm run images` builds
// (docs/containers.md), started with `docker compose up` (or Debian's docker-compose
// 1.29, installed when neither answers), a record posted to the gateway, read back from
// the analytics API, then `down -v`. Host ports of its own, so a stack `npm start` runs
// beside it is not in the way. Runs in `npm run test:containers`.
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { dockerHost } from '../scripts/lib/docker-engine.js';
import { ensureDebianPackage } from '../scripts/stack/process-service.js';
import { eventually, fixture, freePort, projectRoot, testCertificate } from './helpers/stack.js';

const run = promisify(execFile);

/** `docker compose` where the plugin answers, else docker-compose (Debian's, installed if missing). */
function composeCommand(env: NodeJS.ProcessEnv): string[] {
  if (spawnSync('docker', ['compose', 'version'], { env, stdio: 'ignore' }).status === 0) return ['docker', 'compose'];
  ensureDebianPackage('docker-compose', 'docker-compose');
  return ['docker-compose'];
}

describe('docker-compose.yml', () => {
  it('docker compose up: a record posted to the gateway is counted by the analytics API; then down -v', { timeout: 900_000 }, async () => {
    const host = dockerHost();
    if (!host) throw new Error('no Docker engine answers: npm run docker -- up');
    // The gateway reads the key pair as the image's user (uid 1000): a readable copy of the test pair.
    const tls = await testCertificate();
    const tlsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'otm-compose-tls-'));
    fs.chmodSync(tlsDir, 0o755);
    for (const [from, to] of [
      [tls.certFile, 'localhost.crt'],
      [tls.keyFile, 'localhost.key'],
    ] as const) {
      fs.copyFileSync(from, path.join(tlsDir, to));
      fs.chmodSync(path.join(tlsDir, to), 0o644);
    }
    const [gatewayPort, adminPort, kafkaPort] = [await freePort(), await freePort(), await freePort()];
    const adminToken = `compose-${process.pid}-0123456789abcdefghijklmnop`;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DOCKER_HOST: host,
      COMPOSE_PROJECT_NAME: `otm-compose-${process.pid}`,
      ADMIN_TOKEN: adminToken,
      OTM_TLS_DIR: tlsDir,
      OTM_CA_DIR: tlsDir,
      OTM_GATEWAY_PORT: String(gatewayPort),
      OTM_ADMIN_PORT: String(adminPort),
      OTM_KAFKA_PORT: String(kafkaPort),
    };
    const [command, ...prefix] = composeCommand(env);
    const compose = (args: string[], timeoutMs: number) =>
      run(command!, [...prefix, '-f', path.join(projectRoot, 'docker-compose.yml'), ...args], {
        cwd: projectRoot,
        env,
        timeout: timeoutMs,
        maxBuffer: 16 * 1024 * 1024,
      });
    const admin = `http://127.0.0.1:${adminPort}`;
    const asAdmin = { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' };
    const agent = new Agent({ connect: { ca: fs.readFileSync(tls.certFile), servername: 'localhost' } });
    try {
      await compose(['up', '-d'], 600_000);
      // The services restart on failure until their dependencies answer: the admin service is ready once Redis and ClickHouse are.
      await eventually(async () => (await request(`${admin}/readyz`).catch(() => undefined))?.statusCode === 200, 300_000, 2000);
      const created = await request(`${admin}/v1/keys`, {
        method: 'POST',
        headers: asAdmin,
        body: JSON.stringify({ environment: 'dev', name: 'compose' }),
      });
      expect(created.statusCode).toBe(201);
      const { key } = (await created.body.json()) as { key: string };

      const record = fixture('valid/success.json');
      // The gateway is ready once Kafka and the registry are; it answers 202 once the record is queued.
      const posted = await eventually(
        async () => {
          const answer = await request(`https://127.0.0.1:${gatewayPort}/v1/telemetry/usage`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': key, 'idempotency-key': `compose-${process.pid}` },
            body: JSON.stringify(record),
            dispatcher: agent,
          }).catch(() => undefined);
          const status = answer?.statusCode;
          await answer?.body.text();
          return status === 202;
        },
        300_000,
        2000,
      );
      expect(posted).toBe(true);

      const started = Date.parse(record.timing.startTime);
      const range = `from=${new Date(started - 3_600_000).toISOString()}&to=${new Date(started + 3_600_000).toISOString()}`;
      const counted = async () => {
        const answer = await request(`${admin}/v1/analytics/usage?${range}&bucket=none`, { headers: asAdmin });
        const body = (await answer.body.json()) as { rows?: { requests: number | string }[] };
        return (body.rows ?? []).map((row) => Number(row.requests));
      };
      await eventually(async () => (await counted())[0] === 1, 180_000, 2000);
      expect(await counted()).toEqual([1]);
    } catch (error) {
      const logs = await compose(['logs', '--no-color', '--tail', '30'], 60_000).catch(() => ({ stdout: '' }));
      throw new Error(`${(error as Error).message}\ncompose logs:\n${logs.stdout}`);
    } finally {
      await compose(['down', '-v', '--remove-orphans'], 300_000).catch(() => undefined);
      await agent.close();
      fs.rmSync(tlsDir, { recursive: true, force: true });
    }
  });
});
