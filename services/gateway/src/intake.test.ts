// The one intake (intake.ts) on in-memory seams: one result per item, in order; one
// record per event key inside a request; the replay memory answered from; a refusal a
// route made while decoding passed through; a queue that does not take a record.
import { describe, expect, it } from 'vitest';
import { hash } from 'node:crypto';
import fs from 'node:fs';
import { buildQueuedRecordSchema, compileValidators, DEFAULT_RECORD_BOUNDS } from '@otm/schemas';
import { ServiceError } from '@otm/shared/errors';
import { decodeWire } from '@otm/shared/registry';
import type { IngestKeyRecord } from '@otm/shared/keys/key-store';
import { accept, acceptedUsage, type IntakeItem } from './intake.js';
import { ProduceUnavailableError, promiseQueue, type QueuedMessage } from './produce-batcher.js';
import type { AcceptedReply, IntakeContext } from './record-intake.js';
import { builtInDetectors, Redactor } from './redact.js';

const validators = compileValidators(buildQueuedRecordSchema());
const apiKey: IngestKeyRecord = {
  id: 'key_intake',
  environment: 'qa',
  name: 'intake',
  description: '',
  createdAt: '2026-01-01T00:00:00Z',
  capture: 'full',
  captureInForce: 'full',
};
const fixture = () => JSON.parse(fs.readFileSync(new URL('../../../schemas/fixtures/valid/success.json', import.meta.url), 'utf8'));

function context(replay = new Map<string, AcceptedReply>()): IntakeContext {
  const receivedAt = new Date('2026-11-25T12:00:00.000Z');
  return {
    validators,
    recordBounds: DEFAULT_RECORD_BOUNDS,
    schemaId: 7,
    instanceId: 'test',
    apiKey,
    receivedAt,
    receivedAtIso: receivedAt.toISOString(),
    replay,
    capture: 'full',
    redactor: new Redactor(builtInDetectors('US')),
  };
}

function queue(refuse = false) {
  const messages: QueuedMessage[] = [];
  return {
    messages,
    batcher: promiseQueue(async (message: QueuedMessage) => {
      if (refuse) throw new ProduceUnavailableError('broker gone');
      messages.push(message);
    }),
  };
}

const item = (record: unknown, idempotencyKey: string | undefined, requestId: string): IntakeItem => ({
  record,
  idempotencyKey,
  requestId,
});

describe('accept', () => {
  it('answers every item in order: accepted, refused by the schema, refused while decoding', async () => {
    const { batcher, messages } = queue();
    const decodeRefusal = new ServiceError('ValidationError', 'Invalid idempotencyKey.');
    const results = await accept([item(fixture(), undefined, 'r1'), item({ model: 42 }, undefined, 'r2'), decodeRefusal], context(), {
      batcher,
    });
    expect(results.map((result) => result.kind)).toEqual(['accepted', 'refused', 'refused']);
    expect(results[0]).toMatchObject({ requestId: 'r1', timestamp: '2026-11-25T12:00:00.000Z', replay: false });
    expect(results[1]).toMatchObject({ kind: 'refused', error: { errorType: 'ValidationError', statusCode: 400 } });
    expect(results[2]).toEqual({ kind: 'refused', error: decodeRefusal });
    // Only the valid record was queued, keyed by its request id (it has no idempotency key).
    expect(messages.map((message) => message.key)).toEqual(['r1']);
    expect(acceptedUsage(results).totalTokens).toBeGreaterThan(0);
  });

  it('the same record twice under one key is one record; another record under that key is refused', async () => {
    const { batcher, messages } = queue();
    const other = { ...fixture(), request: { ...fixture().request, modelId: 'another-model' } };
    const results = await accept([item(fixture(), 'k1', 'a'), item(fixture(), 'k1', 'b'), item(other, 'k1', 'c')], context(), { batcher });
    expect(results[0]).toMatchObject({ kind: 'accepted', requestId: 'a' });
    expect(results[1]).toEqual(results[0]);
    expect(results[2]).toMatchObject({ kind: 'refused', error: { errorType: 'IdempotencyKeyReused', statusCode: 422 } });
    expect(messages.map((message) => message.key)).toEqual(['key_intake:k1']);
  });

  it('a record accepted before is answered from the replay memory, not queued again', async () => {
    const replay = new Map<string, AcceptedReply>();
    const first = queue();
    const [accepted] = await accept([item(fixture(), 'k2', 'first')], context(replay), first);
    expect(replay.get('key_intake:k2')).toMatchObject({ requestId: 'first' });
    const again = queue();
    let replays = 0;
    const [replayed] = await accept([item(fixture(), 'k2', 'second')], context(replay), { ...again, onReplay: () => replays++ });
    expect(replayed).toMatchObject({
      kind: 'accepted',
      requestId: 'first',
      timestamp: (accepted as { timestamp: string }).timestamp,
      replay: true,
    });
    expect(again.messages).toEqual([]);
    expect(replays).toBe(1);
    // A different record under the known key: refused, nothing queued.
    const [reused] = await accept(
      [item({ ...fixture(), user: { ...fixture().user, id: 'someone-else' } }, 'k2', 'third')],
      context(replay),
      again,
    );
    expect(reused).toMatchObject({ kind: 'refused', error: { errorType: 'IdempotencyKeyReused' } });
    expect(again.messages).toEqual([]);
  });

  it("writes each record's text whole into its message whatever its characters, and remembers the digest of the record as sent", async () => {
    // Each record's text is encoded once into a scratch the next record overwrites
    // (record-intake.ts): every message must still hold its own record, byte for byte.
    const texts = ['plain ASCII', 'Latin-1: café, naïve', 'wide: héllo — 東京 🚀 “quoted”', '東'.repeat(100_000), '🚀'.repeat(3), ''];
    const records = texts.map((prompt) => ({ ...fixture(), io: { prompt, response: `re: ${prompt.slice(0, 40)}` } }));
    const replay = new Map<string, AcceptedReply>();
    const { batcher, messages } = queue();
    const items = records.map((record, index) => item(structuredClone(record), index % 2 === 0 ? `wide-${index}` : undefined, `w${index}`));
    const results = await accept(items, context(replay), { batcher });
    expect(results.map((result) => result.kind)).toEqual(texts.map(() => 'accepted'));
    expect(messages).toHaveLength(records.length);
    messages.forEach((message, index) => {
      const decoded = decodeWire(message.value);
      expect(decoded.ok).toBe(true);
      const json = (decoded as { json: string }).json;
      // The record's text as JSON.stringify writes it, after the meta, byte for byte.
      expect(json.endsWith(`,"record":${JSON.stringify(records[index])}}`)).toBe(true);
      expect(JSON.parse(json).record).toEqual(records[index]);
    });
    // The digest is SHA-256 of the record's JSON text in UTF-8, as before the text was encoded once.
    records.forEach((record, index) => {
      if (index % 2 === 0) expect(replay.get(`key_intake:wide-${index}`)?.digest).toBe(hash('sha256', JSON.stringify(record), 'base64url'));
    });
  });

  it('lets go of the parsed records before it waits for the queue', async () => {
    const items = [item(fixture(), 'k4', 'p'), item(fixture(), undefined, 'q')];
    let heldWhileQueued: unknown[] = [];
    const batcher = promiseQueue(async () => {
      heldWhileQueued = items.map((each) => each.record);
    });
    const results = await accept(items, context(), { batcher });
    expect(results.map((result) => result.kind)).toEqual(['accepted', 'accepted']);
    expect(heldWhileQueued).toEqual([undefined, undefined]);
  });

  it('a record the queue does not take is unavailable, and nothing is remembered for its key', async () => {
    const replay = new Map<string, AcceptedReply>();
    const { batcher } = queue(true);
    const results = await accept([item(fixture(), 'k3', 'x'), item({}, undefined, 'y')], context(replay), { batcher });
    expect(results.map((result) => result.kind)).toEqual(['unavailable', 'refused']);
    expect(results[0]).toMatchObject({ reason: 'broker gone' });
    expect(replay.size).toBe(0);
  });
});
