// The gateway's memory of accepted idempotency keys (the replay check), in fixed-size
// slots: per key a 128-bit fingerprint, the answer's request id (a UUID, 16 bytes), its
// time (8 bytes) and the record's digest (SHA-256, 32 bytes), in typed arrays, and a Map
// from a 48-bit number of the fingerprint to the slot. 100,000 keys take about 13 MB
// where an LRU of strings and objects took about 70 MB of heap (bench/analysis.md).
//
// First in, first out: the oldest key leaves when the memory is full, and a key older
// than the time to live is not answered from it. A miss is never wrong, only slower: the
// record is produced again and the ingester's look-up drops it as a duplicate.
//
// A key's fingerprint is computed once per record: a miss keeps it until the key is set
// (once Kafka acknowledged the record), in a ring of PENDING_PRINTS fingerprints beside a
// Map from the key to its place. The SHA-256 of a short key is a fixed cost of a few
// microseconds, about a third of what the memory took per record. A key that left the
// ring (a record refused by the queue is never set) is only hashed again.
import { hash } from 'node:crypto';
import type { AcceptedReply, ReplayCache } from './record-intake.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** A SHA-256 digest in base64url as hash() writes it: 43 characters, the last one's two low bits zero. */
const DIGEST = /^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;
const FINGERPRINT_BYTES = 16;
/** Fingerprints of missed keys kept for their set(): more than the records a gateway holds at once (its queue, 20,000 by default, and the batches in flight). */
export const PENDING_PRINTS = 32_768;
const ID_BYTES = 16;
const DIGEST_BYTES = 32;

export class ReplayMemory implements ReplayCache {
  private readonly fingerprints: Uint8Array;
  private readonly requestIds: Buffer;
  private readonly digests: Buffer;
  private readonly times: Float64Array;
  /** The Map key each slot was filled under, to drop it when the slot is reused. */
  private readonly slotKeys: Float64Array;
  private readonly slots = new Map<number, number>();
  /** Answers whose values do not have the compact form (not expected from this gateway): kept as they are. */
  private readonly odd = new Map<number, AcceptedReply>();
  /** Keys get() missed, for their set(): each key's place in the ring of fingerprints below. */
  private readonly pending = new Map<string, number>();
  private readonly pendingBytes = new Uint8Array(PENDING_PRINTS * FINGERPRINT_BYTES);
  private readonly pendingMapKeys = new Float64Array(PENDING_PRINTS);
  private readonly pendingKeys: (string | undefined)[] = new Array<string | undefined>(PENDING_PRINTS);
  private pendingNext = 0;
  private next = 0;
  /** The last timestamp set and its time (a request's records share one). */
  private lastTimestamp = '';
  private lastTime = Number.NaN;
  private lastCanonical = false;

  constructor(
    readonly capacity: number,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`replay memory capacity must be a positive integer, got ${capacity}`);
    this.fingerprints = new Uint8Array(capacity * FINGERPRINT_BYTES);
    this.requestIds = Buffer.alloc(capacity * ID_BYTES);
    this.digests = Buffer.alloc(capacity * DIGEST_BYTES);
    this.times = new Float64Array(capacity);
    this.slotKeys = new Float64Array(capacity).fill(-1);
  }

  /** Keys held now. */
  get size(): number {
    return this.slots.size;
  }

  /** Fingerprints held for a set() to come (at most PENDING_PRINTS). */
  get pendingPrints(): number {
    return this.pending.size;
  }

  get(key: string): AcceptedReply | undefined {
    const print = fingerprint(key);
    const slot = this.slots.get(print.mapKey);
    if (slot === undefined || !this.sameFingerprint(slot, print.bytes) || this.now() - this.times[slot]! > this.ttlMs) {
      this.keepPending(key, print);
      return undefined;
    }
    const odd = this.odd.get(slot);
    if (odd) return odd;
    return {
      requestId: uuidText(this.requestIds.toString('hex', slot * ID_BYTES, (slot + 1) * ID_BYTES)),
      timestamp: new Date(this.times[slot]!).toISOString(),
      digest: this.digests.toString('base64url', slot * DIGEST_BYTES, (slot + 1) * DIGEST_BYTES),
    };
  }

  set(key: string, value: AcceptedReply): this {
    const print = this.takePending(key) ?? fingerprint(key);
    const held = this.slots.get(print.mapKey);
    const slot = held !== undefined && this.sameFingerprint(held, print.bytes) ? held : this.take();
    this.odd.delete(slot);
    const old = this.slotKeys[slot]!;
    if (old !== -1 && old !== print.mapKey && this.slots.get(old) === slot) this.slots.delete(old);
    this.slotKeys[slot] = print.mapKey;
    this.slots.set(print.mapKey, slot);
    this.fingerprints.set(print.bytes, slot * FINGERPRINT_BYTES);
    const time = this.timeOf(value.timestamp);
    this.times[slot] = Number.isFinite(time) ? time : this.now();
    // The compact form holds what this gateway gives: a UUID, a timestamp that is its own
    // toISOString(), a SHA-256 in base64url; each is written back exactly from its bytes.
    if (!UUID.test(value.requestId) || !this.lastCanonical || !DIGEST.test(value.digest)) {
      this.odd.set(slot, { ...value });
      return this;
    }
    const id = value.requestId;
    let at = slot * ID_BYTES;
    at += this.requestIds.write(id.slice(0, 8), at, 'hex');
    at += this.requestIds.write(id.slice(9, 13), at, 'hex');
    at += this.requestIds.write(id.slice(14, 18), at, 'hex');
    at += this.requestIds.write(id.slice(19, 23), at, 'hex');
    this.requestIds.write(id.slice(24), at, 'hex');
    this.digests.write(value.digest, slot * DIGEST_BYTES, DIGEST_BYTES, 'base64url');
    return this;
  }

  /** Date.parse of a timestamp, and whether it is its own toISOString() (lastCanonical); the last one is remembered. */
  private timeOf(timestamp: string): number {
    if (timestamp === this.lastTimestamp) return this.lastTime;
    const time = Date.parse(timestamp);
    this.lastTimestamp = timestamp;
    this.lastTime = time;
    this.lastCanonical = Number.isFinite(time) && new Date(time).toISOString() === timestamp;
    return time;
  }

  /** Keeps a missed key's fingerprint in the ring's next place (the oldest one's). */
  private keepPending(key: string, print: Fingerprint): void {
    const at = this.pendingNext;
    this.pendingNext = (at + 1) % PENDING_PRINTS;
    const old = this.pendingKeys[at];
    if (old !== undefined && this.pending.get(old) === at) this.pending.delete(old);
    this.pendingKeys[at] = key;
    this.pending.set(key, at);
    this.pendingBytes.set(print.bytes, at * FINGERPRINT_BYTES);
    this.pendingMapKeys[at] = print.mapKey;
  }

  /** A kept fingerprint of `key`, taken out of the ring; undefined when it is not there. */
  private takePending(key: string): Fingerprint | undefined {
    const at = this.pending.get(key);
    if (at === undefined) return undefined;
    this.pending.delete(key);
    this.pendingKeys[at] = undefined;
    // A view, not a copy: set() copies the bytes into its slot before the ring reuses the place.
    const from = at * FINGERPRINT_BYTES;
    return { bytes: this.pendingBytes.subarray(from, from + FINGERPRINT_BYTES), mapKey: this.pendingMapKeys[at]! };
  }

  /** The next slot in turn (the oldest key's, once the memory is full). */
  private take(): number {
    const slot = this.next;
    this.next = (this.next + 1) % this.capacity;
    return slot;
  }

  private sameFingerprint(slot: number, bytes: Uint8Array): boolean {
    const at = slot * FINGERPRINT_BYTES;
    for (let i = 0; i < FINGERPRINT_BYTES; i++) if (this.fingerprints[at + i] !== bytes[i]) return false;
    return true;
  }
}

interface Fingerprint {
  bytes: Uint8Array;
  mapKey: number;
}

/** 128 bits of the key's SHA-256, and the first 48 of them as a number (the Map's key). */
function fingerprint(key: string): Fingerprint {
  // One-shot: about half the cost of a Hash object for a key of a few dozen bytes.
  const bytes = hash('sha256', key, 'buffer').subarray(0, FINGERPRINT_BYTES);
  return { bytes, mapKey: bytes.readUIntBE(0, 6) };
}

function uuidText(hex: string): string {
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
