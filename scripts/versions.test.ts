// One version for the project (docs/versioning.md): the root package's, repeated in
// every workspace package, the OpenAPI document and the Helm chart's appVersion.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.join(import.meta.dirname, '..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');
const version = (JSON.parse(read('package.json')) as { version: string }).version;

describe('versions', () => {
  it('every workspace package, the OpenAPI document and the chart carry the root version', () => {
    const workspaces = (JSON.parse(read('package.json')) as { workspaces: string[] }).workspaces.flatMap((pattern) =>
      pattern.endsWith('/*')
        ? fs.readdirSync(path.join(root, pattern.slice(0, -2))).map((name) => `${pattern.slice(0, -2)}/${name}`)
        : [pattern],
    );
    const found = workspaces
      .filter((folder) => fs.existsSync(path.join(root, folder, 'package.json')))
      .map((folder) => [folder, (JSON.parse(read(`${folder}/package.json`)) as { version: string }).version]);
    expect(found.length).toBeGreaterThan(5);
    expect(found).toEqual(found.map(([folder]) => [folder, version]));
    expect((JSON.parse(read('schemas/openapi.json')) as { info: { version: string } }).info.version).toBe(version);
    const chart = read('deploy/helm/otm-telemetry/Chart.yaml');
    expect(/^appVersion: '?([^'\n]+)'?$/m.exec(chart)?.[1]).toBe(version);
  });

  it('every package is under the project license', () => {
    for (const file of ['package.json', 'clients/typescript/package.json', 'clients/testcontainers/package.json']) {
      expect((JSON.parse(read(file)) as { license?: string }).license, file).toBe('Apache-2.0');
    }
    expect(read('LICENSE')).toContain('Apache License');
    // The SDK ships the license in its package: the same text.
    expect(read('clients/typescript/LICENSE')).toBe(read('LICENSE'));
  });
});
