// Every package a workspace's code imports is declared in that workspace's own
// package.json: a service's dependencies are what its package.json says (the production
// tree installs them from there), and the root keeps the tooling. Test files of a
// workspace may also use the root's tooling; the root's own code (scripts, tests, the
// configuration files) only what the root declares, or a workspace of the project.
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../scripts/lib/project-root.js';

interface Manifest {
  name: string;
  workspaces?: string[];
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

const readManifest = (folder: string) => JSON.parse(fs.readFileSync(path.join(projectRoot, folder, 'package.json'), 'utf8')) as Manifest;
const declared = (manifest: Manifest) =>
  new Set([
    ...Object.keys(manifest.dependencies ?? {}),
    ...Object.keys(manifest.devDependencies ?? {}),
    ...Object.keys(manifest.peerDependencies ?? {}),
  ]);

const root = readManifest('.');
const workspaces = (root.workspaces ?? []).flatMap((pattern) =>
  pattern.endsWith('/*')
    ? fs
        .readdirSync(path.join(projectRoot, pattern.slice(0, -2)), { withFileTypes: true })
        .filter((entry) => entry.isDirectory() && fs.existsSync(path.join(projectRoot, pattern.slice(0, -2), entry.name, 'package.json')))
        .map((entry) => `${pattern.slice(0, -2)}/${entry.name}`)
    : [pattern],
);
const workspaceNames = new Set(workspaces.map((folder) => readManifest(folder).name));
const builtins = new Set(builtinModules);

/** The package an import names (`@scope/name` or `name`), or undefined for a relative path or a built-in. */
export function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:')) return undefined;
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
  return builtins.has(name) ? undefined : name;
}

/** The source files under `folder`, without dependencies, build output and generated bundles. */
function sources(folder: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (['node_modules', 'dist', '.stack', '.git', 'coverage'].includes(entry.name)) continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.(ts|mts|mjs|js)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) found.push(full);
    }
  };
  walk(path.join(projectRoot, folder));
  return found;
}

/** Every package a file imports (static, dynamic, require, type-only). */
function importsOf(file: string): string[] {
  const info = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
  return info.importedFiles.map((imported) => packageOf(imported.fileName)).filter((name) => name !== undefined);
}

const isTest = (file: string) => /\.test\.ts$/.test(file) || file.includes(`${path.sep}test${path.sep}`);

describe('dependencies are declared where they are imported', () => {
  it('finds the package of an import', () => {
    expect(packageOf('@otm/shared/kafka')).toBe('@otm/shared');
    expect(packageOf('kafkajs/src/protocol')).toBe('kafkajs');
    expect(packageOf('node:fs')).toBeUndefined();
    expect(packageOf('zlib')).toBeUndefined();
    expect(packageOf('./app.js')).toBeUndefined();
  });

  for (const folder of workspaces) {
    it(`${folder}: every import is declared in its package.json (its tests may use the root's tooling)`, () => {
      const own = declared(readManifest(folder));
      const tooling = declared(root);
      const missing = new Set<string>();
      for (const file of sources(folder)) {
        for (const name of importsOf(file)) {
          if (own.has(name) || (isTest(file) && (tooling.has(name) || workspaceNames.has(name)))) continue;
          missing.add(`${path.relative(projectRoot, file)}: ${name}`);
        }
      }
      expect([...missing]).toEqual([]);
    });
  }

  it("the root's own code imports only what the root declares, or a workspace", () => {
    const tooling = declared(root);
    const folders = ['scripts', 'test', 'bench', 'chaos'].filter((folder) => fs.existsSync(path.join(projectRoot, folder)));
    const files = [
      ...folders.flatMap(sources),
      ...fs
        .readdirSync(projectRoot)
        .filter((name) => /\.(ts|js|mjs)$/.test(name))
        .map((name) => path.join(projectRoot, name)),
    ];
    const missing = new Set<string>();
    for (const file of files) {
      for (const name of importsOf(file))
        if (!tooling.has(name) && !workspaceNames.has(name)) missing.add(`${path.relative(projectRoot, file)}: ${name}`);
    }
    expect([...missing]).toEqual([]);
  });
});
