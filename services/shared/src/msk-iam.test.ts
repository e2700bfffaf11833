// MSK IAM without an MSK cluster: the settings it needs, the token AWS's signer makes
// from fixed credentials (a presigned kafka-cluster:Connect request for the region), and
// when the provider signs again.
import { generateAuthTokenFromCredentialsProvider } from 'aws-msk-iam-sasl-signer-js';
import { describe, expect, it } from 'vitest';
import { kafkaSecurityFrom, type KafkaSecurityConfig } from './kafka.js';
import { mskIamTokenProvider, type MskSigner } from './msk-iam.js';

const iam: KafkaSecurityConfig = {
  KAFKA_SECURITY_PROTOCOL: 'SASL_SSL',
  KAFKA_SASL_MECHANISM: 'AWS_MSK_IAM',
  KAFKA_SASL_USERNAME: '',
  KAFKA_SASL_PASSWORD: '',
  KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: '',
  KAFKA_SASL_OAUTHBEARER_TOKEN_COMMAND: '',
  KAFKA_AWS_REGION: 'eu-west-1',
  KAFKA_TLS_CA_FILE: '',
  KAFKA_TLS_CERT_FILE: '',
  KAFKA_TLS_KEY_FILE: '',
};

/** AWS's documented example credentials: they sign, they open nothing. */
const fixedCredentials = async () => ({
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  sessionToken: 'session-token-example',
});

const signWithFixedCredentials: MskSigner = (region) =>
  generateAuthTokenFromCredentialsProvider({ region, awsCredentialsProvider: fixedCredentials });

describe('MSK IAM', () => {
  it('is OAUTHBEARER over TLS, and needs the region', () => {
    const security = kafkaSecurityFrom(iam);
    expect(security.ssl).toBe(true);
    expect(security.sasl?.mechanism).toBe('oauthbearer');
    expect(() => kafkaSecurityFrom({ ...iam, KAFKA_AWS_REGION: '' })).toThrow(/KAFKA_AWS_REGION is required/);
    expect(() => kafkaSecurityFrom({ ...iam, KAFKA_SECURITY_PROTOCOL: 'SASL_PLAINTEXT' })).toThrow(
      /needs KAFKA_SECURITY_PROTOCOL=SASL_SSL/,
    );
  });

  it("a token is AWS's presigned kafka-cluster:Connect request for the region, signed with the credentials given", async () => {
    const { value } = await mskIamTokenProvider('eu-west-1', signWithFixedCredentials)();
    expect(value).toMatch(/^[A-Za-z0-9_-]+$/); // base64url, no padding
    const url = new URL(Buffer.from(value, 'base64url').toString('utf8'));
    expect(url.host).toBe('kafka.eu-west-1.amazonaws.com');
    expect(url.searchParams.get('Action')).toBe('kafka-cluster:Connect');
    expect(url.searchParams.get('X-Amz-Algorithm')).toBe('AWS4-HMAC-SHA256');
    expect(url.searchParams.get('X-Amz-Credential')).toMatch(/^AKIAIOSFODNN7EXAMPLE\/\d{8}\/eu-west-1\/kafka-cluster\/aws4_request$/);
    expect(url.searchParams.get('X-Amz-Security-Token')).toBe('session-token-example');
    expect(url.searchParams.get('X-Amz-Expires')).toBe('900');
    expect(url.searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
  });

  it('gives the held token until a fifth of its life is left, then signs again; concurrent asks share one signing', async () => {
    let clock = 1_000_000;
    let signed = 0;
    const sign: MskSigner = async () => {
      signed++;
      await new Promise((resolve) => setTimeout(resolve, 5));
      return { token: `token-${signed}`, expiryTime: clock + 900_000 };
    };
    const provider = mskIamTokenProvider('eu-west-1', sign, () => clock);
    const first = await Promise.all([provider(), provider(), provider()]);
    expect(first.map((token) => token.value)).toEqual(['token-1', 'token-1', 'token-1']);
    clock += 700_000; // 200 s of 900 left: more than a fifth
    expect((await provider()).value).toBe('token-1');
    clock += 30_000; // 170 s left: less than a fifth (180 s)
    expect((await provider()).value).toBe('token-2');
    expect(signed).toBe(2);
  });

  it('a failed signing is not held: the next authentication signs again', async () => {
    let attempts = 0;
    const provider = mskIamTokenProvider('eu-west-1', async () => {
      attempts++;
      if (attempts === 1) throw new Error('no credentials in the chain');
      return { token: 'token', expiryTime: Date.now() + 900_000 };
    });
    await expect(provider()).rejects.toThrow('no credentials in the chain');
    expect((await provider()).value).toBe('token');
  });
});
