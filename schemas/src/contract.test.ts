// The contract compiled as the gateway and ingester compile it, on the fixtures.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildQueuedRecordSchema, compileValidators, toFieldErrors } from './index.js';

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

  it('maxLength counts characters (code points), not UTF-16 units, in every kind of string', () => {
    const body = JSON.parse(fs.readFileSync(path.join(fixtures, 'valid', 'success.json'), 'utf8')) as Record<string, any>;
    const accepts = (prompt: string) => {
      body.io.prompt = prompt;
      return validators.usageRecord(body);
    };
    // ASCII, Latin-1 and other one-unit characters: the length is the count.
    expect(accepts('x'.repeat(262_144))).toBe(true);
    expect(accepts('x'.repeat(262_145))).toBe(false);
    expect(accepts('ü€'.repeat(131_072))).toBe(true);
    expect(accepts('ü€'.repeat(131_072) + 'x')).toBe(false);
    // A surrogate pair is one character: 262,144 of them (524,288 units) are within the limit.
    expect(accepts('😀'.repeat(262_144))).toBe(true);
    expect(accepts('😀'.repeat(262_144) + 'x')).toBe(false);
    // Mixed: the pairs anywhere in the text, after a long run without any.
    expect(accepts('x'.repeat(262_000) + '😀'.repeat(144))).toBe(true);
    expect(accepts('x'.repeat(262_000) + '😀'.repeat(145))).toBe(false);
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

describe('context limits, in standard keywords', () => {
  const withContext = (context: unknown) => {
    const body = JSON.parse(fs.readFileSync(path.join(fixtures, 'valid', 'success.json'), 'utf8'));
    body.context = context;
    const valid = validators.usageRecord(body);
    return valid ? [] : toFieldErrors(validators.usageRecord.errors);
  };
  const nest = (levels: number, leaf: unknown = {}): unknown => (levels === 1 ? leaf : { a: nest(levels - 1, leaf) });

  it('accepts 8 levels (the context object is level 1) and refuses 9', () => {
    expect(withContext(nest(8))).toEqual([]);
    expect(withContext(nest(8, []))).toEqual([]);
    expect(withContext(nest(7, { leaf: 'x' }))).toEqual([]);
    expect(withContext(nest(8, { leaf: 'x' }))).not.toEqual([]);
    expect(withContext(nest(8, ['x']))).not.toEqual([]);
  });

  it('counts keys per object, items per array and characters of strings and keys anywhere', () => {
    const keys = (count: number) => Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${i}`, i]));
    expect(withContext({ a: keys(64) })).toEqual([]);
    expect(withContext({ a: keys(65) })).toEqual([{ path: '/context/a', message: 'must NOT have more than 64 properties' }]);
    expect(withContext({ a: Array(257).fill(1) })).toEqual([{ path: '/context/a', message: 'must NOT have more than 256 items' }]);
    expect(withContext({ a: [{ b: 'x'.repeat(1025) }] })).toEqual([
      { path: '/context/a/0/b', message: 'must NOT have more than 1024 characters' },
    ]);
    expect(withContext({ ['k'.repeat(1025)]: 1 })).not.toEqual([]);
  });

  it('refuses control characters and bidirectional overrides in key names and says which key', () => {
    expect(withContext({ 'tab\there': 1 })).toEqual([
      { path: '/context/tab\there', message: 'key must not contain control characters or bidirectional overrides' },
    ]);
    expect(withContext({ deeper: { 'rtl\u202e': 1 } })).toEqual([
      { path: '/context/deeper/rtl\u202e', message: 'key must not contain control characters or bidirectional overrides' },
    ]);
    expect(withContext({ 'newline in value is fine': 'a\nb' })).toEqual([]);
  });
});
