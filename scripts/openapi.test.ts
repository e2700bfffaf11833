// The generated OpenAPI document is valid OpenAPI 3.1 (checked by a real parser) and
// describes every route the services register and every error body.
import { describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import { validate } from '@readme/openapi-parser';
import { errorCatalog } from '@otm/shared/errors';
import { ingestRoutes } from '../services/gateway/src/ingest-routes.js';
import { analyticsRoutes } from '../services/admin/src/analytics-routes.js';

const document = createRequire(import.meta.url)('@otm/schemas/openapi.json');

describe('schemas/openapi.json', () => {
  it('validates as OpenAPI 3.1', async () => {
    const result = await validate(structuredClone(document));
    expect(result.valid ? [] : result.errors).toEqual([]);
    expect(document.openapi).toBe('3.1.0');
  });

  it('describes both ingest endpoints, the analytics API and every error type', () => {
    const paths = Object.keys(document.paths);
    for (const route of [...Object.values(ingestRoutes), ...analyticsRoutes]) expect(paths).toContain(route.url);
    const documented = JSON.stringify(document.paths);
    for (const route of Object.values(ingestRoutes)) {
      for (const errorType of route.errors) expect(documented).toContain(`\`${errorType}\``);
    }
    expect(Object.keys(document.paths[ingestRoutes.batch.url].post.responses)).toEqual(
      expect.arrayContaining(['202', '207', '400', '401', '413', '415', '429', '503']),
    );
    expect(document.components.schemas.ErrorBody.required).toEqual(['statusCode', 'errorType', 'message']);
    expect(Object.keys(errorCatalog).length).toBeGreaterThan(0);
  });
});

describe('schemas/openapi.json covers every service route', () => {
  it('each route the gateway and the admin service register is a path of the document, with the server that serves it', async () => {
    const fs = await import('node:fs');
    const path = await import('node:path');
    const root = path.join(import.meta.dirname, '..');
    const registered = ['services/admin/src', 'services/gateway/src'].flatMap((folder) =>
      fs
        .readdirSync(path.join(root, folder))
        .filter((file) => file.endsWith('.ts') && !file.includes('.test.'))
        .flatMap((file) => [
          ...fs
            .readFileSync(path.join(root, folder, file), 'utf8')
            .matchAll(/app\.(?:get|post|put|patch|delete)(?:<[^(]*>)?\(\s*'(\/v1\/[^']+)'/g),
        ])
        .map((match) => match[1]!.replace(/:(\w+)/g, '{$1}')),
    );
    expect(registered).toEqual(expect.arrayContaining(['/v1/keys', '/v1/keys/{id}', '/v1/admin/erasures/{id}']));
    for (const url of registered) expect(Object.keys(document.paths), url).toContain(url);
    for (const [url, operations] of Object.entries(document.paths as Record<string, Record<string, { servers?: { url: string }[] }>>)) {
      for (const operation of Object.values(operations)) {
        const server = (operation.servers ?? document.servers)[0].url as string;
        expect(server, url).toBe(
          url.startsWith('/v1/telemetry') || url.startsWith('/v1/otlp') || !url.startsWith('/v1/')
            ? 'https://127.0.0.1:8443'
            : 'http://127.0.0.1:8480',
        );
      }
    }
  });
});
