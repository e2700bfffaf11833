// Amazon MSK's IAM authentication, as its OAUTHBEARER tokens: each token is a SigV4
// presigned `kafka-cluster:Connect` request for the cluster's region, signed by AWS's own
// signer package with the default credential chain (environment, web identity as IRSA
// and EKS Pod Identity give it, the instance profile). A token lives 15 minutes; the
// client asks for one at every authentication, and is given the one it holds until it
// is within a fifth of its life of expiring, then a freshly signed one. The signer and
// the AWS SDK it carries are loaded on first use: clients that do not use IAM never load them.

/** A signed token and when it expires (epoch ms), as the signer answers. */
export interface SignedToken {
  token: string;
  expiryTime: number;
}

/** Signs a token for a region (the signer's generateAuthToken, unless a test gives its own). */
export type MskSigner = (region: string) => Promise<SignedToken>;

const defaultSigner: MskSigner = async (region) => {
  const { generateAuthToken } = await import('aws-msk-iam-sasl-signer-js');
  return generateAuthToken({ region });
};

/**
 * kafkajs's `oauthBearerProvider` for MSK IAM: a token per authentication, the held one
 * while more than a fifth of its life is left. Concurrent authentications (one per
 * broker connection) share one signing.
 */
export function mskIamTokenProvider(region: string, sign: MskSigner = defaultSigner, now: () => number = Date.now) {
  let held: { token: string; refreshAt: number } | undefined;
  let signing: Promise<string> | undefined;
  return async (): Promise<{ value: string }> => {
    if (held && now() < held.refreshAt) return { value: held.token };
    signing ??= (async () => {
      try {
        const signedAt = now();
        const { token, expiryTime } = await sign(region);
        held = { token, refreshAt: signedAt + ((expiryTime - signedAt) * 4) / 5 };
        return token;
      } finally {
        signing = undefined;
      }
    })();
    return { value: await signing };
  };
}
