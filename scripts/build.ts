// npm run build: every workspace compiled by tsc (project references, tsconfig.build.json)
// into its own dist/, and the admin dashboard bundled into services/admin/dist/dashboard.
// The built services run with plain Node.js and only the production dependencies:
//
//   npm run build && node services/gateway/dist/server.js
//
// Development keeps running the sources: the workspaces export them under the
// `otm-source` condition, which every npm script passes to tsx (docs/architecture.md).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { writeDashboard } from '../services/admin/src/dashboard.js';
import { projectRoot as root } from './lib/project-root.js';

const workspaces = [
  'schemas',
  'services/shared',
  'services/gateway',
  'services/ingester',
  'services/admin',
  'clients/typescript',
  'clients/testcontainers',
];

const options = new Command('build')
  .description('Compile every workspace to dist/ and bundle the dashboard')
  .option('--clean', 'remove every dist/ first')
  .parse(process.argv)
  .opts<{ clean?: boolean }>();

if (options.clean) for (const folder of workspaces) fs.rmSync(path.join(root, folder, 'dist'), { recursive: true, force: true });
const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-b', path.join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });
await writeDashboard(path.join(root, 'services/admin/dist/dashboard'));
console.log(`built: ${workspaces.map((folder) => `${folder}/dist`).join(', ')}`);
