// The dashboard: a single page (plain TypeScript + Chart.js) bundled by esbuild
// when the admin service starts, served from memory. The page holds no data; it
// reads the analytics and keys APIs with the admin token the operator types in.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { FastifyInstance } from 'fastify';

const dashboardDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dashboard');

export async function bundleDashboard(): Promise<{ js: string; css: string; html: string }> {
  const result = await build({
    entryPoints: [path.join(dashboardDir, 'main.ts')],
    bundle: true,
    minify: true,
    format: 'esm',
    target: 'es2022',
    write: false,
    logLevel: 'silent',
  });
  return {
    js: result.outputFiles[0]!.text,
    css: fs.readFileSync(path.join(dashboardDir, 'styles.css'), 'utf8'),
    html: fs.readFileSync(path.join(dashboardDir, 'index.html'), 'utf8'),
  };
}

export async function registerDashboard(app: FastifyInstance): Promise<void> {
  const assets = await bundleDashboard();
  const security = {
    'content-security-policy':
      "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    // The page and its bundle change with each start of the service: always revalidated.
    'cache-control': 'no-cache',
  };
  app.get('/', async (_request, reply) => reply.headers(security).type('text/html; charset=utf-8').send(assets.html));
  app.get('/app.js', async (_request, reply) => reply.headers(security).type('text/javascript; charset=utf-8').send(assets.js));
  app.get('/app.css', async (_request, reply) => reply.headers(security).type('text/css; charset=utf-8').send(assets.css));
}
