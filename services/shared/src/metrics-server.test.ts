// The metrics port: /metrics behind METRICS_TOKEN when one is set, the health checks open.
import { afterEach, describe, expect, it } from 'vitest';
import type http from 'node:http';
import { Registry } from 'prom-client';
import { serveMetrics } from './metrics-server.js';

let server: http.Server | undefined;
afterEach(() => server?.close());

async function get(path: string, headers: Record<string, string> = {}) {
  const address = server!.address() as { port: number };
  const response = await fetch(`http://127.0.0.1:${address.port}${path}`, { headers });
  return { status: response.status, text: await response.text() };
}

describe('serveMetrics', () => {
  it('with a token: /metrics only for its bearer, /healthz and /readyz for anyone', async () => {
    server = await serveMetrics(new Registry(), '127.0.0.1', 0, () => true, 'metrics-token-0123456789');
    expect((await get('/metrics')).status).toBe(401);
    expect((await get('/metrics', { authorization: 'Bearer wrong' })).status).toBe(401);
    expect((await get('/metrics', { authorization: 'Bearer metrics-token-0123456789' })).status).toBe(200);
    expect((await get('/healthz')).status).toBe(200);
    expect((await get('/readyz')).status).toBe(200);
  });

  it('without one: /metrics for anyone, on the address it was given', async () => {
    server = await serveMetrics(new Registry(), '127.0.0.1', 0);
    expect((await get('/metrics')).status).toBe(200);
    expect((server.address() as { address: string }).address).toBe('127.0.0.1');
  });
});
