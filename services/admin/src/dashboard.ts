// The dashboard: a single page (plain TypeScript + Chart.js), served from memory. The
// page holds no data; it reads the analytics and keys APIs with the admin token the
// operator types in. `npm run build` bundles it into dist/dashboard/ beside the built
// service, which serves that bundle; run from its sources (development), the service
// bundles the page when it starts (esbuild and Chart.js are development dependencies).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';

const moduleDir = path.dirname(fileURLToPath(import.meta.url));
const sourceDir = path.resolve(moduleDir, '../dashboard');
/** Where `npm run build` writes the bundle: dist/dashboard, beside the built service. */
const builtDir = path.join(moduleDir, 'dashboard');

export interface DashboardAssets {
  js: string;
  css: string;
  html: string;
}

/** Bundles the page from its sources (esbuild, imported only here: it is not a production dependency). */
export async function bundleDashboard(): Promise<DashboardAssets> {
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: [path.join(sourceDir, 'main.ts')],
    bundle: true,
    minify: true,
    format: 'esm',
    target: 'es2022',
    write: false,
    logLevel: 'silent',
  });
  return {
    js: result.outputFiles[0]!.text,
    css: fs.readFileSync(path.join(sourceDir, 'styles.css'), 'utf8'),
    html: fs.readFileSync(path.join(sourceDir, 'index.html'), 'utf8'),
  };
}

/** Writes the bundle where the built service reads it (`outDir`: the admin service's dist/dashboard). */
export async function writeDashboard(outDir: string): Promise<void> {
  const assets = await bundleDashboard();
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'app.js'), assets.js);
  fs.writeFileSync(path.join(outDir, 'app.css'), assets.css);
  fs.writeFileSync(path.join(outDir, 'index.html'), assets.html);
}

async function loadDashboard(): Promise<DashboardAssets> {
  if (!fs.existsSync(path.join(builtDir, 'app.js'))) return bundleDashboard();
  const read = (name: string) => fs.readFileSync(path.join(builtDir, name), 'utf8');
  return { js: read('app.js'), css: read('app.css'), html: read('index.html') };
}

export async function registerDashboard(app: FastifyInstance): Promise<void> {
  const assets = await loadDashboard();
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
