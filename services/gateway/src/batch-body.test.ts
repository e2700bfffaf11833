// The batch body parsed item by item from its bytes (batch-body.ts) answers exactly as
// the whole text parsed at once: the same items, or the same refusal; whatever the
// chunks the body arrived in.
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ServiceError } from '@otm/shared/errors';
import { parseJsonText } from '@otm/shared/http-edge';
import {
  DeferredItems,
  JsonArrayItemCounter,
  NdjsonItemCounter,
  parseJsonArrayBody,
  parseNdjson,
  readCountedBody,
  UnreadableLine,
} from './batch-body.js';

const limits = { maxRecords: 1000, maxBytes: 1 << 20, maxUnreadableLines: 2 };
const depth = 8;

/** What parsing the whole text gave (the batch route's parse before): a value or the refusal's body. */
function whole(text: string): unknown {
  try {
    return { value: parseJsonText(text, depth + 1) };
  } catch (error) {
    return { refused: (error as ServiceError).toBody() };
  }
}

async function itemByItem(text: string, chunkBytes: number): Promise<unknown> {
  const bytes = Buffer.from(text, 'utf8');
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += chunkBytes) chunks.push(bytes.subarray(at, at + chunkBytes));
  const counter = new JsonArrayItemCounter();
  const body = await readCountedBody(Readable.from(chunks), counter, limits);
  try {
    return { value: everyItem(parseJsonArrayBody(body, counter, depth)) };
  } catch (error) {
    return { refused: (error as ServiceError).toBody() };
  }
}

/** A parsed body with its deferred items parsed, in order, as the intake reaches them. */
function everyItem(parsed: unknown): unknown {
  return parsed instanceof DeferredItems ? Array.from({ length: parsed.length }, (_, index) => parsed.parse(index)) : parsed;
}

const record = { model: 'gpt-5', prompt: 'a "quoted" [bracket], {brace} \\ and — 東京 🚀', n: [1, 2, { x: null }] };
const bodies = [
  JSON.stringify([record, record]),
  ` \n\t[ ${JSON.stringify(record)} ,\r\n ${JSON.stringify({ a: ']' })} ] \n`,
  '[]',
  '[ \n ]',
  '[1]',
  '["]", "[", "\\"", "\\\\"]',
  // Runs of backslashes before quotes, odd and even, in every position a chunk can cut them.
  JSON.stringify(['a\\', '\\"', '\\\\"x', 'q"', '\\\\\\', '"', '\\', ']', '\\"]"', ',\\\\', 'end']),
  JSON.stringify([{ k: 'v\\' }, { 'k\\"': ['\\\\', '"\\"'] }, 'x'.repeat(300) + '\\"' + 'y'.repeat(300)]),
  '[[1,2],[3,[4]]]',
  '[1,]',
  '[,1]',
  '[1,,2]',
  '[,]',
  '[1,2,]',
  '[1 2]',
  '[1]x',
  '[1] [2]',
  '[1',
  '',
  '   ',
  '{"a":1}',
  '\uFEFF[1]',
  '[1,\u000b2]',
  '\u000c[1]',
  '[1]\u000b',
  '[{"__proto__":{"x":1}}]',
  '[{"constructor":{"prototype":{"x":1}}}]',
  `[${'['.repeat(8)}${']'.repeat(8)}]`,
  `[${'['.repeat(9)}${']'.repeat(9)}]`,
  `[1, ${'['.repeat(20)}]`,
  '["\u00e9\u00e8", "\ud83d\ude80"]',
  '[nul]',
  '["unterminated]',
  '[1]]',
];

describe('a JSON array batch parsed item by item', () => {
  it('gives what parsing the whole text gave, for every chunking', async () => {
    for (const text of bodies) {
      const expected = whole(text);
      for (const chunkBytes of [1, 2, 3, 7, 64, 1 << 20])
        expect(await itemByItem(text, chunkBytes), `${JSON.stringify(text)} in chunks of ${chunkBytes}`).toEqual(expected);
    }
  });

  it('counts the items and finds the bytes of each, for every chunking (not only through the fallback to the whole text)', () => {
    for (const text of bodies) {
      const parsed = whole(text) as { value?: unknown };
      // (A byte order mark is not JSON space: the counter leaves such a body to the whole-text parse.)
      if (!Array.isArray(parsed.value) || text.startsWith('\uFEFF')) continue;
      const bytes = Buffer.from(text, 'utf8');
      for (const chunkBytes of [1, 2, 3, 7, 64, 1 << 20]) {
        const counter = new JsonArrayItemCounter();
        for (let at = 0; at < bytes.length; at += chunkBytes) counter.add(bytes.subarray(at, at + chunkBytes));
        const where = `${JSON.stringify(text)} in chunks of ${chunkBytes}`;
        expect(counter.items, where).toBe(parsed.value.length);
        if (parsed.value.length === 0) continue;
        const items = counter.itemRanges()?.map(([start, end]) => JSON.parse(bytes.toString('utf8', start, end)) as unknown);
        expect(items, where).toEqual(parsed.value);
      }
    }
  });

  it('gives a bad UTF-8 sequence the same replacement characters', async () => {
    const bytes = Buffer.concat([
      Buffer.from('["a'),
      Buffer.from([0xe2, 0x82]),
      Buffer.from('", "'),
      Buffer.from([0xff]),
      Buffer.from('b"]'),
    ]);
    const counter = new JsonArrayItemCounter();
    const body = await readCountedBody(Readable.from([bytes]), counter, limits);
    expect(everyItem(parseJsonArrayBody(body, counter, depth))).toEqual(parseJsonText(bytes.toString('utf8'), depth + 1));
  });

  it('parses a clean array item by item when each is reached, and refuses it whole at the first item that does not parse', async () => {
    const counter = new JsonArrayItemCounter();
    const text = '[{"a":1}, {"b":}, {"c":3}]';
    const body = await readCountedBody(Readable.from([Buffer.from(text)]), counter, limits);
    const parsed = parseJsonArrayBody(body, counter, depth);
    expect(parsed).toBeInstanceOf(DeferredItems);
    const items = parsed as DeferredItems;
    expect(items.length).toBe(3);
    expect(items.parse(0)).toEqual({ a: 1 });
    expect(items.parse(2)).toEqual({ c: 3 });
    let refusal: unknown;
    try {
      items.parse(1);
    } catch (error) {
      refusal = (error as ServiceError).toBody();
    }
    expect(refusal).toBeDefined();
    expect(whole(text)).toEqual({ refused: refusal });
  });

  it('keeps no delimiter past an empty item, however many commas follow', () => {
    const counter = new JsonArrayItemCounter();
    counter.add(Buffer.from(`[1,${','.repeat(100_000)}2]`));
    expect(counter.itemRanges()).toBeUndefined();
    expect((counter as unknown as { delimiters: number[] }).delimiters.length).toBeLessThanOrEqual(3);
  });

  it('finds each item in its own bytes', () => {
    const counter = new JsonArrayItemCounter();
    const text = '[ {"a":[1,2]} , "x,y" ,3]';
    counter.add(Buffer.from(text));
    expect(counter.items).toBe(3);
    expect(counter.itemRanges()!.map(([start, end]) => text.slice(start, end))).toEqual([' {"a":[1,2]} ', ' "x,y" ', '3']);
  });
});

describe('an NDJSON batch parsed line by line from its bytes', () => {
  const ndjson = async (text: string) =>
    parseNdjson(
      await readCountedBody(Readable.from([Buffer.from(text)]), new NdjsonItemCounter(), limits),
      depth,
      limits.maxUnreadableLines,
    );

  it('gives what splitting the whole text gave', async () => {
    const text = `${JSON.stringify(record)}\n\n  \r\n{"a":"\u00e9"}\r\nnot json\n[1]`;
    const counter = new NdjsonItemCounter();
    const body = await readCountedBody(Readable.from([Buffer.from(text)]), counter, limits);
    const lines = parseNdjson(body, depth, limits.maxUnreadableLines);
    const items = Array.from({ length: lines.length }, (_, index) => lines.parse(index));
    expect(counter.items).toBe(4);
    expect(items).toHaveLength(4);
    expect(items[0]).toEqual(record);
    expect(items[1]).toEqual({ a: '\u00e9' });
    expect(items[2]).toBeInstanceOf(UnreadableLine);
    expect(items[3]).toEqual([1]);
  });

  it('skips the lines String.prototype.trim leaves empty, a no-break space among them, and keeps any other', async () => {
    const lines = await ndjson(`\u00a0 \t\n\u2028\n\u00a0{"a":1}\n\u00e9\n{"b":2}\r\n\f\n`);
    const items = Array.from({ length: lines.length }, (_, index) => lines.parse(index));
    expect(items).toHaveLength(3);
    expect(items[0]).toBeInstanceOf(UnreadableLine);
    expect(items[1]).toBeInstanceOf(UnreadableLine);
    expect(items[2]).toEqual({ b: 2 });
  });

  it('parses a line only when it is reached: the unreadable line past the limit refuses the batch there', async () => {
    const lines = await ndjson(`${JSON.stringify(record)}\nnot json\n{\n[\n{"c":3}`);
    expect(lines.length).toBe(5);
    expect(lines.parse(0)).toEqual(record);
    expect(lines.parse(1)).toBeInstanceOf(UnreadableLine);
    expect(lines.parse(1)).toBeInstanceOf(UnreadableLine); // counted once
    expect(lines.parse(2)).toBeInstanceOf(UnreadableLine);
    let refusal: unknown;
    try {
      lines.parse(3);
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(ServiceError);
    expect((refusal as ServiceError).toBody()).toMatchObject({
      errorType: 'ValidationError',
      message: 'More than 2 lines of the batch are not JSON; no record was accepted.',
    });
  });
});
