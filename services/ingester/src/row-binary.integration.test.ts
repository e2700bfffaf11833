// The ingester's RowBinary rows against ClickHouse's own reading of the same rows as
// JSONEachRow (what the ingester sent before): every column of usage_events and
// usage_io equal, for sample records and for the odd ones (text in several scripts and
// with quotes and newlines, nulls, anomalies, the largest numbers the schema allows).
// test/current-clickhouse.integration.test.ts loads the same rows into a current release.
import { afterAll, describe, expect, it } from 'vitest';
import { createClickHouse, type ClickHouseClient } from '@otm/shared/clickhouse';
import { migrate } from '@otm/shared/migrate';
import { queuedRecords, sampleUsageRecords } from '../../../test/fixtures/sample-records.js';
import { queryRows, testNames, testStack } from '../../../test/helpers/stack.js';
import { enrich } from './enrich-step.js';
import type { EnrichedRecord } from './rows.js';
import { encodeRow, INSERT_EVENTS, INSERT_IO, USAGE_EVENT_COLUMNS, USAGE_IO_COLUMNS } from './encode-step.js';
import { insertEncoded, insertLines } from './load-step.js';
import { PriceTable } from './prices.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

function records(): EnrichedRecord[] {
  const sample = sampleUsageRecords(300, { seed: 5, errorShare: 0.1 });
  const odd = sample.slice(0, 4);
  odd[0]!.user.name = 'Zoë "quoted" \\ back\nslash 名前 🙂';
  odd[0]!.io = { prompt: 'line one\nline two\t"tab" \u0000 nul', response: 'ответ ✓ 🙂'.repeat(50) };
  odd[1]!.tokens = { input: 2 ** 53 - 1, output: 0, total: 2 ** 53 - 1 };
  odd[2]!.context = { 'key "with" quotes': 'value\nnew line', nested: { list: [1, 2, 3] } };
  odd[3]!.error = { code: 'é_code', message: '' };
  odd[3]!.request.status = 'error';
  const prices = PriceTable.load();
  // No plausible bounds: the encoding of the largest integers the schema allows is what is tested here.
  const unbounded = { maxTokens: Number.MAX_SAFE_INTEGER, maxCallMs: Number.MAX_SAFE_INTEGER, maxOutputTokensPerSec: Infinity };
  const enriched = queuedRecords(sample, { eventKey: (index) => `rb-${index}` }).map((record) =>
    enrich(record, prices, Date.now(), null, unbounded),
  );
  enriched[5]!.event.anomalies = ['timing.startTime:unreadable', 'io.prompt:not_well_formed'];
  enriched[6]!.event.output_tokens_per_sec = 1 / 3;
  return enriched;
}

async function database(label: string): Promise<ClickHouseClient> {
  const stack = testStack();
  const name = testNames(`rowbin-${label}`).database;
  const settings = { url: stack.CLICKHOUSE_URL, username: 'default', password: '' };
  const server = createClickHouse({ ...settings, database: '' }, { database: null });
  const client = createClickHouse({ ...settings, database: name });
  cleanups.push(
    () => server.close(),
    () => client.close(),
    () => server.command({ query: `DROP DATABASE IF EXISTS ${name}` }),
  );
  await migrate(server, client, name);
  return client;
}

const everyColumn = async (client: ClickHouseClient, table: string, columns: readonly string[]) =>
  queryRows<Record<string, unknown>>(client, `SELECT ${columns.join(', ')} FROM ${table} ORDER BY event_key`);

describe('rows in RowBinary', () => {
  it('are stored as ClickHouse stores the same rows sent as JSONEachRow, every column', async () => {
    const rows = records();
    const [binary, text] = await Promise.all([database('bin'), database('json')]);
    const encoded = rows.map(encodeRow);
    await insertEncoded(
      binary,
      INSERT_EVENTS,
      encoded.map((row) => row.event),
    );
    await insertEncoded(
      binary,
      INSERT_IO,
      encoded.flatMap((row) => (row.io ? [row.io] : [])),
    );
    await insertLines(
      text,
      'usage_events',
      rows.map((row) => JSON.stringify(row.event)),
    );
    await insertLines(
      text,
      'usage_io',
      rows.flatMap((row) => (row.io ? [JSON.stringify(row.io)] : [])),
    );
    const eventColumns = Object.keys(USAGE_EVENT_COLUMNS);
    const ioColumns = Object.keys(USAGE_IO_COLUMNS);
    const [binaryEvents, textEvents, binaryIo, textIo] = await Promise.all([
      everyColumn(binary, 'usage_events', eventColumns),
      everyColumn(text, 'usage_events', eventColumns),
      everyColumn(binary, 'usage_io', ioColumns),
      everyColumn(text, 'usage_io', ioColumns),
    ]);
    expect(binaryEvents).toHaveLength(300);
    expect(binaryIo.length).toBeGreaterThan(10);
    // Floats: the binary rows hold the ingester's doubles exactly; 18.16 reads a float's
    // text to within a unit in the last place (46.644455021418366 became …837).
    const floats = ['output_tokens_per_sec', 'cost_usd'];
    const withoutFloats = (rows: Record<string, unknown>[]) =>
      rows.map((row) => Object.fromEntries(Object.entries(row).filter(([column]) => !floats.includes(column))));
    expect(withoutFloats(binaryEvents)).toEqual(withoutFloats(textEvents));
    binaryEvents.forEach((row, index) => {
      const sent = rows.find((record) => record.event.event_key === row.event_key)!.event;
      for (const column of floats) {
        expect(row[column], `${String(row.event_key)} ${column}`).toBe(sent[column as 'cost_usd']);
        if (row[column] !== null) expect(textEvents[index]![column] as number).toBeCloseTo(row[column] as number, 12);
      }
    });
    expect(binaryIo).toEqual(textIo);
    // The odd values came back as they were sent.
    const first = binaryEvents.find((row) => row.event_key === 'rb-0')!;
    expect(first.user_name).toBe('Zoë "quoted" \\ back\nslash 名前 🙂');
    expect(binaryIo.find((row) => row.event_key === 'rb-0')!.response).toBe('ответ ✓ 🙂'.repeat(50));
    expect(String(binaryEvents.find((row) => row.event_key === 'rb-1')!.input_tokens)).toBe(String(2 ** 53 - 1));
    expect(binaryEvents.find((row) => row.event_key === 'rb-5')!.anomalies).toEqual([
      'timing.startTime:unreadable',
      'io.prompt:not_well_formed',
    ]);
  });
});
