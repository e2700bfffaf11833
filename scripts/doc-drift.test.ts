// The Markdown of the repository names only what exists (scripts/lib/doc-drift.ts):
// variables the code reads, npm scripts, routes the services register, paths.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { findDrift, type Known } from './lib/doc-drift.js';

const root = path.join(import.meta.dirname, '..');
const tracked = execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8' }).split('\n').filter(Boolean);
const markdown = tracked.filter((file) => file.endsWith('.md') && fs.existsSync(path.join(root, file)));
const code = tracked
  .filter((file) => /\.(ts|mts|mjs|js|py|go|sh|ya?ml|json|sql|tpl|conf|xml|toml|properties)$|Dockerfile|^\.ci\//.test(file))
  // Not this file: it names what does not exist, on purpose.
  .filter(
    (file) =>
      !file.endsWith('.md') && file !== 'package-lock.json' && !file.startsWith('bench/results/') && file !== 'scripts/doc-drift.test.ts',
  )
  .filter((file) => fs.existsSync(path.join(root, file)))
  .map((file) => fs.readFileSync(path.join(root, file), 'utf8'))
  .join('\n');
const packageScripts = (file: string) =>
  Object.keys((JSON.parse(fs.readFileSync(path.join(root, file), 'utf8')) as { scripts?: object }).scripts ?? {});
const serviceSources = tracked.filter((file) => /^services\/[^/]+\/src\/.*\.ts$/.test(file) && !file.includes('.test.'));
const routes = serviceSources.flatMap((file) =>
  [...fs.readFileSync(path.join(root, file), 'utf8').matchAll(/['`](\/(?:v1\/[^'`\s]*|healthz|readyz|metrics|openapi\.json))['`]/g)].map(
    (match) => match[1]!,
  ),
);
const known: Known = {
  // OTEL_*: the OpenTelemetry SDKs' own variables, read by them in an example, not by the project.
  inCode: (word) => word.startsWith('OTEL_') || new RegExp(`\\b${word}\\b`).test(code),
  scripts: new Set([
    ...packageScripts('package.json'),
    ...tracked.filter((file) => /^examples\/[^/]+\/package\.json$/.test(file)).flatMap(packageScripts),
  ]),
  routes,
  exists: (relative) => fs.existsSync(path.join(root, relative)),
};
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

describe('the Markdown names only what exists', () => {
  it('finds the docs, the scripts and the routes', () => {
    expect(markdown).toEqual(expect.arrayContaining(['README.md', 'docs/configuration.md', 'docs/ingest-api.md']));
    expect(routes).toEqual(expect.arrayContaining(['/v1/telemetry/usage/batch', '/v1/keys', '/healthz']));
  });

  it('every variable, script, route, path and link of every Markdown file', () => {
    const drift = markdown.flatMap((file) => findDrift(file, read(file), known));
    expect(drift.map((entry) => `${entry.file}:${entry.line} ${entry.kind} ${entry.name}`)).toEqual([]);
  });

  it('a build output path is checked by its workspace (dist/ exists only after npm run build)', () => {
    const page = (name: string) => `The dashboard is bundled into \`${name}\`.`;
    expect(findDrift('docs/x.md', page('services/admin/dist/dashboard/'), known)).toEqual([]);
    expect(findDrift('docs/x.md', page('services/admins/dist/dashboard/'), known).map((entry) => entry.kind)).toEqual(['path']);
  });

  // A copy of a real page, changed on one side only, is caught: the check can fail.
  it.each([
    ['variable', '`RATE_LIMIT_BURST`', '`RATE_LIMIT_BURSTS`', 'docs/configuration.md'],
    ['script', 'npm run gen:config', 'npm run gen:configs', 'CONTRIBUTING.md'],
    ['route', '/v1/telemetry/usage/batch', '/v1/telemetry/usages/batch', 'docs/batch-ingest.md'],
    ['path', '`services/gateway/src/gateway.integration.test.ts`', '`services/gateway/src/gateway.test.ts`', 'docs/ingest-api.md'],
    ['link', '(api.md)', '(apis.md)', 'docs/batch-ingest.md'],
  ] as const)('a %s renamed in a copy of the page is found', (kind, from, to, file) => {
    const text = read(file);
    expect(text).toContain(from);
    expect(findDrift(file, text, known)).toEqual([]);
    const changed = findDrift(file, text.replace(from, to), known);
    expect(changed.map((entry) => entry.kind)).toContain(kind);
  });
});
