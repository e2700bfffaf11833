// A batch body read with its cost bounded before any item is parsed: the items (NDJSON
// lines, or the elements of a JSON array) are counted on the inflated bytes as they
// arrive, and the request is refused at the item limit or the byte limit without
// reading further. Only then is the body split, and each item parsed as the intake
// reaches it (a JSON array's items, an NDJSON batch's lines); an NDJSON batch whose
// unreadable lines pass a limit is refused whole rather than answered line by line.
// Each item is decoded and parsed from its own bytes: a batch never becomes one string
// of its whole text (megabytes, which V8 allocates straight into its old generation, so
// every batch left its size there for the next full collection).
import type { Readable } from 'node:stream';
import { ServiceError, refuse } from '@otm/shared/errors';
import { parseJsonText } from '@otm/shared/http-edge';

export interface BatchBodyLimits {
  maxRecords: number;
  maxBytes: number;
  /** NDJSON lines that are not JSON, at most, before the whole batch is refused (400). */
  maxUnreadableLines: number;
}

/** An NDJSON line that is not a JSON text: its item is refused, the others go on. */
export class UnreadableLine {
  constructor(readonly error: ServiceError) {}
}

const NEWLINE = 0x0a;
/** Bytes that leave a line blank: space, tab, carriage return, vertical tab, form feed. */
const BLANK = new Uint8Array(256);
for (const byte of [0x20, 0x09, 0x0d, 0x0b, 0x0c]) BLANK[byte] = 1;

/** Counts the non-blank lines of NDJSON, chunk by chunk. */
export class NdjsonItemCounter {
  items = 0;
  private lineHasText = false;

  add(chunk: Uint8Array): void {
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i]!;
      if (byte === NEWLINE) {
        this.lineHasText = false;
      } else if (!this.lineHasText && BLANK[byte] === 0) {
        this.lineHasText = true;
        this.items++;
      }
    }
  }
}

/** JSON's own whitespace: space, tab, line feed, carriage return. */
const JSON_SPACE = new Uint8Array(256);
for (const byte of [0x20, 0x09, 0x0a, 0x0d]) JSON_SPACE[byte] = 1;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/**
 * Counts the elements of a top-level JSON array, chunk by chunk, without parsing them: a
 * small state machine over strings, escapes and nesting depth (UTF-8 continuation bytes
 * are never ASCII, so bytes are enough). A body that is not an array counts nothing: the
 * parser refuses it afterwards.
 */
export class JsonArrayItemCounter {
  items = 0;
  private depth = 0;
  private inString = false;
  private escaped = false;
  private expectingItem = false;
  private started = false;
  /** Bytes read before the current chunk. */
  private offset = 0;
  /** Where the array's own brackets and commas are (byte offsets), for itemRanges. */
  private readonly delimiters: number[] = [];
  /** Something other than JSON whitespace before the array or after its end, or an empty item. */
  private outside = false;
  private closed = false;

  add(chunk: Uint8Array): void {
    const offset = this.offset;
    this.offset += chunk.length;
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i]!;
      if (this.closed) {
        if (JSON_SPACE[byte] === 0) this.outside = true;
        continue;
      }
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false;
          continue;
        }
        // Most of a body is the text of strings (prompts and responses): jump to the next
        // quote instead of reading each byte. An odd run of backslashes just before it
        // (within this string's bytes read here: none of them escaped, as this byte is
        // not) escapes it; at the chunk's end, an odd run escapes the next chunk's first byte.
        const quote = chunk.indexOf(QUOTE, i);
        const end = quote === -1 ? chunk.length : quote;
        let backslashes = 0;
        while (end - backslashes - 1 >= i && chunk[end - backslashes - 1] === BACKSLASH) backslashes++;
        if (quote === -1) {
          this.escaped = backslashes % 2 === 1;
          return;
        }
        if (backslashes % 2 === 0) this.inString = false;
        i = quote;
        continue;
      }
      if (BLANK[byte] === 1 || byte === NEWLINE) {
        if (!this.started && JSON_SPACE[byte] === 0) this.outside = true;
        continue;
      }
      if (!this.started) {
        this.started = true;
        if (byte !== OPEN_ARRAY) {
          this.depth = -1; // not an array: count nothing
          return;
        }
        this.depth = 1;
        this.expectingItem = true;
        this.delimiters.push(offset + i);
        continue;
      }
      if (this.depth < 0) return;
      if (this.depth === 1) {
        if (byte === COMMA) {
          // A comma where an item was due leaves an empty item: not an array of items
          // (the parser refuses it), and no more delimiters are kept (they stay as few
          // as the items, however many commas a body holds).
          if (this.expectingItem) this.outside = true;
          else this.delimiters.push(offset + i);
          this.expectingItem = true;
          continue;
        }
        if (byte !== CLOSE_ARRAY && this.expectingItem) {
          this.items++;
          this.expectingItem = false;
        }
      }
      if (byte === QUOTE) this.inString = true;
      else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) this.depth++;
      else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) {
        if (--this.depth === 0) {
          this.closed = true;
          this.delimiters.push(offset + i);
        }
      }
    }
  }

  /**
   * The byte range of each item, when the body read so far is one array and nothing
   * else (JSON whitespace around it); undefined otherwise. Each range is what lies
   * between two of the array's delimiters: whether it holds one JSON text is for the
   * parser to say.
   */
  itemRanges(): [number, number][] | undefined {
    if (!this.closed || this.outside) return undefined;
    const ranges: [number, number][] = [];
    for (let i = 1; i < this.delimiters.length; i++) ranges.push([this.delimiters[i - 1]! + 1, this.delimiters[i]!]);
    return ranges;
  }
}

/**
 * Reads an inflated body, counting its items with `counter`: resolves with its bytes,
 * or rejects with 413 at the first byte past `maxBytes` or the first item past
 * `maxRecords` (the rest is never inflated or read here; the edge throws it away,
 * bounded).
 */
export function readCountedBody(
  payload: Readable,
  counter: JsonArrayItemCounter | NdjsonItemCounter,
  limits: BatchBodyLimits,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    const stop = (error: Error) => {
      payload.removeListener('data', onData);
      payload.removeListener('end', onEnd);
      payload.removeListener('error', onError);
      chunks.length = 0;
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > limits.maxBytes) return stop(refuse('bodyTooLarge'));
      counter.add(chunk);
      if (counter.items > limits.maxRecords) {
        return stop(refuse('batchTooManyRecords', { max: limits.maxRecords, count: 'more' }));
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      payload.removeListener('data', onData);
      payload.removeListener('error', onError);
      resolve(Buffer.concat(chunks, bytes));
    };
    // A body that claims gzip but is not: the edge turns the decompress error into its 400.
    const onError = (error: Error) => stop(error);
    payload.on('data', onData);
    payload.once('end', onEnd);
    payload.once('error', onError);
    // The decompressing stream arrives paused (explicitly): a 'data' listener alone does not start it.
    payload.resume();
  });
}

/**
 * The items of a clean JSON array body, each parsed from its own bytes only when the
 * intake reaches it: a batch's parsed records are never all alive at once, each lives
 * from its parse to its check, so V8's young collections copy a record or two instead
 * of every record of every batch in flight. An item that does not parse refuses the
 * whole body, exactly as a body that is not one JSON text always was (its whole text is
 * parsed once more for that refusal); the intake queues nothing before every item is
 * read, so such a body leaves nothing queued.
 */
export class DeferredItems {
  constructor(
    private readonly body: Buffer,
    private readonly ranges: readonly [number, number][],
    private readonly jsonMaxDepth: number,
  ) {}

  get length(): number {
    return this.ranges.length;
  }

  /** The item at `index`, parsed; throws the whole body's refusal when it does not parse. */
  parse(index: number): unknown {
    const [start, end] = this.ranges[index]!;
    try {
      return parseJsonText(this.body.toString('utf8', start, end), this.jsonMaxDepth);
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      parseJsonText(this.body.toString('utf8'), this.jsonMaxDepth + 1);
      throw error; // not reached: an item that does not parse leaves the whole text unparsable
    }
  }
}

/**
 * A JSON array body (read by readCountedBody with `counter`), as parseJsonText would
 * parse its whole text with one level more for the array: a clean array's items
 * deferred (DeferredItems), each parsed from its own bytes when it is reached;
 * otherwise the whole text, parsed at once, so a body that is not one array gets
 * exactly the refusal it always got.
 */
export function parseJsonArrayBody(body: Buffer, counter: JsonArrayItemCounter, jsonMaxDepth: number): unknown {
  const ranges = counter.itemRanges();
  if (ranges) {
    if (ranges.length === 1 && isJsonSpace(body, ranges[0]![0], ranges[0]![1])) return [];
    return new DeferredItems(body, ranges, jsonMaxDepth);
  }
  return parseJsonText(body.toString('utf8'), jsonMaxDepth + 1);
}

function isJsonSpace(body: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (JSON_SPACE[body[i]!] === 0) return false;
  return true;
}

/**
 * The items of an NDJSON batch: its non-blank lines (at most `maxRecords`, counted on
 * reading), each parsed from its own bytes only when the intake reaches it, as a JSON
 * array's items are (DeferredItems): a batch's parsed records are never all alive at
 * once. A line that is not a JSON text is its own item's refusal (UnreadableLine); the
 * unreadable line past `maxUnreadableLines` refuses the whole batch, thrown out of the
 * intake, which queues nothing before every item is read.
 */
export class DeferredLines {
  /** The lines found unreadable so far (each counted once, however often it is parsed). */
  private readonly unreadable = new Set<number>();

  constructor(
    private readonly body: Buffer,
    private readonly ranges: readonly [number, number][],
    private readonly jsonMaxDepth: number,
    private readonly maxUnreadableLines: number,
  ) {}

  get length(): number {
    return this.ranges.length;
  }

  /** The line at `index` (among the non-blank ones), parsed, or an UnreadableLine; throws the whole batch's refusal past the limit. */
  parse(index: number): unknown {
    const [start, end] = this.ranges[index]!;
    try {
      return parseJsonText(this.body.toString('utf8', start, end), this.jsonMaxDepth, 'This line');
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      this.unreadable.add(index);
      if (this.unreadable.size > this.maxUnreadableLines) {
        throw refuse(
          'batchUnreadableLines',
          { max: this.maxUnreadableLines },
          {
            errors: [{ path: '/', message: `must hold at most ${this.maxUnreadableLines} unreadable lines` }],
          },
        );
      }
      return new UnreadableLine(error);
    }
  }
}

/** A batch body whose items are parsed one by one as the intake reaches them. */
export type DeferredBatch = DeferredItems | DeferredLines;

/** Whether a parsed batch body is one whose items wait to be parsed (DeferredItems, DeferredLines). */
export function isDeferredBatch(value: unknown): value is DeferredBatch {
  return value instanceof DeferredItems || value instanceof DeferredLines;
}

/** The items of an NDJSON batch: its non-blank lines, found in its bytes, parsed later (DeferredLines). */
export function parseNdjson(body: Buffer, jsonMaxDepth: number, maxUnreadableLines: number): DeferredLines {
  const ranges: [number, number][] = [];
  for (let start = 0; start <= body.length;) {
    const newline = body.indexOf(NEWLINE, start);
    const end = newline === -1 ? body.length : newline;
    if (!isBlankLine(body, start, end)) ranges.push([start, end]);
    start = end + 1;
  }
  return new DeferredLines(body, ranges, jsonMaxDepth, maxUnreadableLines);
}

/**
 * Whether a line holds only whitespace, as String.prototype.trim sees it: a byte of ASCII
 * text says no at once (a record's first byte); a line of ASCII blanks says yes; one with
 * bytes past ASCII among its blanks is decoded and trimmed (a no-break space is blank there).
 */
function isBlankLine(body: Buffer, start: number, end: number): boolean {
  let beyondAscii = false;
  for (let i = start; i < end; i++) {
    const byte = body[i]!;
    if (byte >= 0x80) beyondAscii = true;
    else if (BLANK[byte] === 0) return false;
  }
  return !beyondAscii || body.toString('utf8', start, end).trim() === '';
}
