// API keys end to end: the CLI and the admin API issue, list and delete keys in
// the real Redis; real gateway processes accept them and refuse deleted ones
// within 2 seconds, also when the deletion message is lost.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { SOURCE_FLAGS } from '../../../scripts/lib/service-process.js';
import {
  createTestKey,
  eventually,
  fixture,
  httpRequest,
  postUsage,
  projectRoot,
  stackEnv,
  startGateway,
  startService,
  uniqueName,
  withRedis,
  type ServiceProcess,
} from '../../../test/helpers/stack.js';

const keyPrefix = `${uniqueName('keys')}:`;
const topic = uniqueName('keys-topic');
const adminToken = `admin-${uniqueName('token')}-0123456789abcdef`;
/** The second token of a rotation under way (ADMIN_TOKEN_NEXT). */
const nextAdminToken = `next-${uniqueName('token')}-0123456789abcdef`;

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...SOURCE_FLAGS, path.join(projectRoot, 'scripts/keys.ts'), ...args], {
      env: stackEnv({ REDIS_KEY_PREFIX: keyPrefix }),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const record = () => fixture('valid/success.json');
let gateways: ServiceProcess[] = [];
let admin: ServiceProcess;

beforeAll(async () => {
  gateways = await Promise.all([startGateway({ topic, keyPrefix }), startGateway({ topic, keyPrefix })]);
  admin = await startService(
    'admin',
    stackEnv({ REDIS_KEY_PREFIX: keyPrefix, ADMIN_TOKEN: adminToken, ADMIN_TOKEN_NEXT: nextAdminToken, ADMIN_PORT: 0 }),
    /admin listening/,
  );
});
afterAll(async () => {
  await Promise.all([...gateways, admin].map((service) => service?.stop()));
});

/** Posts until the gateway answers 401; returns the milliseconds from `since`. */
async function msUntilRefused(gateway: ServiceProcess, key: string, since: number, limitMs = 5000): Promise<number> {
  while (Date.now() - since < limitMs) {
    const answer = await postUsage(gateway.url, record(), { 'x-api-key': key });
    if (answer.status === 401) return Date.now() - since;
    expect(answer.status).toBe(202);
  }
  return Infinity;
}

describe('CLI', () => {
  it('creates a key (printed once, with --json as documented), lists it without secrets, deletes it', async () => {
    const created = await cli(['create', '--env', 'prod', '--name', 'checkout-service', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const key = JSON.parse(created.stdout) as { id: string; key: string; environment: string; name: string };
    expect(Object.keys(key).sort()).toEqual(['capture', 'environment', 'id', 'key', 'name']);
    expect(key.key).toMatch(/^otm_prod_[A-Za-z0-9_-]{43}$/);
    expect(key).toMatchObject({ environment: 'prod', name: 'checkout-service' });

    const human = await cli(['create', '--env', 'dev', '--name', 'notebook']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/key: otm_dev_/);

    const listed = await cli(['list', '--json']);
    const keys = JSON.parse(listed.stdout) as Record<string, string>[];
    expect(keys.map((k) => k.id)).toContain(key.id);
    expect(listed.stdout).not.toContain(key.key);
    expect(listed.stdout).not.toMatch(/[0-9a-f]{64}/); // no hashes either
    const table = await cli(['list']);
    expect(table.stdout).toContain('checkout-service');

    expect((await postUsage(gateways[0]!.url, record(), { 'x-api-key': key.key })).status).toBe(202);
    const deleted = await cli(['delete', key.id]);
    expect(deleted.code).toBe(0);
    expect((await cli(['delete', key.id])).code).toBe(1);
    expect((await cli(['list', '--json'])).stdout).not.toContain(key.id);
  });

  it('refuses an unknown environment', async () => {
    const result = await cli(['create', '--env', 'staging', '--name', 'x']);
    expect(result.code).not.toBe(0);
  });

  it('stores only the SHA-256 of the key', async () => {
    const created = JSON.parse((await cli(['create', '--env', 'qa', '--name', 'hash-check', '--json'])).stdout) as { key: string };
    const everything = await withRedis(async (redis) => {
      const names = await redis.keys(`${keyPrefix}*`);
      const values = await Promise.all(
        names.map(async (name) => {
          const type = await redis.type(name);
          if (type === 'hash') return JSON.stringify(await redis.hgetall(name));
          if (type === 'set') return JSON.stringify(await redis.smembers(name));
          return (await redis.get(name)) ?? '';
        }),
      );
      return names.join('\n') + values.join('\n');
    });
    expect(everything).not.toContain(created.key);
    expect(everything).not.toContain(created.key.slice(8));
  });
});

describe('revocation across gateway instances', () => {
  it('a key deleted through the CLI is refused by every instance within 2 s', async () => {
    const created = JSON.parse((await cli(['create', '--env', 'prod', '--name', 'propagation', '--json'])).stdout) as {
      id: string;
      key: string;
    };
    // Warm both caches.
    for (const gateway of gateways) expect((await postUsage(gateway.url, record(), { 'x-api-key': created.key })).status).toBe(202);
    const deleted = await cli(['delete', created.id]);
    expect(deleted.code).toBe(0);
    const since = Date.now();
    const figures = await Promise.all(gateways.map((gateway) => msUntilRefused(gateway, created.key, since)));
    console.log(`revocation after CLI delete returned: ${figures.map((ms) => `${ms} ms`).join(', ')} (limit 2000 ms)`);
    for (const ms of figures) expect(ms).toBeLessThan(2000);
  });

  it('a lost deletion message still ends in 401 within 2 s (the cache entry expires)', async () => {
    const created = await createTestKey(keyPrefix, 'dev', 'lost-message');
    for (const gateway of gateways) expect((await postUsage(gateway.url, record(), { 'x-api-key': created.key })).status).toBe(202);
    // Delete the record without publishing: the gateways hear nothing.
    await withRedis(async (redis) => {
      const hash = await redis.get(`${keyPrefix}apikey-id:${created.id}`);
      await redis.del(`${keyPrefix}apikey:${hash}`);
    });
    const since = Date.now();
    const figures = await Promise.all(gateways.map((gateway) => msUntilRefused(gateway, created.key, since)));
    console.log(`revocation with the message lost: ${figures.map((ms) => `${ms} ms`).join(', ')}`);
    for (const ms of figures) expect(ms).toBeLessThan(2000);
  });

  it('a cut subscriber connection empties the cache: a key deleted meanwhile is refused within 2 s', async () => {
    const created = await createTestKey(keyPrefix, 'dev', 'cut-subscriber');
    for (const gateway of gateways) expect((await postUsage(gateway.url, record(), { 'x-api-key': created.key })).status).toBe(202);
    await withRedis(async (redis) => {
      await redis.client('KILL', 'TYPE', 'pubsub');
      const hash = await redis.get(`${keyPrefix}apikey-id:${created.id}`);
      await redis.del(`${keyPrefix}apikey:${hash}`);
    });
    const since = Date.now();
    const figures = await Promise.all(gateways.map((gateway) => msUntilRefused(gateway, created.key, since)));
    for (const ms of figures) expect(ms).toBeLessThan(2000);
  });

  it('malformed keys are answered 401 without a Redis look-up', async () => {
    const calls = () =>
      withRedis(async (redis) => {
        const stats = (await redis.info('commandstats')).match(/cmdstat_hgetall:calls=(\d+)/);
        return Number(stats?.[1] ?? 0);
      });
    const malformed = [
      'nope',
      'otm_prod_short',
      `otm_live_${'a'.repeat(43)}`,
      `otm_prod_${'é'.repeat(43)}`,
      `otm_prod_${'a'.repeat(10 * 1024)}`,
    ];
    const before = await calls();
    for (const key of malformed) {
      const started = performance.now();
      const answer = await postUsage(gateways[0]!.url, record(), { 'x-api-key': key });
      expect(answer.status).toBe(401);
      expect(performance.now() - started).toBeLessThan(500);
    }
    expect(await calls()).toBe(before);
  });
});

describe('admin API', () => {
  const adminHeaders = { authorization: `Bearer ${adminToken}` };

  it('creates, lists and deletes keys with the admin token', async () => {
    const created = await httpRequest(`${admin.url}/v1/keys`, {
      method: 'POST',
      headers: { ...adminHeaders, 'content-type': 'application/json' },
      body: JSON.stringify({ environment: 'preview', name: 'admin-made', description: 'from the test' }),
    });
    expect(created.status).toBe(201);
    expect(created.body.key).toMatch(/^otm_preview_/);
    expect((await postUsage(gateways[1]!.url, record(), { 'x-api-key': created.body.key })).status).toBe(202);

    const listed = await httpRequest(`${admin.url}/v1/keys`, { headers: adminHeaders });
    expect(listed.status).toBe(200);
    const entry = listed.body.keys.find((k: { id: string }) => k.id === created.body.id);
    expect(entry).toMatchObject({ name: 'admin-made', environment: 'preview', description: 'from the test' });
    expect(listed.text).not.toContain(created.body.key);

    const deleted = await httpRequest(`${admin.url}/v1/keys/${created.body.id}`, { method: 'DELETE', headers: adminHeaders });
    expect(deleted.status).toBe(204);
    const again = await httpRequest(`${admin.url}/v1/keys/${created.body.id}`, { method: 'DELETE', headers: adminHeaders });
    expect(again.status).toBe(404);
    expect(await msUntilRefused(gateways[1]!, created.body.key, Date.now())).toBeLessThan(2000);
  });

  it('refuses bad create bodies with the validation error body', async () => {
    const answer = await httpRequest(`${admin.url}/v1/keys`, {
      method: 'POST',
      headers: { ...adminHeaders, 'content-type': 'application/json' },
      body: JSON.stringify({ environment: 'staging' }),
    });
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ statusCode: 400, errorType: 'ValidationError' });
    expect(answer.body.errors.length).toBeGreaterThan(0);
  });

  it('refuses key names with control characters or bidi overrides', async () => {
    for (const name of ['billing\u202Egnp', 'tab\there', 'bell\u0007']) {
      const answer = await httpRequest(`${admin.url}/v1/keys`, {
        method: 'POST',
        headers: { ...adminHeaders, 'content-type': 'application/json' },
        body: JSON.stringify({ environment: 'dev', name }),
      });
      expect(answer.status, name).toBe(400);
      expect(answer.body).toMatchObject({ errorType: 'ValidationError', errors: [{ path: '/name' }] });
    }
    const answer = await httpRequest(`${admin.url}/v1/keys`, { headers: adminHeaders });
    expect(answer.headers['cache-control']).toBe('no-store');
    expect(answer.headers['x-content-type-options']).toBe('nosniff');
    expect(answer.headers['content-security-policy']).toContain("frame-ancestors 'none'");
  });

  it('no token, a wrong token or an ingest key: 401 with the AuthError body', async () => {
    const ingestKey = (await createTestKey(keyPrefix, 'prod', 'not-admin')).key;
    const attempts: Record<string, string>[] = [
      {},
      { authorization: 'Bearer wrong-token-wrong-token-wrong-token' },
      { authorization: `Bearer ${ingestKey}` },
      { 'x-api-key': ingestKey },
    ];
    for (const headers of attempts) {
      const answer = await httpRequest(`${admin.url}/v1/keys`, { headers });
      expect(answer.status).toBe(401);
      expect(answer.body).toMatchObject({ statusCode: 401, errorType: 'AuthError' });
    }
  });

  it('during a rotation both admin tokens are accepted (ADMIN_TOKEN and ADMIN_TOKEN_NEXT)', async () => {
    for (const token of [adminToken, nextAdminToken]) {
      const answer = await httpRequest(`${admin.url}/v1/keys`, { headers: { authorization: `Bearer ${token}` } });
      expect(answer.status).toBe(200);
    }
  });

  it('the admin token is refused on the ingest endpoint', async () => {
    const attempts: Record<string, string>[] = [{ authorization: `Bearer ${adminToken}` }, { 'x-api-key': adminToken }];
    for (const headers of attempts) {
      const answer = await postUsage(gateways[0]!.url, record(), headers);
      expect(answer.status).toBe(401);
    }
  });
});

describe('capture policies (docs/privacy.md)', () => {
  const adminHeaders = { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' };
  // A change reaches the gateways by the invalidation message (at once) or the cache's expiry (2 s).
  const applied = async (key: string, policy: string) => {
    let last: unknown;
    await eventually(
      async () => (last = (await postUsage(gateways[0]!.url, record(), { 'x-api-key': key })).headers['x-otm-capture']) === policy,
      2_000,
      20,
    ).catch(() => expect(last).toBe(policy));
  };

  it("the admin API sets a key's and an environment's policy; both gateways apply the stricter at once", async () => {
    const created = await httpRequest(`${admin.url}/v1/keys`, {
      method: 'POST',
      headers: adminHeaders,
      body: JSON.stringify({ environment: 'preview', name: 'policy', capture: 'redact' }),
    });
    expect(created.status).toBe(201);
    expect(created.body.capture).toBe('redact');
    await applied(created.body.key, 'redact');

    const patched = await httpRequest(`${admin.url}/v1/keys/${created.body.id}`, {
      method: 'PATCH',
      headers: adminHeaders,
      body: JSON.stringify({ capture: 'full' }),
    });
    expect([patched.status, patched.body.capture]).toEqual([200, 'full']);
    await applied(created.body.key, 'full');
    const listed = await httpRequest(`${admin.url}/v1/keys`, { headers: adminHeaders });
    expect(listed.body.keys.find((k: { id: string }) => k.id === created.body.id).capture).toBe('full');

    const environment = await httpRequest(`${admin.url}/v1/capture-policies/preview`, {
      method: 'PUT',
      headers: adminHeaders,
      body: JSON.stringify({ capture: 'metadata-only' }),
    });
    expect(environment.status).toBe(200);
    expect(environment.body.environments).toEqual({ prod: 'full', qa: 'full', preview: 'metadata-only', dev: 'full' });
    await applied(created.body.key, 'metadata-only');
    await httpRequest(`${admin.url}/v1/capture-policies/preview`, { method: 'PUT', headers: adminHeaders, body: '{"capture":"full"}' });
    await applied(created.body.key, 'full');

    const unknown = await httpRequest(`${admin.url}/v1/keys/key_nope`, {
      method: 'PATCH',
      headers: adminHeaders,
      body: '{"capture":"full"}',
    });
    expect(unknown.status).toBe(404);
    const bad = await httpRequest(`${admin.url}/v1/keys/${created.body.id}`, {
      method: 'PATCH',
      headers: adminHeaders,
      body: '{"capture":"all"}',
    });
    expect(bad.status).toBe(400);
    const badEnvironment = await httpRequest(`${admin.url}/v1/capture-policies/staging`, {
      method: 'PUT',
      headers: adminHeaders,
      body: '{"capture":"full"}',
    });
    expect(badEnvironment.status).toBe(400);
  });

  it('the CLI creates with a policy, changes it, and shows and sets environments', async () => {
    const created = JSON.parse(
      (await cli(['create', '--env', 'dev', '--name', 'cli-policy', '--capture', 'metadata-only', '--json'])).stdout,
    ) as {
      id: string;
      key: string;
      capture: string;
    };
    expect(created.capture).toBe('metadata-only');
    await applied(created.key, 'metadata-only');
    const changed = await cli(['capture', created.id, 'redact']);
    expect([changed.code, changed.stdout.trim()]).toEqual([0, `${created.id}: capture redact`]);
    await applied(created.key, 'redact');
    expect((await cli(['capture', created.id, 'everything'])).code).not.toBe(0);
    const shown = await cli(['env-capture', 'dev', 'metadata-only']);
    expect(shown.stdout).toMatch(/^dev\s+metadata-only$/m);
    await applied(created.key, 'metadata-only');
    expect((await cli(['env-capture', 'dev', 'full'])).code).toBe(0);
    expect((await cli(['env-capture'])).stdout).toMatch(/^dev\s+full$/m);
  });
});

describe('the audit log (admin_audit)', () => {
  const adminHeaders = { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' };

  it('holds every change made through the API and the CLI: who, what, which', async () => {
    const created = await httpRequest(`${admin.url}/v1/keys`, {
      method: 'POST',
      headers: adminHeaders,
      body: JSON.stringify({ environment: 'qa', name: 'audited', capture: 'redact' }),
    });
    expect(created.status).toBe(201);
    await httpRequest(`${admin.url}/v1/keys/${created.body.id}`, { method: 'PATCH', headers: adminHeaders, body: '{"capture":"full"}' });
    expect((await cli(['delete', created.body.id])).code).toBe(0);
    const log = await httpRequest(`${admin.url}/v1/audit?limit=1000`, { headers: adminHeaders });
    expect(log.status).toBe(200);
    const ours = (log.body.entries as { action: string; target: string; actor: string; details: Record<string, unknown> }[])
      .filter((entry) => entry.target === created.body.id)
      .reverse();
    expect(ours.map(({ action, details }) => ({ action, details }))).toEqual([
      { action: 'key.create', details: { environment: 'qa', name: 'audited', capture: 'redact' } },
      { action: 'key.capture', details: { capture: 'full' } },
      { action: 'key.delete', details: {} },
    ]);
    expect(ours[0]!.actor).toMatch(/^admin-token@(127\.0\.0\.1|::1|::ffff:127\.0\.0\.1)$/);
    expect(ours[2]!.actor).toMatch(/^cli:.+@.+/);
    expect(log.text).not.toContain(created.body.key);
  });

  it('no entry, no change: with the audit log out of reach a key is neither created nor deleted', async () => {
    const blind = await startService(
      'admin',
      stackEnv({ REDIS_KEY_PREFIX: keyPrefix, ADMIN_TOKEN: adminToken, ADMIN_PORT: 0, CLICKHOUSE_URL: 'http://127.0.0.1:9' }),
      /admin listening/,
      20_000,
    );
    try {
      const before = await httpRequest(`${blind.url}/v1/keys`, { headers: adminHeaders });
      const refused = await httpRequest(`${blind.url}/v1/keys`, {
        method: 'POST',
        headers: adminHeaders,
        body: JSON.stringify({ environment: 'qa', name: 'unaudited' }),
      });
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({
        errorType: 'Unavailable',
        message: 'The audit log is unavailable; nothing was changed. Retry later.',
      });
      const after = await httpRequest(`${blind.url}/v1/keys`, { headers: adminHeaders });
      expect(after.body.keys).toEqual(before.body.keys);
    } finally {
      await blind.stop();
    }
  });
});
