// Prometheus metrics are served on a port of their own, never on the ingest port.
import http from 'node:http';
import type { Registry } from 'prom-client';

/**
 * `/metrics`, and with `ready` also `/healthz` (process alive) and `/readyz` (200 while
 * `ready()` is true, else 503), for a service that has no HTTP port of its own.
 */
export function serveMetrics(registry: Registry, host: string, port: number, ready?: () => boolean): Promise<http.Server> {
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
    response.writeHead(200, { 'content-type': registry.contentType });
    response.end(await registry.metrics());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
