// eslint-disable-next-line no-restricted-imports -- the sender's own test reads the client's codec table
import { compressionsAlgorithms } from '@platformatic/kafka';
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
