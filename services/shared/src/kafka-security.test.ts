import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bearerToken, kafkaSecurityFrom, type KafkaSecurityConfig } from './kafka.js';
import { ConfigError } from './config.js';

const plain: KafkaSecurityConfig = {
  KAFKA_SECURITY_PROTOCOL: 'PLAINTEXT',
  KAFKA_SASL_MECHANISM: '',
  KAFKA_SASL_USERNAME: '',
  KAFKA_SASL_PASSWORD: '',
  KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: '',
  KAFKA_SASL_OAUTHBEARER_TOKEN_COMMAND: '',
  KAFKA_TLS_CA_FILE: '',
  KAFKA_TLS_CERT_FILE: '',
  KAFKA_TLS_KEY_FILE: '',
};

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'otm-kafka-security-'));
const file = (name: string, content: string) => {
  const target = path.join(dir, name);
  fs.writeFileSync(target, content);
  return target;
};

describe('kafkaSecurityFrom', () => {
  it('plaintext: no TLS, no SASL', () => {
    expect(kafkaSecurityFrom(plain)).toEqual({});
  });

  it('SASL_SSL with SCRAM-SHA-512 and a private CA', () => {
    const ca = file('ca.pem', 'CA');
    const security = kafkaSecurityFrom({
      ...plain,
      KAFKA_SECURITY_PROTOCOL: 'SASL_SSL',
      KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
      KAFKA_SASL_USERNAME: 'otm',
      KAFKA_SASL_PASSWORD: 'pw',
      KAFKA_TLS_CA_FILE: ca,
    });
    expect(security.sasl).toEqual({ mechanism: 'scram-sha-512', username: 'otm', password: 'pw' });
    expect(security.ssl).toEqual({ ca: [Buffer.from('CA')] });
  });

  it('SASL_SSL without a CA file trusts the system CAs; PLAIN and SCRAM-SHA-256 map to kafkajs names', () => {
    const base = { ...plain, KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p' };
    expect(kafkaSecurityFrom({ ...base, KAFKA_SASL_MECHANISM: 'PLAIN' })).toEqual({
      ssl: true,
      sasl: { mechanism: 'plain', username: 'u', password: 'p' },
    });
    expect(kafkaSecurityFrom({ ...base, KAFKA_SASL_MECHANISM: 'SCRAM-SHA-256' }).sasl).toMatchObject({ mechanism: 'scram-sha-256' });
  });

  it('SSL with a client certificate (mTLS)', () => {
    const cert = file('client.crt', 'CERT');
    const key = file('client.key', 'KEY');
    expect(kafkaSecurityFrom({ ...plain, KAFKA_SECURITY_PROTOCOL: 'SSL', KAFKA_TLS_CERT_FILE: cert, KAFKA_TLS_KEY_FILE: key })).toEqual({
      ssl: { cert: Buffer.from('CERT'), key: Buffer.from('KEY') },
    });
  });

  it('refuses settings that cannot work together, naming the variable', () => {
    const refuse = (config: Partial<KafkaSecurityConfig>, pattern: RegExp) =>
      expect(() => kafkaSecurityFrom({ ...plain, ...config })).toThrow(pattern);
    refuse({ KAFKA_TLS_CA_FILE: '/ca.pem' }, /KAFKA_SECURITY_PROTOCOL is PLAINTEXT/);
    refuse({ KAFKA_SASL_MECHANISM: 'PLAIN' }, /KAFKA_SASL_MECHANISM is PLAIN but KAFKA_SECURITY_PROTOCOL is PLAINTEXT/);
    refuse({ KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: 'PLAIN' }, /KAFKA_SASL_USERNAME is required/);
    refuse({ KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: '' }, /KAFKA_SASL_MECHANISM must be/);
    refuse({ KAFKA_SECURITY_PROTOCOL: 'SSL', KAFKA_TLS_CERT_FILE: '/c.pem' }, /go together/);
    refuse({ KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_SASL_MECHANISM: 'OAUTHBEARER' }, /exactly one of/);
    expect(() => kafkaSecurityFrom({ ...plain, KAFKA_SASL_MECHANISM: 'PLAIN' })).toThrow(ConfigError);
  });

  it('OAUTHBEARER reads the token at every authentication: from a file a sidecar rewrites, or from a command', async () => {
    const tokenFile = file('token', 'first-token\n');
    const security = kafkaSecurityFrom({
      ...plain,
      KAFKA_SECURITY_PROTOCOL: 'SASL_SSL',
      KAFKA_SASL_MECHANISM: 'OAUTHBEARER',
      KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: tokenFile,
    });
    const provider = (security.sasl as { oauthBearerProvider: () => Promise<{ value: string }> }).oauthBearerProvider;
    expect(await provider()).toEqual({ value: 'first-token' });
    fs.writeFileSync(tokenFile, 'second-token');
    expect(await provider()).toEqual({ value: 'second-token' });
    expect(await bearerToken('', "printf 'from-command\\nignored\\n'")).toBe('from-command');
    await expect(bearerToken('', 'true')).rejects.toThrow(/gave no token/);
  });
});
