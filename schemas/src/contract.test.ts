// The contract compiled as the gateway and ingester compile it, on the fixtures.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildQueuedRecordSchema, checkContextLimits, compileValidators, toFieldErrors } from './index.js';

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures');
const validators = compileValidators(buildQueuedRecordSchema());

describe('usage record schema', () => {
  it.each(fs.readdirSync(path.join(fixtures, 'valid')))('accepts valid/%s', (file) => {
    const body = JSON.parse(fs.readFileSync(path.join(fixtures, 'valid', file), 'utf8'));
    expect(validators.usageRecord(body), JSON.stringify(validators.usageRecord.errors)).toBe(true);
  });

  it('maps errors to JSON pointers with one message each and no if/then noise', () => {
    expect(
      validators.usageRecord({ request: { modelId: 'm', provider: 'p', status: 'success' }, user: { id: 'u', type: 'x' }, extra: 1 }),
    ).toBe(false);
    const byPath = (a: { path: string }, b: { path: string }) => a.path.localeCompare(b.path);
    expect(toFieldErrors(validators.usageRecord.errors).sort(byPath)).toEqual(
      [
        { path: '/extra', message: 'is not allowed' },
        { path: '/tokens', message: 'is required' },
        { path: '/timing', message: 'is required' },
        { path: '/io', message: 'is required' },
        { path: '/user/type', message: 'must be one of: external, internal' },
      ].sort(byPath),
    );
  });

  it('the queued record embeds the usage record unchanged', () => {
    const schema = buildQueuedRecordSchema() as { definitions: { usageRecord: { properties: object } } };
    expect(Object.keys(schema.definitions.usageRecord.properties)).toEqual([
      'request',
      'user',
      'tokens',
      'timing',
      'io',
      'error',
      'context',
    ]);
  });
});

describe('validators without length limits (the ingester, after the gateway checked them)', () => {
  const fixture = (name: string) => JSON.parse(fs.readFileSync(path.join(fixtures, 'valid', name), 'utf8')) as Record<string, any>;
  const schema = buildQueuedRecordSchema();
  const lenient = compileValidators(schema, { maxLengths: false });

  it('accepts a prompt over maxLength that the full validators refuse, and leaves the schema as it was', () => {
    const body = fixture('success.json');
    body.io.prompt = 'x'.repeat(262_145);
    expect(validators.usageRecord(body)).toBe(false);
    expect(lenient.usageRecord(body)).toBe(true);
    expect(JSON.stringify(schema)).toContain('"maxLength":262144');
  });

  it('still checks everything else: types, required fields, enums, formats, minLength, context limits', () => {
    const cases: ((body: Record<string, any>) => void)[] = [
      (body) => (body.io.prompt = 42),
      (body) => delete body.user,
      (body) => (body.user.type = 'robot'),
      (body) => (body.timing.startTime = 'yesterday'),
      (body) => (body.request.modelId = ''),
      (body) => (body.context = { deep: { a: { b: { c: { d: { e: { f: { g: { h: {} } } } } } } } } }),
    ];
    for (const spoil of cases) {
      const body = fixture('success.json');
      expect(lenient.usageRecord(body)).toBe(true);
      spoil(body);
      expect(lenient.usageRecord(body), spoil.toString()).toBe(false);
    }
  });

  it('keeps a field that happens to be named like the keyword', () => {
    const withField = {
      $id: 'urn:test:field-named-maxLength',
      type: 'object',
      properties: { maxLength: { type: 'string', maxLength: 2 } },
      required: ['maxLength'],
      definitions: { usageRecord: { type: 'object' } },
    };
    const compiled = compileValidators(withField, { maxLengths: false }).queuedRecord;
    expect(compiled({ maxLength: 'long enough' })).toBe(true);
    expect(compiled({ maxLength: 5 })).toBe(false);
  });
});

describe('context limits', () => {
  const limits = { maxDepth: 8, maxKeys: 64, maxStringLength: 1024 };
  it('accepts 8 levels and refuses 9', () => {
    const nest = (levels: number): unknown => (levels === 1 ? {} : { a: nest(levels - 1) });
    expect(checkContextLimits(nest(8), limits)).toBeUndefined();
    expect(checkContextLimits(nest(9), limits)).toMatch(/levels/);
  });
  it('counts keys per object and string length anywhere', () => {
    expect(checkContextLimits({ a: { ...Object.fromEntries(Array.from({ length: 65 }, (_, i) => [i, i])) } }, limits)).toMatch(/keys/);
    expect(checkContextLimits({ a: ['x'.repeat(1025)] }, limits)).toMatch(/strings/);
  });
});
