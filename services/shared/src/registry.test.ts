// The registry wire format: magic byte 0, the schema id (4 bytes, big-endian), the JSON text.
import { describe, expect, it } from 'vitest';
import { decodeWire, encodeWire } from './registry.js';

describe('wire format', () => {
  it('round-trips text of any width and writes the header the Confluent way', () => {
    const json = JSON.stringify({ prompt: 'héllo — 東京 🚀', n: 1 });
    const wire = encodeWire(258, json);
    expect([...wire.subarray(0, 5)]).toEqual([0, 0, 0, 1, 2]);
    expect(wire.length).toBe(5 + Buffer.byteLength(json));
    expect(decodeWire(wire)).toEqual({ ok: true, schemaId: 258, json });
  });
});
