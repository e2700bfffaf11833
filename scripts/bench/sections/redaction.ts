// 6. Redaction cost --------------------------------------------------------------
// The capture policy `redact` runs at the gateway over every record's free text. In
// process, no services: the redactor over the prompts and responses of the sample
// records (0.5-4 KB of prose each), over text dense with what it finds (the labelled
// set), and over hostile runs; against the schema validation the gateway already does
// for each of the same records, measured in the same run.
import fs from 'node:fs';
import path from 'node:path';
import { buildQueuedRecordSchema, compileValidators } from '@otm/schemas';
import { builtInDetectors, Redactor } from '../../../services/gateway/src/redact.js';
import { sampleUsageRecords } from '../../../test/fixtures/sample-records.js';
import { figure, log, results, root, runs } from '../context.js';

/** Microseconds per pass of `work` over `items`, the median of `runs` passes after a warm-up. */
function timed<T>(items: readonly T[], work: (item: T) => unknown, passes: number): number[] {
  for (const item of items) work(item);
  const samples: number[] = [];
  for (let pass = 0; pass < passes; pass++) {
    const started = process.hrtime.bigint();
    for (const item of items) work(item);
    samples.push(Number(process.hrtime.bigint() - started) / 1000);
  }
  return samples;
}

export async function benchRedaction(): Promise<void> {
  log('6. redaction cost per KiB (in process; baseline: schema validation of the same records)');
  const redactor = new Redactor(builtInDetectors('US'));
  const validators = compileValidators(buildQueuedRecordSchema());
  const records = sampleUsageRecords(1000, { seed: 2026 });
  const texts = records.flatMap((record) => [record.io?.prompt, record.io?.response].filter((text): text is string => Boolean(text)));
  const kib = texts.reduce((sum, text) => sum + Buffer.byteLength(text), 0) / 1024;
  const labelled = JSON.parse(fs.readFileSync(path.join(root, 'services/gateway/src/fixtures/redaction-labelled.json'), 'utf8')) as {
    cases: { text: string }[];
  };
  const dense = labelled.cases.map((entry) => entry.text);
  const denseKib = dense.reduce((sum, text) => sum + Buffer.byteLength(text), 0) / 1024;
  const hostile = ['1 ', 'a@', '+1 (', 'sk-'].map((unit) => unit.repeat(Math.ceil((64 * 1024) / unit.length)).slice(0, 64 * 1024));
  const passes = Math.max(runs, 5);

  const prose = figure(timed(texts, (text) => redactor.redact(text), passes).map((us) => us / kib));
  const pii = figure(timed(dense, (text) => redactor.redact(text), passes).map((us) => us / denseKib));
  const worst = figure(timed(hostile, (text) => redactor.redact(text), passes).map((us) => us / (hostile.length * 64)));
  const validation = figure(timed(records, (record) => validators.usageRecord(record), passes).map((us) => us / records.length));
  const redactPerRecord = figure(
    timed(records, (record) => [record.io?.prompt, record.io?.response].forEach((text) => text && redactor.redact(text)), passes).map(
      (us) => us / records.length,
    ),
  );
  results.redaction = {
    usPerKibProse: prose.median,
    usPerKibDense: pii.median,
    usPerKibHostile: worst.median,
    usPerRecord: redactPerRecord.median,
    validationUsPerRecord: validation.median,
    ratioToValidation: redactPerRecord.median / validation.median,
    meanTextBytes: Math.round((kib * 1024) / texts.length),
    prose,
    dense: pii,
    hostile: worst,
    perRecord: redactPerRecord,
    validation,
  };
  log(
    `   ${prose.median.toFixed(1)} µs/KiB prose, ${pii.median.toFixed(1)} µs/KiB dense, ${worst.median.toFixed(1)} µs/KiB hostile; ${redactPerRecord.median.toFixed(1)} µs per record vs validation ${validation.median.toFixed(1)} µs`,
  );
}
