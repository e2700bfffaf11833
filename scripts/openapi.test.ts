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
