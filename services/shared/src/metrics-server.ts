// Prometheus metrics are served on a port of their own, never on the ingest port:
// bound to loopback unless METRICS_HOST says otherwise, and behind a bearer token when
// METRICS_TOKEN is set (the health checks stay open: a probe carries no token).
import http from 'node:http';
import type { Registry } from 'prom-client';
import { bearerTokenCheck } from './bearer-token.js';
import { refuse } from './errors.js';

/**
 * `/metrics`, and with `ready` also `/healthz` (process alive) and `/readyz` (200 while
 * `ready()` is true, else 503), for a service that has no HTTP port of its own.
 */
export function serveMetrics(registry: Registry, host: string, port: number, ready?: () => boolean, token = ''): Promise<http.Server> {
  const accepted = token === '' ? undefined : bearerTokenCheck([token]);
  const server = http.createServer(async (request, response) => {
    if (ready && (request.url === '/healthz' || request.url === '/readyz')) {
      const ok = request.url === '/healthz' || ready();
      response.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ status: request.url === '/healthz' ? 'ok' : ok ? 'ready' : 'unavailable' }));
      return;
    }
    if (request.url !== '/metrics') {
      response.writeHead(404).end();
      return;
    }
    if (accepted && !accepted(request.headers.authorization)) {
      response.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' });
      response.end(JSON.stringify(refuse('metricsTokenInvalid').toBody()));
      return;
    }
    response.writeHead(200, { 'content-type': registry.contentType });
    response.end(await registry.metrics());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
