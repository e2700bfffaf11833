// Validation parity (docs/topic-contract.md, "Validating before producing"): every
// rule of the record schema a standard JSON Schema validator can check is written in
// standard keywords, so Python's jsonschema (format checking on, an independent
// implementation) accepts and refuses exactly the fixtures the gateway's AJV does.
// The rules no schema can say (timestamps in a window around the server's clock,
// well-formed Unicode, token detail within its totals) are listed in the docs and
// checked by the gateway alone.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildQueuedRecordSchema, compileValidators } from '@otm/schemas';
import { pythonWith, runPython } from './helpers/python.js';
import { projectRoot } from './helpers/stack.js';

const fixtures = path.join(projectRoot, 'schemas', 'fixtures');

function ajvVerdicts(): Record<string, boolean> {
  const { usageRecord } = compileValidators(buildQueuedRecordSchema());
  const verdicts: Record<string, boolean> = {};
  for (const folder of ['valid', 'invalid']) {
    for (const file of fs.readdirSync(path.join(fixtures, folder)).sort()) {
      const document = JSON.parse(fs.readFileSync(path.join(fixtures, folder, file), 'utf8'));
      verdicts[`${folder}/${file}`] = usageRecord(folder === 'valid' ? document : document.record);
    }
  }
  return verdicts;
}

describe('validator parity', () => {
  it('AJV accepts every valid fixture and refuses every invalid one', () => {
    const verdicts = Object.entries(ajvVerdicts());
    expect(verdicts.length).toBeGreaterThan(40);
    for (const [name, valid] of verdicts) expect(valid, name).toBe(name.startsWith('valid/'));
  });

  it("Python's jsonschema, with format checking, gives the same verdict on every fixture", async (context) => {
    const python = await pythonWith(['schemas/python/requirements.txt']);
    if (!python) {
      context.skip('python3 is not on the PATH: the Python half of the parity check needs it');
      return;
    }
    const output = await runPython(python, ['schemas/python/check_fixtures.py', 'schemas/usage-record.schema.json', 'schemas/fixtures']);
    expect(JSON.parse(output)).toEqual(ajvVerdicts());
  });
});
