// What the services need to run in production, and nothing else: the built dist/ of
// each workspace they load, the files those read at run time (schemas, migrations)
// and the production dependencies (the price database among them), installed with `npm ci --omit=dev`.
// The services image is made from this tree (scripts/images.ts), and a test runs the
// services from it with plain Node.js (test/build.integration.test.ts).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** The workspaces the services load, each with the folders it reads at run time besides dist/. */
const runtimeWorkspaces: Record<string, string[]> = {
  schemas: ['usage-record.schema.json', 'queued-record.schema.json', 'erasure-announcement.schema.json', 'openapi.json', 'history', 'otlp'],
  'services/shared': ['migrations'],
  'services/gateway': [],
  'services/ingester': [],
  'services/admin': [],
};

/** Build outputs nothing reads at run time: declarations and the compiler's incremental state. */
const compilerOnly = /(\.d\.ts|\.d\.ts\.map|\.tsbuildinfo)$/;

/**
 * Fills `target` with the production tree of the project at `root`. `npm run build` must
 * have run. The install uses the npm cache where it can; it runs no install scripts.
 */
export function stageProductionTree(root: string, target: string): void {
  if (!fs.existsSync(path.join(root, 'services/gateway/dist/server.js'))) throw new Error('no build: run `npm run build` first');
  fs.mkdirSync(target, { recursive: true });
  for (const file of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(root, file), path.join(target, file));
  for (const [workspace, extras] of Object.entries(runtimeWorkspaces)) {
    const from = path.join(root, workspace);
    const to = path.join(target, workspace);
    fs.mkdirSync(to, { recursive: true });
    fs.copyFileSync(path.join(from, 'package.json'), path.join(to, 'package.json'));
    fs.cpSync(path.join(from, 'dist'), path.join(to, 'dist'), { recursive: true, filter: (source) => !compilerOnly.test(source) });
    for (const extra of extras) fs.cpSync(path.join(from, extra), path.join(to, extra), { recursive: true });
  }
  // Without the clients' folders npm installs only the services' dependencies (the
  // test-containers module's are not production dependencies of a service).
  const install = spawnSync('npm', ['ci', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund'], {
    cwd: target,
    env: { ...process.env, NODE_OPTIONS: '' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (install.status !== 0) throw new Error(`npm ci --omit=dev failed with exit code ${install.status ?? install.signal}`);
  // The dependency patches (patches/, applied by `npm install`'s postinstall) apply
  // here too: the install above ran no scripts, and patch-package is a build tool.
  fs.cpSync(path.join(root, 'patches'), path.join(target, 'patches'), { recursive: true });
  const patch = spawnSync(process.execPath, [path.join(root, 'node_modules/patch-package/index.js'), '--error-on-fail'], {
    cwd: target,
    env: { ...process.env, NODE_OPTIONS: '' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (patch.status !== 0) throw new Error(`patch-package failed with exit code ${patch.status ?? patch.signal}`);
  // Type declarations are for the compiler; nothing reads them at run time.
  fs.rmSync(path.join(target, 'node_modules/@types'), { recursive: true, force: true });
}
