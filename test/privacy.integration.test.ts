// Capture policies end to end (docs/privacy.md), through the real gateway, Kafka,
// ingester and ClickHouse: what `metadata-only` drops never reaches the topic or any
// table; `redact` replaces the secrets before the record is queued; the request
// header lowers the policy of a key but never raises it; an environment's policy and
// a key's own both apply, at once, to cached keys.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyStore } from '@otm/shared/keys/key-store';
import type { CapturePolicy } from '@otm/schemas';
import {
  eventually,
  fixture,
  postUsage,
  queryRows,
  readTopic,
  startGateway,
  startIngester,
  testClickHouse,
  testNames,
  uniqueName,
  withRedis,
  type ServiceProcess,
  type TopicRecord,
} from './helpers/stack.js';

const names = testNames('privacy');
let gateway: ServiceProcess;
let ingester: ServiceProcess;
const clickhouse = testClickHouse(names.database);

const keys = (work: (store: KeyStore) => Promise<unknown>) => withRedis((redis) => work(new KeyStore(redis, names.keyPrefix)));

async function keyWith(capture: CapturePolicy, environment: 'qa' | 'dev' = 'dev') {
  let created!: Awaited<ReturnType<KeyStore['create']>>;
  await keys(async (store) => (created = await store.create({ environment, name: `privacy-${capture}`, capture })));
  return created;
}

// Secrets of the labelled set's kinds, each unique to this run.
const tag = uniqueName('p');
const email = `${tag}.jane@example.com`;
const card = '4111 1111 1111 1111';
const apiKey = `sk-proj-${tag.replace(/[^A-Za-z0-9]/g, '')}AbCdEfGhIjKlMnOpQrStUv`;
const marker = `PROMPT-MARKER-${tag}`;
const prompt = `${marker}: my e-mail is ${email}, card ${card}, key ${apiKey}.`;
const response = `RESPONSE-${tag}: I will not repeat ${email}.`;

function recordFor(userId: string) {
  const record = fixture('valid/success.json');
  record.user.id = userId;
  record.io = { prompt, response };
  return record;
}

async function post(key: string, userId: string, headers: Record<string, string> = {}) {
  const answer = await postUsage(gateway.url, recordFor(userId), { 'x-api-key': key, ...headers });
  expect(answer.status, answer.text).toBe(202);
  return { requestId: answer.body.requestId as string, capture: answer.headers['x-otm-capture'] };
}

let topic: TopicRecord[] = [];
const onTopic = (requestId: string) => topic.find((record) => record.value.meta.requestId === requestId)!;

beforeAll(async () => {
  [gateway, ingester] = await Promise.all([
    startGateway({ topic: names.topic, keyPrefix: names.keyPrefix }),
    startIngester({ ...names, extraEnv: {} }),
  ]);
});
afterAll(async () => {
  await Promise.all([gateway?.stop(), ingester?.stop()]);
  await clickhouse.close();
});

describe('capture policies', () => {
  const sent: Record<string, { requestId: string; capture: unknown; userId: string }> = {};

  it('apply at the gateway: the answer says which, and the queued record holds only what the policy keeps', async () => {
    const full = await keyWith('full');
    const redact = await keyWith('redact');
    const metadataOnly = await keyWith('metadata-only');
    const cases: [string, string, Record<string, string>][] = [
      ['full', full.key, {}],
      ['redact', redact.key, {}],
      ['metadata-only', metadataOnly.key, {}],
      ['full lowered to metadata-only', full.key, { 'x-otm-capture': 'metadata-only' }],
      ['full lowered to redact', full.key, { 'x-otm-capture': 'redact' }],
      ['redact not raised to full', redact.key, { 'x-otm-capture': 'full' }],
      ['metadata-only not raised to redact', metadataOnly.key, { 'x-otm-capture': 'redact' }],
    ];
    for (const [label, key, headers] of cases) {
      const userId = `${tag}-${label.replace(/ /g, '-')}`;
      sent[label] = { ...(await post(key, userId, headers)), userId };
    }
    expect(Object.fromEntries(Object.entries(sent).map(([label, { capture }]) => [label, capture]))).toEqual({
      full: 'full',
      redact: 'redact',
      'metadata-only': 'metadata-only',
      'full lowered to metadata-only': 'metadata-only',
      'full lowered to redact': 'redact',
      'redact not raised to full': 'redact',
      'metadata-only not raised to redact': 'metadata-only',
    });
    const bad = await postUsage(gateway.url, recordFor(`${tag}-bad`), { 'x-api-key': full.key, 'x-otm-capture': 'everything' });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toEqual([{ path: 'header:X-OTM-Capture', message: 'must be one of full, redact, metadata-only' }]);

    const ids = Object.values(sent).map((entry) => entry.requestId);
    topic = await readTopic(names.topic, (records) => ids.every((id) => records.some((r) => r.value.meta.requestId === id)));
    const raw = (label: string) => JSON.stringify(onTopic(sent[label]!.requestId).value);

    // full: as sent.
    expect(onTopic(sent.full!.requestId).value.record.io).toEqual({ prompt, response });
    expect(onTopic(sent.full!.requestId).value.meta.capture).toEqual({ policy: 'full' });
    // redact: placeholders instead of the secrets, in the prompt and the response.
    for (const label of ['redact', 'full lowered to redact', 'redact not raised to full']) {
      const queued = onTopic(sent[label]!.requestId).value;
      expect(queued.record.io!.prompt).toBe(`${marker}: my e-mail is [EMAIL], card [CREDIT_CARD], key [API_KEY].`);
      expect(queued.record.io!.response).toBe(`RESPONSE-${tag}: I will not repeat [EMAIL].`);
      expect(queued.meta.capture).toEqual({ policy: 'redact', redactions: 4 });
      for (const secret of [email, card, apiKey]) expect(raw(label)).not.toContain(secret);
    }
    // metadata-only: no prompt and no response on the topic at all, their lengths kept.
    for (const label of ['metadata-only', 'full lowered to metadata-only', 'metadata-only not raised to redact']) {
      const queued = onTopic(sent[label]!.requestId).value;
      expect(queued.record.io).toEqual({});
      expect(queued.meta.capture).toEqual({
        policy: 'metadata-only',
        promptChars: prompt.length,
        responseChars: response.length,
        redactions: 0,
      });
      for (const text of [marker, email, card, apiKey, `RESPONSE-${tag}`]) expect(raw(label)).not.toContain(text);
    }
  });

  it('are recorded on each row, and what a policy removed is in no table', async () => {
    const count = Object.keys(sent).length;
    await eventually(
      async () =>
        Number(
          (await queryRows<{ n: string }>(clickhouse, `SELECT count() AS n FROM usage_events WHERE startsWith(user_id, '${tag}')`))[0]!.n,
        ) >= count,
      60_000,
    ).catch((error: unknown) => {
      console.log(ingester.logs.slice(-30).join('\n'));
      throw error;
    });
    const rows = await queryRows<{
      user_id: string;
      capture_policy: string;
      prompt_chars: number | null;
      response_chars: number | null;
      redactions: number;
      prompt: string | null;
    }>(
      clickhouse,
      `SELECT e.user_id AS user_id, e.capture_policy AS capture_policy, toUInt32OrNull(toString(e.prompt_chars)) AS prompt_chars, toUInt32OrNull(toString(e.response_chars)) AS response_chars,
              e.redactions AS redactions, io.prompt AS prompt
       FROM usage_events AS e LEFT JOIN usage_io AS io USING (event_key) WHERE startsWith(e.user_id, '${tag}')`,
    );
    const byLabel = (label: string) => rows.find((row) => row.user_id === sent[label]!.userId)!;
    expect(byLabel('full')).toMatchObject({ capture_policy: 'full', prompt_chars: prompt.length, redactions: 0, prompt });
    expect(byLabel('redact')).toMatchObject({ capture_policy: 'redact', redactions: 4 });
    expect(byLabel('redact').prompt).toContain('[CREDIT_CARD]');
    expect(byLabel('metadata-only')).toMatchObject({
      capture_policy: 'metadata-only',
      prompt_chars: prompt.length,
      response_chars: response.length,
    });
    // LEFT JOIN fills a missing usage_io row with defaults: no text either way.
    expect(byLabel('metadata-only').prompt ?? '').toBe('');
    // The secrets of the redacted and metadata-only records are in no column of any table.
    for (const table of ['usage_events', 'usage_io']) {
      const columns = await queryRows<{ name: string }>(
        clickhouse,
        `SELECT name FROM system.columns WHERE database = currentDatabase() AND table = '${table}' AND type IN ('String', 'Nullable(String)')`,
      );
      const anywhere = columns.map((column) => `position(ifNull(${column.name}, ''), '${apiKey}') > 0`).join(' OR ');
      const [found] = await queryRows<{ n: string }>(clickhouse, `SELECT count() AS n FROM ${table} WHERE ${anywhere}`);
      // Only the full record's prompt holds the key.
      expect(Number(found!.n), table).toBe(table === 'usage_io' ? 1 : 0);
    }
  });

  it("an environment's policy and a key's own change at once for keys every gateway has cached", async () => {
    const key = await keyWith('full', 'qa');
    expect((await post(key.key, `${tag}-env-0`)).capture).toBe('full');
    // The change reaches the gateway by the key store's invalidation message: within
    // the 2 s that bound a deletion, in practice at once.
    const appliedWithin2s = async (policy: CapturePolicy) => {
      let index = 0;
      await eventually(async () => (await post(key.key, `${tag}-env-${index++}`)).capture === policy, 2_000, 50);
    };
    await keys((store) => store.setEnvironmentCapture('qa', 'metadata-only'));
    await appliedWithin2s('metadata-only');
    await keys((store) => store.setEnvironmentCapture('qa', 'full'));
    await appliedWithin2s('full');
    await keys((store) => store.setCapture(key.id, 'redact'));
    await appliedWithin2s('redact');
  });
});
