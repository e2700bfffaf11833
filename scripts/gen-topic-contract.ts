// The tables of docs/topic-contract.md that code can state: the topics and the subject
// (the services' configuration defaults), the message headers (the constants the
// gateway and the ingester set them from), the envelope's `meta` and the record's
// fields (the JSON Schemas). Each table sits between `<!-- generated:<name> -->` and
// `<!-- /generated:<name> -->`; the prose around them is written by hand.
// `npm run gen:contract` rewrites them; `-- --check` (in npm test) fails when stale.
import fs from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { format, resolveConfig } from 'prettier';
import { buildQueuedRecordSchema, QUEUED_MESSAGE_HEADERS, usageRecordSchema } from '@otm/schemas';
import { infrastructureSpec } from '@otm/shared/config';
import { SUBJECT_COMPATIBILITY } from '@otm/shared/registry';
import { ERASURE_TOPIC_CONFIG } from '@otm/shared/erasure-announcements';
import { DEAD_LETTER_HEADERS, DEAD_LETTER_REASONS } from '../services/ingester/src/outcome.js';
import { BROKER_RETENTION_HOURS } from './stack/services.js';
import { projectRoot as root } from './lib/project-root.js';

const { check } = new Command('gen:contract')
  .description("Rewrite the generated tables of docs/topic-contract.md from the code's topics, headers and schemas")
  .option('--check', 'write nothing; exit 1 when the page is stale')
  .parse(process.argv)
  .opts<{ check?: boolean }>();

const target = 'docs/topic-contract.md';

type Schema = Record<string, any>;

const escape = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');
const table = (head: string[], rows: string[][]) =>
  [`| ${head.join(' | ')} |`, `| ${head.map(() => '---').join(' | ')} |`, ...rows.map((row) => `| ${row.map(escape).join(' | ')} |`)].join(
    '\n',
  );
const code = (text: unknown) => `\`${String(text)}\``;

function defaultOf(name: keyof typeof infrastructureSpec): string {
  return String((infrastructureSpec[name] as unknown as { default: unknown }).default);
}

function topics(): string {
  return table(
    ['topic', 'what', 'partitions', 'retention', 'variable'],
    [
      [
        code(defaultOf('USAGE_TOPIC')),
        'one message per accepted usage record',
        `${defaultOf('USAGE_TOPIC_PARTITIONS')} when a service creates it (${code('USAGE_TOPIC_PARTITIONS')})`,
        `the broker's (the local stack: ${BROKER_RETENTION_HOURS} h; Kafka's default is 7 days)`,
        code('USAGE_TOPIC'),
      ],
      [
        code(defaultOf('DLQ_TOPIC')),
        'records the ingester can never load, unchanged, with the reason in headers',
        "the broker's default",
        "the broker's",
        code('DLQ_TOPIC'),
      ],
      [
        code(defaultOf('ERASURE_TOPIC')),
        "one message per erasure of a user's data, keyed `<environment>:<userId>` ([Erasures](#erasures))",
        '1',
        `compacted (${Object.entries(ERASURE_TOPIC_CONFIG)
          .map(([name, value]) => code(`${name}=${value}`))
          .join(', ')}): the latest message of each key is kept for ever`,
        code('ERASURE_TOPIC'),
      ],
    ],
  );
}

function subject(): string {
  return table(
    ['subject', 'compatibility', 'schema file', 'variable'],
    [
      [
        code(defaultOf('SCHEMA_SUBJECT')),
        `${code(SUBJECT_COMPATIBILITY)}, set by every gateway at start`,
        '[`schemas/queued-record.schema.json`](../schemas/queued-record.schema.json)',
        code('SCHEMA_SUBJECT'),
      ],
      [
        code(`${defaultOf('ERASURE_TOPIC')}-value`),
        `${code(SUBJECT_COMPATIBILITY)}, set by the admin service at its first erasure`,
        '[`schemas/erasure-announcement.schema.json`](../schemas/erasure-announcement.schema.json)',
        `${code('ERASURE_TOPIC')} + ${code('-value')}`,
      ],
    ],
  );
}

function headers(described: Record<string, string>): string {
  return table(
    ['header', 'holds'],
    Object.entries(described).map(([name, holds]) => [code(name), holds]),
  );
}

/** The type of a schema node in words: `string`, `uint`, `timestamp`, one of an enum … */
function typeOf(node: Schema, definitions: Record<string, Schema>): string {
  if (node.$ref) {
    const name = String(node.$ref).split('/').pop()!;
    if (name === 'uint') return 'integer ≥ 0';
    if (name === 'timestamp') return 'RFC 3339 date-time';
    if (name === 'identifier') return 'string';
    return typeOf(definitions[name] ?? {}, definitions);
  }
  if (node.enum) return (node.enum as unknown[]).map((value) => code(value)).join(' or ');
  if (node.format === 'date-time') return 'RFC 3339 date-time';
  return Array.isArray(node.type) ? node.type.join(' or ') : String(node.type ?? 'any JSON');
}

/** The rules of a field beyond its type, in words. */
function rulesOf(node: Schema, definitions: Record<string, Schema>): string {
  const target = node.$ref ? (definitions[String(node.$ref).split('/').pop()!] ?? {}) : node;
  const rules: string[] = [];
  if (target.minLength) rules.push(`at least ${target.minLength} character`);
  if (target.maxLength) rules.push(`at most ${target.maxLength} characters`);
  if (String(node.$ref ?? '').endsWith('/identifier')) rules.push('no control characters, no bidi overrides');
  if (String(node.$ref ?? '').endsWith('/timestamp')) rules.push('upper-case `T`, offset `Z` or `±hh:mm`, ≤ 9 fraction digits');
  if (target.maximum !== undefined && target.maximum < 2 ** 53 - 1) rules.push(`at most ${target.maximum}`);
  if (target.maxProperties !== undefined) rules.push(`at most ${target.maxProperties} keys`);
  return rules.join('; ');
}

function fields(schema: Schema, prefix = ''): string[][] {
  const definitions = (schema.definitions ?? {}) as Record<string, Schema>;
  const rows: string[][] = [];
  const walk = (node: Schema, at: string) => {
    const required = new Set<string>(node.required ?? []);
    for (const [name, child] of Object.entries((node.properties ?? {}) as Record<string, Schema>)) {
      const fieldPath = `${at}${name}`;
      const isObject = child.type === 'object' && child.properties;
      rows.push([
        code(fieldPath),
        isObject ? 'object' : typeOf(child, definitions),
        required.has(name) ? 'yes' : 'no',
        rulesOf(child, definitions),
        child.description ?? '',
      ]);
      if (isObject) walk(child, `${fieldPath}.`);
    }
  };
  walk(schema, prefix);
  return rows;
}

function meta(): string {
  const envelope = buildQueuedRecordSchema() as Schema;
  return table(['member', 'type', 'required', 'rules', 'meaning'], fields(envelope.definitions.queuedRecordMeta as Schema));
}

function record(): string {
  return table(['field', 'type', 'required', 'rules', 'meaning'], fields(usageRecordSchema as Schema));
}

const sections: Record<string, () => string> = {
  topics,
  subject,
  'message-headers': () => headers(QUEUED_MESSAGE_HEADERS),
  'dead-letter-headers': () => headers(DEAD_LETTER_HEADERS),
  'dead-letter-reasons': () =>
    table(
      ['`x-dlq-reason-code`', 'the record'],
      Object.entries(DEAD_LETTER_REASONS).map(([name, { meaning }]) => [code(name), meaning]),
    ),
  meta,
  record,
};

const file = path.join(root, target);
const current = fs.readFileSync(file, 'utf8');
let next = current;
for (const [name, render] of Object.entries(sections)) {
  const pattern = new RegExp(`(<!-- generated:${name} -->\\n)[\\s\\S]*?(<!-- /generated:${name} -->)`);
  if (!pattern.test(next)) throw new Error(`${target} has no <!-- generated:${name} --> section`);
  next = next.replace(pattern, (_, open: string, close: string) => `${open}\n${render()}\n\n${close}`);
}
next = await format(next, { ...(await resolveConfig(file)), filepath: file });

if (check) {
  if (next !== current) {
    console.error(`${target} is stale: run npm run gen:contract`);
    process.exitCode = 1;
  }
} else if (next !== current) {
  fs.writeFileSync(file, next);
  console.log(`wrote ${target}`);
}
