// The registry wire format: magic byte 0, the schema id (4 bytes, big-endian), the JSON text.
import { describe, expect, it } from 'vitest';
import { decodeWire, encodeWire, encodeWireAll } from './registry.js';

describe('wire format', () => {
  it('round-trips text of any width and writes the header the Confluent way', () => {
    const json = JSON.stringify({ prompt: 'héllo — 東京 🚀', n: 1 });
    const wire = encodeWire(258, json);
    expect([...wire.subarray(0, 5)]).toEqual([0, 0, 0, 1, 2]);
    expect(wire.length).toBe(5 + Buffer.byteLength(json));
    expect(decodeWire(wire)).toEqual({ ok: true, schemaId: 258, json });
  });

  it('encodes many messages into views of one buffer, each the same bytes as encodeWire', () => {
    const jsons = ['{}', JSON.stringify({ prompt: 'héllo — 東京 🚀' }), '', JSON.stringify({ text: 'x'.repeat(5000) }), '"\u0000"'];
    const wires = encodeWireAll(70_000, jsons);
    expect(wires).toHaveLength(jsons.length);
    wires.forEach((wire, index) => {
      expect(wire.equals(encodeWire(70_000, jsons[index]!))).toBe(true);
      expect(decodeWire(wire)).toEqual({ ok: true, schemaId: 70_000, json: jsons[index] });
      expect(wire.buffer).toBe(wires[0]!.buffer);
    });
    expect(encodeWireAll(1, [])).toEqual([]);
  });

  it('writes a message given in pieces as the text they make together', () => {
    const pieces = [
      ['{"meta":', JSON.stringify({ key: 'k—東' }), ',"record":', JSON.stringify({ p: '🚀'.repeat(3000) }), '}'],
      '{}',
      ['', '[]'],
    ];
    const wires = encodeWireAll(9, pieces);
    wires.forEach((wire, index) => {
      const piece = pieces[index]!;
      const json = typeof piece === 'string' ? piece : piece.join('');
      expect(wire.equals(encodeWire(9, json))).toBe(true);
    });
    expect(wires[2]!.buffer).toBe(wires[0]!.buffer);
  });
});
