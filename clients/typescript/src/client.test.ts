// The client's delivery rules with a scripted gateway (a fetch that answers from a
// list): what is retried, what is not, with which keys and after how long. The real
// gateway is in client.integration.test.ts.
import { describe, expect, it } from 'vitest';
import { gunzipSync } from 'node:zlib';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { projectRoot } from '../../../scripts/lib/project-root.js';
import { createClient, type UsageRecord } from './index.js';

interface Sent {
  items: (UsageRecord & { idempotencyKey: string })[];
  at: number;
}

/** A fetch that records each request and answers with the next scripted answer (a function of the items). */
function scriptedGateway(answers: ((items: Sent['items']) => Response | Error)[]) {
  const sent: Sent[] = [];
  const fetcher = async (_url: string, init: RequestInit) => {
    const body = Buffer.from(init.body as ArrayBuffer);
    const items = JSON.parse(gunzipSync(body).toString()) as Sent['items'];
    sent.push({ items, at: Date.now() });
    const answer = (answers.shift() ?? (() => json(202, { status: 'accepted' })))(items);
    if (answer instanceof Error) throw answer;
    return answer;
  };
  return { sent, fetch: fetcher as unknown as typeof fetch };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

const record = (id: string): UsageRecord => ({
  request: { modelId: 'm', provider: 'p', status: 'success' },
  user: { id, type: 'external' },
});

const fast = { endpoint: 'https://gateway.test', apiKey: 'otm_dev_x', retryInitialDelayMs: 1, retryMaxDelayMs: 50, flushIntervalMs: 10 };

describe('delivery', () => {
  it('retries a 503 and a network error with the same idempotency keys, never a 400', async () => {
    const gateway = scriptedGateway([() => json(503, { errorType: 'Unavailable' }), () => new TypeError('fetch failed')]);
    const client = createClient({ ...fast, fetch: gateway.fetch });
    client.record(record('a'));
    client.record(record('b'), 'my-key');
    expect(await client.flush(5000)).toBe(true);
    expect(gateway.sent).toHaveLength(3);
    const keys = gateway.sent.map((request) => request.items.map((item) => item.idempotencyKey));
    expect(keys[1]).toEqual(keys[0]);
    expect(keys[2]).toEqual(keys[0]);
    expect(keys[0]![1]).toBe('my-key');
    expect(client.stats()).toEqual({ queued: 0, sent: 2, failed: 0, dropped: 0, retries: 2 });

    const refusing = scriptedGateway([() => json(400, { errorType: 'ValidationError' })]);
    const strict = createClient({ ...fast, fetch: refusing.fetch });
    strict.record(record('c'));
    await strict.flush(5000);
    expect(refusing.sent).toHaveLength(1);
    expect(strict.stats()).toMatchObject({ sent: 0, failed: 1, retries: 0 });
    await Promise.all([client.shutdown(), strict.shutdown()]);
  });

  it('gives each record without a key of its own a UUIDv7: keys in the order they were made, so the look-up before each insert reads a few ranges of the key index instead of one per record', async () => {
    const gateway = scriptedGateway([]);
    const client = createClient({ ...fast, fetch: gateway.fetch });
    const before = Date.now();
    for (let i = 0; i < 300; i++) client.record(record(`u${i}`));
    const after = Date.now();
    expect(await client.flush(5000)).toBe(true);
    const keys = gateway.sent.flatMap((request) => request.items.map((item) => item.idempotencyKey));
    expect(keys).toHaveLength(300);
    for (const key of keys) {
      expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      // The first 48 bits: the milliseconds since the epoch when it was made.
      const madeAt = parseInt(key.replaceAll('-', '').slice(0, 12), 16);
      expect(madeAt).toBeGreaterThanOrEqual(before);
      expect(madeAt).toBeLessThanOrEqual(after);
    }
    // Made one after the other, they sort in that order (as ClickHouse's key index does).
    expect([...keys].sort()).toEqual(keys);
    expect(new Set(keys).size).toBe(300);
    await client.shutdown();
  });

  it('on 207 resends only the items answered 503 and counts the refused ones as failed', async () => {
    const gateway = scriptedGateway([
      () =>
        json(207, {
          results: [
            { index: 0, status: 202 },
            { index: 1, status: 400, errorType: 'ValidationError' },
            { index: 2, status: 503, errorType: 'Unavailable' },
          ],
        }),
    ]);
    const client = createClient({ ...fast, fetch: gateway.fetch });
    for (const id of ['a', 'b', 'c']) client.record(record(id));
    await client.flush(5000);
    expect(gateway.sent.map((request) => request.items.map((item) => item.user.id))).toEqual([['a', 'b', 'c'], ['c']]);
    expect(gateway.sent[1]!.items[0]!.idempotencyKey).toBe(gateway.sent[0]!.items[2]!.idempotencyKey);
    expect(client.stats()).toEqual({ queued: 0, sent: 2, failed: 1, dropped: 0, retries: 1 });
    await client.shutdown();
  });

  it('waits at least Retry-After after a 429', async () => {
    const gateway = scriptedGateway([() => json(429, { errorType: 'RateLimited' }, { 'retry-after': '1' })]);
    const client = createClient({ ...fast, retryMaxDelayMs: 5000, fetch: gateway.fetch });
    client.record(record('a'));
    await client.flush(5000);
    expect(gateway.sent).toHaveLength(2);
    expect(gateway.sent[1]!.at - gateway.sent[0]!.at).toBeGreaterThanOrEqual(990);
    await client.shutdown();
  });

  it('splits a batch the gateway finds too large; a single record too large fails', async () => {
    const tooLarge = (items: Sent['items']) => (items.some((item) => item.user.id === 'big') ? json(413, {}) : json(202, {}));
    const gateway = scriptedGateway(Array.from({ length: 10 }, () => tooLarge));
    const client = createClient({ ...fast, fetch: gateway.fetch, maxConcurrentRequests: 1 });
    for (const id of ['a', 'b', 'big', 'd']) client.record(record(id));
    await client.flush(5000);
    expect(gateway.sent.map((request) => request.items.map((item) => item.user.id))).toEqual([
      ['a', 'b', 'big', 'd'],
      ['a', 'b'],
      ['big', 'd'],
      ['big'],
      ['d'],
    ]);
    expect(client.stats()).toMatchObject({ sent: 3, failed: 1 });
    await client.shutdown();
  });

  it('a flush that timed out waits no more: what it left goes out as if it had not been called; a shutdown that gives up answers a flush still waiting', async () => {
    // Every answer a 503 asking for a second's pause; batches of 10, an interval of a minute.
    const gateway = scriptedGateway(Array.from({ length: 1000 }, () => () => json(503, {}, { 'retry-after': '1' })));
    const client = createClient({ ...fast, retryMaxDelayMs: 5000, flushAt: 10, flushIntervalMs: 60_000, fetch: gateway.fetch });
    client.record(record('a'));
    expect(await client.flush(100)).toBe(false);
    expect(gateway.sent).toHaveLength(1);
    // When the retry is due, one record is less than a batch: it waits for the interval (or a full batch).
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(gateway.sent).toHaveLength(1);
    expect(client.stats()).toMatchObject({ queued: 1, sent: 0, retries: 1 });
    // A flush sends it again; a second caller's flush gives up while the first still waits,
    // and a shutdown that gives up tells the first that the record was not sent.
    const patient = client.flush();
    expect(await client.flush(50)).toBe(false);
    expect(gateway.sent).toHaveLength(2);
    expect(await client.shutdown(100)).toMatchObject({ queued: 0, sent: 0, dropped: 1 });
    expect(await patient).toBe(false);
  });

  it('a flush that timed out does not keep the process alive while a retry waits', async () => {
    // A process that records, flushes with a timeout against a gateway answering 503, and
    // then has nothing left to do: it ends, although the client would retry in a second.
    const script = path.join(os.tmpdir(), `otm-client-flush-${process.pid}.mjs`);
    fs.writeFileSync(
      script,
      `import { createClient } from ${JSON.stringify(path.join(import.meta.dirname, 'index.ts'))};
const client = createClient({ endpoint: 'https://gateway.test', apiKey: 'otm_dev_x', retryInitialDelayMs: 1, retryMaxDelayMs: 5000,
  fetch: async () => new Response('{}', { status: 503, headers: { 'retry-after': '1' } }) });
client.record({ request: { modelId: 'm', provider: 'p', status: 'success' }, user: { id: 'a', type: 'external' } });
console.log(await client.flush(100));
`,
    );
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: projectRoot, stdio: ['ignore', 'pipe', 'inherit'] });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const ended = await Promise.race([
        once(child, 'exit').then(() => true),
        new Promise<false>((resolve) => setTimeout(() => resolve(false), 8000)),
      ]);
      child.kill('SIGKILL');
      expect(output.trim()).toBe('false');
      expect(ended).toBe(true);
    } finally {
      fs.rmSync(script, { force: true });
    }
  }, 15_000);

  it('shutdown gives up after its timeout and counts what was left as dropped', async () => {
    const gateway = scriptedGateway(Array.from({ length: 1000 }, () => () => json(503, {})));
    const client = createClient({ ...fast, fetch: gateway.fetch });
    client.record(record('a'));
    client.record(record('b'));
    const stats = await client.shutdown(300);
    expect(stats).toMatchObject({ queued: 0, sent: 0, dropped: 2 });
    expect(client.record(record('c'))).toBe(false);
    expect(client.stats().dropped).toBe(3);
  });

  it('a request still in flight when shutdown gives up is abandoned: counted as dropped, never retried after', async () => {
    // Each answer comes 200 ms after its request, a 503: the deadline falls while one is in flight.
    let calls = 0;
    const slow = (async (_url: string, init: RequestInit) => {
      calls++;
      await new Promise((resolve, reject) => {
        const timer = setTimeout(resolve, 200);
        init.signal?.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(init.signal!.reason as Error);
        });
      });
      return json(503, {});
    }) as unknown as typeof fetch;
    const client = createClient({ ...fast, fetch: slow });
    client.record(record('a'));
    client.record(record('b'));
    const stats = await client.shutdown(300);
    expect(stats).toMatchObject({ queued: 0, sent: 0, dropped: 2 });
    const after = calls;
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(calls).toBe(after);
    expect(client.stats()).toMatchObject({ queued: 0, dropped: 2 });
  });
});
