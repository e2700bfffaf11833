// eslint-disable-next-line no-restricted-imports -- the sender's own test reads the client's codec table
import {
  compressionsAlgorithms,
  createRecord,
  createRecordsBatch,
  readRecordsBatch,
  Reader,
  type MessageRecord,
} from '@platformatic/kafka';
import snappy from 'snappy';
import { describe, expect, it } from 'vitest';
import { platformaticPartitioner, platformaticSecurity } from './kafka-platformatic.js';
import { keyPartition, murmur2 } from './kafka.js';

describe('platformaticPartitioner', () => {
  it('puts a keyed record where the Java client (and the kafkajs sender) does, once the client takes it modulo the partitions', () => {
    const partition = platformaticPartitioner(murmur2);
    // Keys whose murmur2 is negative among them: the sign bit is cleared before the modulo.
    const keys = Array.from({ length: 500 }, (_, i) => `idem-${i}-${'x'.repeat(i % 7)}`);
    expect(keys.some((key) => murmur2(key) < 0)).toBe(true);
    for (const partitions of [1, 3, 6, 12, 64]) {
      for (const key of keys) {
        const raw = partition(undefined, Buffer.from(key));
        expect(raw).toBeGreaterThanOrEqual(0);
        expect(raw % partitions).toBe(keyPartition(key, partitions));
      }
    }
  });

  it('spreads keyless records in turn', () => {
    const partition = platformaticPartitioner(murmur2);
    const seen = Array.from({ length: 6 }, () => partition(undefined, undefined) % 3);
    expect(new Set(seen).size).toBe(3);
  });
});

describe('platformaticSecurity', () => {
  it('plaintext: neither TLS nor SASL', () => {
    expect(platformaticSecurity({})).toEqual({});
    expect(platformaticSecurity(undefined)).toEqual({});
  });

  it('TLS against the system CAs, or with the given CA and client certificate', () => {
    expect(platformaticSecurity({ ssl: true })).toEqual({ tls: {} });
    const ca = Buffer.from('ca');
    expect(platformaticSecurity({ ssl: { ca: [ca] } })).toEqual({ tls: { ca: [ca] } });
  });

  it('PLAIN and SCRAM keep the user and password', () => {
    expect(platformaticSecurity({ ssl: true, sasl: { mechanism: 'scram-sha-512', username: 'u', password: 'p' } }).sasl).toEqual({
      mechanism: 'SCRAM-SHA-512',
      username: 'u',
      password: 'p',
    });
    expect(platformaticSecurity({ sasl: { mechanism: 'plain', username: 'u', password: 'p' } }).sasl?.mechanism).toBe('PLAIN');
    expect(platformaticSecurity({ sasl: { mechanism: 'scram-sha-256', username: 'u', password: 'p' } }).sasl?.mechanism).toBe(
      'SCRAM-SHA-256',
    );
  });

  it('OAUTHBEARER asks the provider for a fresh token at every authentication', async () => {
    let issued = 0;
    const { sasl } = platformaticSecurity({
      sasl: { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: `token-${++issued}` }) },
    });
    expect(sasl?.mechanism).toBe('OAUTHBEARER');
    const token = sasl?.token as () => Promise<string>;
    expect(await token()).toBe('token-1');
    expect(await token()).toBe('token-2');
  });
});

describe("the client's snappy", () => {
  it('compresses as kafka-codecs does (raw blocks, the same bytes as the native package), and the client and kafka-codecs read it back', async () => {
    const { codecs, snappyBlock } = await import('./kafka-codecs.js');
    const data = Buffer.from(JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ i, model: 'gpt-4o-mini', tokens: i * 7 }))));
    const compressed = compressionsAlgorithms.snappy.compressSync(data);
    expect(compressed.equals(snappyBlock(data))).toBe(true);
    expect(compressed.equals(snappy.compressSync(data))).toBe(true);
    expect(compressionsAlgorithms.snappy.decompressSync(compressed).equals(data)).toBe(true);
    expect((await codecs.snappy.decompress(compressed)).equals(data)).toBe(true);
  });
});

/** A message as the producer hands it to the record batch: bytes, and a bigint timestamp once the batch has set it. */
interface BatchMessage {
  topic: string;
  key?: Buffer;
  /** Absent: a record without a value (the client's types ask for one; the producer passes undefined). */
  value?: Buffer;
  headers?: Map<Buffer, Buffer>;
  timestamp?: bigint;
}

/** The batch header's size (base offset to the records' count) of a record batch of magic 2. */
const BATCH_HEADER_BYTES = 61;

function varied(count: number, seed: number, largest = 1_048_576): BatchMessage[] {
  let state = seed;
  const next = (below: number) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state % below;
  };
  const bytes = (length: number) => Buffer.from(Array.from({ length }, () => next(256)));
  // Lengths on either side of each varint's byte boundary (zigzag: 63, 8191 and 1048575 bytes fit in 1, 2 and 3).
  const lengths = [0, 1, 63, 64, 200, 8191, 8192, 3000, 1_048_575, 1_048_576].filter((length) => length <= largest);
  // Near now: a record without a timestamp takes the batch's time, within the int32 range of the first.
  const base = BigInt(Date.now());
  return Array.from({ length: count }, (_, i) => {
    const headers = new Map<Buffer, Buffer>();
    for (let h = next(4); h > 0; h--) headers.set(Buffer.from(`header-${h}`), bytes(next(3) === 0 ? 0 : next(80)));
    // Timestamps before, at and after the first, and one past the int32 range of milliseconds.
    const offsets = [0n, 1n, -1n, 5_000n, -70_000n, 2_147_483_648n, -2_147_483_649n];
    // Every fourth value of any of the lengths, the others under 5,000 bytes (a batch of megabytes is slow to build).
    const length = lengths[next(lengths.length)]!;
    return {
      topic: 'usage',
      key: i % 11 === 3 ? undefined : bytes(next(3) === 0 ? 0 : 10 + next(60)),
      value: i % 13 === 5 ? undefined : bytes(i % 4 === 0 ? length : length % 5000),
      ...(i % 5 === 4 ? {} : { headers }),
      timestamp: base + offsets[i === 0 ? 0 : next(offsets.length)]!,
    };
  });
}

describe("the client's record batch (patches/@platformatic+kafka)", () => {
  it('writes each record byte for byte as createRecord does, for keys, values and headers of every size, absent and empty', () => {
    for (const seed of [1, 2, 3]) {
      const messages = varied(60, seed);
      const first = messages[0]!.timestamp!;
      const expected = Buffer.concat(messages.map((message, i) => createRecord(message as MessageRecord, i, first).buffer));
      const batch = createRecordsBatch(
        messages.map((message) => ({ ...message }) as MessageRecord),
        {},
      ).buffer;
      expect(batch.subarray(BATCH_HEADER_BYTES).equals(expected)).toBe(true);
    }
  });

  it('writes the whole batch in a few buffers, not several per record', () => {
    const messages = Array.from({ length: 500 }, (_, i) => ({
      topic: 'usage',
      key: Buffer.from(`key-${i}`),
      value: Buffer.alloc(3000, i),
      headers: new Map([[Buffer.from('x-request-id'), Buffer.from(`request-${i}`)]]),
    }));
    expect(createRecordsBatch(messages, {}).buffers.length).toBeLessThan(20);
  });

  it('is read back by the client: the same keys, values, headers and timestamps, records without a timestamp at the batch time', () => {
    const messages = varied(40, 11, 8192);
    messages[7]!.timestamp = undefined;
    const sent = messages.map((message) => ({ ...message }));
    const before = BigInt(Date.now());
    const batch = readRecordsBatch(Reader.from(createRecordsBatch(sent as MessageRecord[], {}).buffer));
    const after = BigInt(Date.now());
    expect(batch.records).toHaveLength(messages.length);
    const first = batch.firstTimestamp;
    batch.records.forEach((record, i) => {
      const message = messages[i]!;
      expect(record.offsetDelta).toBe(i);
      expect(record.key ?? null).toEqual(message.key ?? null);
      expect(record.value ?? null).toEqual(message.value ?? null);
      expect(record.headers).toEqual([...(message.headers ?? new Map<Buffer, Buffer>())]);
      if (message.timestamp === undefined) {
        expect(first + record.timestampDelta).toBeGreaterThanOrEqual(before);
        expect(first + record.timestampDelta).toBeLessThanOrEqual(after);
      } else if (message.timestamp - first < 2_147_483_648n && message.timestamp - first >= -2_147_483_648n) {
        // Past the int32 range the client's own zigzag of a delta (int64ZigZagEncode shifts by 31, not 63) does
        // not read back; those records are the bytes createRecord writes all the same (the first test).
        expect(first + record.timestampDelta).toBe(message.timestamp);
      }
    });
  });
});
