// Prometheus metrics are served on a port of their own, never on the ingest port.
import http from 'node:http';
import type { Registry } from 'prom-client';

export function serveMetrics(registry: Registry, host: string, port: number): Promise<http.Server> {
  const server = http.createServer(async (request, response) => {
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
