// The dashboard in real headless Chromium (Debian's package, driven by
// playwright-core): sign in with the admin token, see charts drawn from records
// posted through the gateway, and manage a key end to end in AI Module
// Configurations. Screenshots of every page go to screenshots/ (git-ignored).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ensureChromium } from '../../../scripts/stack/services.js';
import { sampleUsageRecords } from '../../../test/fixtures/sample-records.js';
import { DEFAULT_PLAUSIBLE_BOUNDS } from '@otm/schemas';
import {
  createTestKey,
  eventually,
  postUsage,
  projectRoot,
  queryRows,
  stackEnv,
  startGateway,
  startIngester,
  startService,
  testClickHouse,
  uniqueName,
  type ServiceProcess,
} from '../../../test/helpers/stack.js';

const n = { topic: uniqueName('dash'), keyPrefix: `${uniqueName('dash')}:`, database: uniqueName('dash'), groupId: uniqueName('dash') };
const adminToken = `dashboard-${uniqueName('token')}-abcdefghijkl`;
const shots = path.join(projectRoot, 'screenshots');
const services: ServiceProcess[] = [];
let gateway: ServiceProcess;
let admin: ServiceProcess;
let browser: Browser;
let page: Page;
const consoleErrors: string[] = [];
let outlierRequestId: string;

/** An admin service on the test's database, reading the lag of `topic`. */
function startAdmin(topic: string): Promise<ServiceProcess> {
  return startService(
    'admin',
    stackEnv({
      ADMIN_TOKEN: adminToken,
      ADMIN_PORT: 0,
      CLICKHOUSE_DATABASE: n.database,
      REDIS_KEY_PREFIX: n.keyPrefix,
      USAGE_TOPIC: topic,
      INGEST_GROUP_ID: n.groupId,
    }),
    /admin listening/,
  );
}

beforeAll(async () => {
  const executablePath = ensureChromium();
  const ingester = await startIngester(n);
  gateway = await startGateway({ topic: n.topic, keyPrefix: n.keyPrefix });
  admin = await startAdmin(n.topic);
  services.push(ingester, gateway, admin);

  // Two hours of traffic posted through the gateway, ending now.
  const key = await createTestKey(n.keyPrefix, 'prod', 'dashboard-data');
  const records = sampleUsageRecords(240, { seed: 9, startMs: Date.now() - 2 * 3600_000 });
  for (const [index, record] of records.entries()) {
    if (record.timing) {
      const shift = Date.now() - 2 * 3600_000 + index * 30_000 - Date.parse(record.timing.startTime);
      for (const field of ['startTime', 'firstTokenTime', 'lastTokenTime'] as const) {
        record.timing[field] = new Date(Date.parse(record.timing[field]) + shift).toISOString();
      }
    }
  }
  // One outlier at the plausible bounds (100,000,000 input and output tokens, a 48-hour
  // call, started an hour ago): it dominates every sum, and every card and axis must still read.
  const outlier = structuredClone(records[0]!);
  const hourAgo = Date.now() - 3_600_000;
  outlier.user.id = 'outlier';
  outlier.request = { modelId: 'gpt-4o', provider: 'openai', status: 'success' };
  outlier.tokens = { input: DEFAULT_PLAUSIBLE_BOUNDS.maxTokens, output: DEFAULT_PLAUSIBLE_BOUNDS.maxTokens };
  outlier.timing = {
    startTime: new Date(hourAgo).toISOString(),
    firstTokenTime: new Date(hourAgo + 500).toISOString(),
    lastTokenTime: new Date(hourAgo + 2000).toISOString(),
    latencyMs: DEFAULT_PLAUSIBLE_BOUNDS.maxCallMs,
  };
  records.push(outlier);
  const answers = await Promise.all(records.map((record) => postUsage(gateway.url, record, { 'x-api-key': key.key })));
  expect(answers.map((answer) => answer.status)).toEqual(records.map(() => 202));
  outlierRequestId = answers.at(-1)!.body.requestId;
  const clickhouse = testClickHouse(n.database);
  await eventually(
    async () => Number((await queryRows<{ n: string }>(clickhouse, 'SELECT count() AS n FROM usage_events'))[0]?.n) === 241,
    30_000,
  );
  await clickhouse.close();

  fs.mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({
    executablePath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on('dialog', (dialog) => void dialog.accept());
  // What the page's CSP blocks (an inline style attribute, for one) is reported to
  // the page as a securitypolicyviolation event, and to the console.
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (event) => {
      const found = ((window as unknown as { cspViolations?: string[] }).cspViolations ??= []);
      found.push(`${event.violatedDirective} ${event.blockedURI} ${event.sample}`);
    });
  });
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(message.text());
  });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all(services.map((service) => service.stop()));
});

async function openPage(id: string) {
  await page.evaluate((target) => (location.hash = target), id);
  await page.waitForSelector(`body[data-ready="${id}"]`, { timeout: 15_000 });
  await page.waitForTimeout(300);
  await page.screenshot({ path: path.join(shots, `${id}.png`), fullPage: true });
}

describe('dashboard', () => {
  it('refuses a wrong token and signs in with the admin token', async () => {
    await page.goto(admin.url);
    await page.fill('#token', 'not-the-token');
    await page.click('#sign-in');
    await page.waitForSelector('text=That token was refused.');
    await page.fill('#token', adminToken);
    await page.click('#sign-in');
    await page.waitForSelector('body[data-ready="overview"]', { timeout: 15_000 });
  });

  it('Overview draws charts from the posted records', async () => {
    await openPage('overview');
    expect(await page.textContent('[data-metric="Requests"]')).toBe('241');
    expect(await page.locator('#page-overview canvas').count()).toBe(5);
    // A drawn chart has non-blank pixels.
    const drawn = await page.evaluate(() => {
      const canvas = document.querySelector('#page-overview canvas') as HTMLCanvasElement;
      const data = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
      let painted = 0;
      for (let i = 3; i < data.length; i += 4) if (data[i]! > 0) painted++;
      return painted;
    });
    expect(drawn).toBeGreaterThan(1000);
    // Every posted record is loaded and committed: nothing waits in the ingesters' backlog.
    expect(await page.textContent('[data-metric="Ingest backlog"]')).toBe('0');
    // The sample's in-house model has no price: listed with its requests, and nothing else is.
    const unpriced = await page
      .locator(
        '#page-overview section.panel:has(h3:text-is("Unpriced models (cost counted as 0: add them to the price overrides)")) tbody tr',
      )
      .allTextContents();
    expect(unpriced).toHaveLength(1);
    expect(unpriced[0]).toMatch(/^acme\/in-house-7b\d+\d+$/);
  });

  it('stays readable with an outlier at the plausible bounds and a partial current hour', async () => {
    await openPage('overview');
    // Cards: compact (201 M tokens: the outlier's 200 M and the rest), the exact value on hover, nothing cut off by its box.
    const tokens = page.locator('[data-metric="Total tokens"]');
    expect(await tokens.textContent()).toMatch(/^20[01] M$/);
    expect(await tokens.getAttribute('title')).toMatch(/^200,\d{3},\d{3}$/);
    expect(await page.textContent('[data-metric="Cost (USD)"]')).toMatch(/^\$1,2\d\d\.\d{2,4}$/);
    const overflowing = await page.$$eval('.card .value', (values) =>
      values.filter((value) => value.scrollWidth > value.clientWidth).map((value) => value.textContent),
    );
    expect(overflowing).toEqual([]);
    // Axes: compact ticks, the y axis a small part of its chart.
    const axes = await page.$$eval('#page-overview .chart', (holders) =>
      holders.map((holder) => ({
        axis: Number((holder as HTMLElement).dataset.yAxisWidth),
        width: Number((holder as HTMLElement).dataset.width),
        ticks: (holder as HTMLElement).dataset.yTicks ?? '',
        partial: (holder as HTMLElement).dataset.partial,
      })),
    );
    expect(axes).toHaveLength(5);
    for (const { axis, width, ticks, partial } of axes) {
      expect(axis).toBeGreaterThan(0);
      expect(axis / width, ticks).toBeLessThan(0.2);
      for (const tick of ticks.split('|')) expect(tick.length, ticks).toBeLessThanOrEqual(9);
      // The records end now: the last hour is still filling, and every time chart says so.
      expect(partial).toBe('last');
    }
    expect(axes[1]!.ticks).toMatch(/\d+ M/);
    await page.screenshot({ path: path.join(shots, 'overview-outlier.png'), fullPage: true });
  });

  it('GET /v1/pipeline reports the consumer lag per partition, behind the admin token', async () => {
    const refused = await fetch(`${admin.url}/v1/pipeline`);
    expect(refused.status).toBe(401);
    const answer = (await (await fetch(`${admin.url}/v1/pipeline`, { headers: { authorization: `Bearer ${adminToken}` } })).json()) as {
      topic: string;
      group: string;
      lag: number;
      partitions: { partition: number; lag: number }[];
    };
    expect(answer).toMatchObject({ topic: n.topic, group: n.groupId, lag: 0 });
    expect(answer.partitions.map((partition) => partition.partition).sort()).toEqual([0, 1, 2]);
  });

  it('GET /v1/pipeline before the usage topic exists: nothing behind, not an unavailable Kafka', async () => {
    const topic = uniqueName('dash-absent');
    const early = await startAdmin(topic);
    try {
      const response = await fetch(`${early.url}/v1/pipeline`, { headers: { authorization: `Bearer ${adminToken}` } });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ topic, lag: 0, partitions: [] });
    } finally {
      await early.stop();
    }
  });

  it('Models, Errors and Users show their tables and charts', async () => {
    await openPage('models');
    // Tokens, cost, cache hit ratio and latency per model.
    expect(await page.locator('#page-models canvas').count()).toBe(4);
    expect(await page.textContent('#page-models table')).toContain('openai/gpt-4o');
    expect(await page.textContent('#page-models table')).toContain('Cache hits');
    expect(await page.textContent('#page-models table')).toMatch(/\d+\.\d\d%/);
    await openPage('errors');
    expect(await page.textContent('#page-errors')).toMatch(/rate_limit_exceeded|timeout|context_length_exceeded/);
    await openPage('users');
    expect(await page.textContent('#page-users table')).toMatch(/user-\d+/);
  });

  it('the environment filter and an empty range show the empty state', async () => {
    await page.selectOption('#environment', 'dev');
    await page.waitForSelector('body[data-ready="users"]');
    await page.evaluate(() => (location.hash = 'overview'));
    await page.waitForSelector('text=No data in this time range yet.', { timeout: 15_000 });
    await page.screenshot({ path: path.join(shots, 'overview-empty.png'), fullPage: true });
    await page.selectOption('#environment', '');
    await page.waitForSelector('[data-metric="Requests"]:has-text("241")', { timeout: 15_000 });
  });

  it('AI Module Configurations: create a key, post with it, delete it, and the next post is refused', async () => {
    await openPage('keys');
    await page.fill('#key-name', 'browser-made');
    await page.selectOption('#key-env', 'qa');
    await page.selectOption('#key-capture', 'redact');
    await page.click('#create-key');
    const key = (await page.textContent('#new-key', { timeout: 10_000 }))!.trim();
    expect(key).toMatch(/^otm_qa_/);
    await page.screenshot({ path: path.join(shots, 'keys-created.png'), fullPage: true });
    const first = await postUsage(gateway.url, sampleUsageRecords(1, { seed: 1 })[0], { 'x-api-key': key });
    expect([first.status, first.headers['x-otm-capture']]).toEqual([202, 'redact']);

    // The key's capture policy changed in its row, then its environment's: the gateway applies each.
    const row = page.locator('tr[data-key-id]', { hasText: 'browser-made' });
    await row.locator('select').selectOption('full');
    const capturedAs = async (policy: string) => {
      let last: unknown;
      await eventually(
        async () =>
          (last = (await postUsage(gateway.url, sampleUsageRecords(1, { seed: 1 })[0], { 'x-api-key': key })).headers['x-otm-capture']) ===
          policy,
        2_000,
        20,
      ).catch(() => expect(last).toBe(policy));
    };
    await capturedAs('full');
    await page.selectOption('#env-capture-qa', 'metadata-only');
    await capturedAs('metadata-only');
    // Each change is in the audit log panel, newest first.
    await page.locator('#audit-log tr', { hasText: 'environment.capture' }).first().waitFor({ timeout: 10_000 });
    expect(await page.locator('#audit-log').textContent()).toMatch(/key\.create[\s\S]*/);
    await page.screenshot({ path: path.join(shots, 'keys-capture.png'), fullPage: true });
    await page.selectOption('#env-capture-qa', 'full');
    await capturedAs('full');

    await row.locator('button[data-delete]').click();
    await row.waitFor({ state: 'detached', timeout: 10_000 });
    const deletedAt = Date.now();
    let status = 0;
    while (status !== 401 && Date.now() - deletedAt < 2000) {
      status = (await postUsage(gateway.url, sampleUsageRecords(1, { seed: 1 })[0], { 'x-api-key': key })).status;
    }
    expect(status).toBe(401);
    await page.screenshot({ path: path.join(shots, 'keys-deleted.png'), fullPage: true });
  });
});

describe('the page under its own security policy', () => {
  it('sends nosniff and a CSP with frame-ancestors none, and nothing on the pages broke it', async () => {
    const answer = await page.request.get(admin.url);
    expect(answer.headers()['x-content-type-options']).toBe('nosniff');
    expect(answer.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(consoleErrors.filter((text) => /Content Security Policy/i.test(text))).toEqual([]);
    // The page is still the one the earlier tests used (a reload would clear the record).
    expect(await page.evaluate(() => (window as unknown as { cspViolations?: string[] }).cspViolations ?? [])).toEqual([]);
  });
});

describe('a query stopped at its execution limit', () => {
  it('removes the outlier from history in AI Module Configurations: the totals drop back', async () => {
    await openPage('overview');
    const requests = async () => Number((await page.textContent('[data-metric="Requests"]'))!.replaceAll(',', ''));
    const before = await requests();
    await openPage('keys');
    await page.fill('#remove-ids', outlierRequestId);
    await page.fill('#remove-reason', 'the outlier of the browser test');
    await page.click('#remove-records');
    await page.waitForSelector('#removal-state:has-text("1 record(s) removed")', { timeout: 60_000 });
    expect(await page.locator('#audit-log').textContent()).toContain('records.remove.done');
    await openPage('overview');
    expect(await requests()).toBe(before - 1);
    expect(await page.textContent('[data-metric="Total tokens"]')).not.toMatch(/M$/);
  });

  it('is answered 504 QueryTimeout with the documented body, and the dashboard shows its message in place of the charts', async () => {
    // The same data behind a second admin service whose queries may read at most 1 row.
    const limited = await startService(
      'admin',
      stackEnv({
        ADMIN_TOKEN: adminToken,
        ADMIN_PORT: 0,
        CLICKHOUSE_DATABASE: n.database,
        REDIS_KEY_PREFIX: n.keyPrefix,
        USAGE_TOPIC: n.topic,
        INGEST_GROUP_ID: n.groupId,
        ANALYTICS_MAX_ROWS_TO_READ: 1,
      }),
      /admin listening/,
    );
    services.push(limited);
    const answer = await fetch(`${limited.url}/v1/analytics/usage?since=24h&bucket=hour&groupBy=model`, {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    expect(answer.status).toBe(504);
    const body = (await answer.json()) as Record<string, unknown>;
    expect(body).toEqual({
      statusCode: 504,
      errorType: 'QueryTimeout',
      message:
        'The query would read more than 1 rows; narrow it: a shorter range (from/to or since), a coarser bucket, a filter (environment, provider, model, keyId, userId) or fewer groupBy dimensions.',
    });
    expect(answer.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);

    const limitedPage = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    await limitedPage.goto(limited.url);
    await limitedPage.fill('#token', adminToken);
    await limitedPage.click('#sign-in');
    await limitedPage.waitForSelector('body[data-ready="overview"]', { timeout: 15_000 });
    // The totals, each of the five charts and the unpriced models: the message where each would be.
    const shown = await limitedPage.locator('#page-overview .query-error').allTextContents();
    expect(shown).toHaveLength(7);
    for (const text of shown) expect(text).toContain('The query would read more than 1 rows; narrow it');
    expect(await limitedPage.locator('#page-overview canvas').count()).toBe(0);
    await limitedPage.screenshot({ path: path.join(shots, 'overview-query-limit.png'), fullPage: true });
    await limitedPage.close();
  });
});
