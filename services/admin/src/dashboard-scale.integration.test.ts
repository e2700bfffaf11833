// The dashboard against 1 million usage events (DASHBOARD_SCALE_EVENTS to change it; the
// analytics section of npm run bench opens the same pages at 100 million):
// events generated inside ClickHouse over 30 days (test/fixtures/generate-events.ts), the
// views filling the rollups as the ingester's inserts do, then every page opened in
// Chromium over the last 30 days: every chart drawn, no error shown, no request failed.
// The times of these pages at 100 million events are in BENCHMARKS.md (npm run bench --
// --only analytics). The first minute rollup's view, which the API no longer reads once
// the backfill is recorded done (as it is here: the views existed before any event), is
// retired before the events are generated, as an ingester retires it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '@clickhouse/client';
import { chromium, type Browser, type Page } from 'playwright-core';
import { migrate } from '@otm/shared/migrate';
import { markBackfilledIfEmpty } from '@otm/shared/rollups/backfill';
import { generateEvents } from '../../../test/fixtures/generate-events.js';
import { ensureChromium } from '../../../scripts/stack/services.js';
import { stackEnv, startService, testStack, uniqueName, type ServiceProcess } from '../../../test/helpers/stack.js';

const EVENTS = Number(process.env.DASHBOARD_SCALE_EVENTS ?? 1_000_000);
const database = uniqueName('dashscale');
const adminToken = `dashboard-scale-${uniqueName('token')}-abcdefgh`;
const server = createClient({ url: testStack().CLICKHOUSE_URL, request_timeout: 1_200_000 });
const clickhouse = createClient({ url: testStack().CLICKHOUSE_URL, database, request_timeout: 1_200_000 });
let admin: ServiceProcess;
let browser: Browser;
let page: Page;
const failed: string[] = [];

beforeAll(async () => {
  await migrate(server as never, clickhouse as never, database);
  // A new installation: every backfill recorded done, and the legacy minute rollup's view retired.
  expect(await markBackfilledIfEmpty(clickhouse as never)).toBe(true);
  const started = Date.now();
  await generateEvents(clickhouse as never, { count: EVENTS, days: 30, endMs: Date.now(), users: 100_000, models: 50, keys: 50 });
  console.log(`${EVENTS.toLocaleString('en-US')} events generated in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  admin = await startService(
    'admin',
    stackEnv({ ADMIN_TOKEN: adminToken, ADMIN_PORT: 0, CLICKHOUSE_DATABASE: database, REDIS_KEY_PREFIX: `${database}:` }),
    /admin listening/,
  );
  browser = await chromium.launch({ executablePath: ensureChromium(), args: ['--headless', '--no-sandbox', '--disable-gpu'] });
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on('response', (response) => {
    // The analytics requests (the overview's backlog card asks Kafka for a consumer group this test has none of).
    if (response.url().includes('/v1/analytics') && response.status() >= 400) failed.push(`${response.status()} ${response.url()}`);
  });
}, 900_000);

afterAll(async () => {
  await browser?.close();
  await admin?.stop();
  await server.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
  await clickhouse.close();
  await server.close();
});

describe(`the dashboard over ${EVENTS.toLocaleString('en-US')} events`, () => {
  it('draws every chart of every page over the last 30 days, with no error and no failed request', async () => {
    await page.goto(admin.url);
    await page.fill('#token', adminToken);
    await page.click('#sign-in');
    await page.waitForSelector('body[data-ready="overview"]', { timeout: 60_000 });
    await page.evaluate(() => delete document.body.dataset.ready);
    await page.selectOption('#range', '30d');
    const charts: Record<string, number> = { overview: 5, models: 4, errors: 2, users: 2 };
    for (const id of ['overview', 'models', 'errors', 'users']) {
      if (id !== 'overview') {
        await page.evaluate(() => delete document.body.dataset.ready);
        await page.evaluate((target) => (location.hash = target), id);
      }
      const at = performance.now();
      await page.waitForSelector(`body[data-ready="${id}"]`, { timeout: 60_000 });
      console.log(`${id}: ready in ${(performance.now() - at).toFixed(0)} ms`);
      expect(await page.locator(`#page-${id} canvas`).count(), id).toBe(charts[id]);
      expect(await page.locator('.error').allTextContents(), id).toEqual([]);
      // Each chart has pixels drawn.
      const blank = await page.evaluate((pageId) => {
        return [...document.querySelectorAll(`#page-${pageId} canvas`)].filter((canvas) => {
          const element = canvas as HTMLCanvasElement;
          const data = element.getContext('2d')!.getImageData(0, 0, element.width, element.height).data;
          for (let i = 3; i < data.length; i += 4) if (data[i]! > 0) return false;
          return true;
        }).length;
      }, id);
      expect(blank, `${id}: blank charts`).toBe(0);
      if (id === 'overview') {
        // The last 30 days hold (nearly) every generated event: the first seconds of the span may fall out.
        // The card shows 1.00 M; its title holds the exact count.
        expect(await page.textContent('[data-metric="Requests"]')).toMatch(/^[\d,.]+( [KMB])?$/);
        const requests = Number((await page.getAttribute('[data-metric="Requests"]', 'title'))!.replace(/,/g, ''));
        expect(requests).toBeGreaterThan(EVENTS * 0.99);
        expect(requests).toBeLessThanOrEqual(EVENTS);
      }
    }
    const requests = await page.evaluate(
      () => performance.getEntriesByType('resource').filter((entry) => entry.name.includes('/v1/analytics')).length,
    );
    expect(requests).toBeGreaterThanOrEqual(12);
    expect(failed).toEqual([]);
  });
});
