// The registry wire format: magic byte 0, the schema id (4 bytes, big-endian), the JSON text.
import { describe, expect, it } from 'vitest';
import { Utf8Scratch, WireWriter, decodeWire, encodeWire } from './registry.js';

describe('wire format', () => {
  it('round-trips text of any width and writes the header the Confluent way', () => {
    const json = JSON.stringify({ prompt: 'héllo — 東京 🚀', n: 1 });
    const wire = encodeWire(258, json);
    expect([...wire.subarray(0, 5)]).toEqual([0, 0, 0, 1, 2]);
    expect(wire.length).toBe(5 + Buffer.byteLength(json));
    expect(decodeWire(wire)).toEqual({ ok: true, schemaId: 258, json });
  });

  it('writes many messages into views of shared slabs, each the same bytes as encodeWire', () => {
    const jsons = ['{}', JSON.stringify({ prompt: 'héllo — 東京 🚀' }), '', JSON.stringify({ text: 'x'.repeat(5000) }), '"\u0000"'];
    const writer = new WireWriter();
    const wires = jsons.map((json) => writer.write(70_000, json));
    wires.forEach((wire, index) => {
      expect(wire.equals(encodeWire(70_000, jsons[index]!))).toBe(true);
      expect(decodeWire(wire)).toEqual({ ok: true, schemaId: 70_000, json: jsons[index] });
      expect(wire.buffer).toBe(wires[0]!.buffer);
    });
  });

  it('starts a new slab when a message does not fit, unless it is past a quarter of a slab: that one gets a buffer of its own', () => {
    const writer = new WireWriter(64);
    const small = writer.write(1, 'x'.repeat(11)); // 16 bytes
    const fits = writer.write(1, 'y'.repeat(11));
    const large = writer.write(1, 'z'.repeat(35)); // 40 bytes: past the 32 left, and past a quarter of a slab
    const third = writer.write(1, 'w'.repeat(11));
    const fourth = writer.write(1, 'v'.repeat(11));
    const next = writer.write(1, 'u'.repeat(11)); // the slab's 64 bytes are taken
    expect(fits.buffer).toBe(small.buffer);
    expect(large.buffer).not.toBe(small.buffer);
    expect(fourth.buffer).toBe(small.buffer);
    expect(next.buffer).not.toBe(small.buffer);
    for (const [wire, json] of [
      [small, 'x'.repeat(11)],
      [fits, 'y'.repeat(11)],
      [large, 'z'.repeat(35)],
      [third, 'w'.repeat(11)],
      [fourth, 'v'.repeat(11)],
      [next, 'u'.repeat(11)],
    ] as const) {
      expect(decodeWire(wire)).toEqual({ ok: true, schemaId: 1, json });
    }
  });

  it('writes a message given in pieces as the text they make together', () => {
    const pieces = [
      ['{"meta":', JSON.stringify({ key: 'k—東' }), ',"record":', JSON.stringify({ p: '🚀'.repeat(3000) }), '}'],
      '{}',
      ['', '[]'],
    ];
    const writer = new WireWriter();
    const wires = pieces.map((piece) => writer.write(9, piece));
    wires.forEach((wire, index) => {
      const piece = pieces[index]!;
      const json = typeof piece === 'string' ? piece : piece.join('');
      expect(wire.equals(encodeWire(9, json))).toBe(true);
    });
    expect(wires[2]!.buffer).toBe(wires[0]!.buffer);
  });

  it('copies a piece given in UTF-8 as it is, beside pieces given as strings', () => {
    const record = JSON.stringify({ p: 'héllo — 東京 🚀'.repeat(50) });
    const writer = new WireWriter();
    const wire = writer.write(9, ['{"meta":{},"record":', Buffer.from(record, 'utf8'), '}']);
    expect(wire.equals(encodeWire(9, `{"meta":{},"record":${record}}`))).toBe(true);
    const alone = new WireWriter(64).write(9, [new Uint8Array(Buffer.from(record, 'utf8'))]); // past a quarter of its slab: a buffer of its own
    expect(alone.equals(encodeWire(9, record))).toBe(true);
  });
});

describe('Utf8Scratch', () => {
  it('encodes any text as Buffer.from does, growing to its bound and giving a longer text a buffer of its own', () => {
    const scratch = new Utf8Scratch(8, 1024);
    const texts = [
      '',
      'ascii',
      'Latin-1: café',
      'wide: 東京 “quoted” 🚀',
      'lone surrogates: \ud800 \udfff',
      'x'.repeat(300),
      '東'.repeat(341),
      '東'.repeat(342),
      '🚀'.repeat(2000),
    ];
    for (const text of texts) expect(scratch.encode(text).equals(Buffer.from(text, 'utf8'))).toBe(true);
  });

  it('overwrites its last view with the next text, and keeps one buffer for texts within its bound', () => {
    const scratch = new Utf8Scratch(64, 1024);
    const first = scratch.encode('first');
    const second = scratch.encode('SECOND');
    expect(second.buffer).toBe(first.buffer);
    expect(first.toString()).toBe('SECON');
    const beyond = scratch.encode('y'.repeat(400)); // 1,200 bytes of room needed: past its bound
    expect(beyond.buffer).not.toBe(first.buffer);
    expect(scratch.encode('third').buffer).toBe(first.buffer);
  });
});
