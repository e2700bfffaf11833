// A self-signed certificate for local HTTPS, generated once under .stack/tls when
// no certificate is configured. Production configures TLS_CERT_FILE/TLS_KEY_FILE.
import fs from 'node:fs';
import path from 'node:path';
import { generate } from 'selfsigned';

export async function ensureLocalCertificate(dir: string): Promise<{ certFile: string; keyFile: string }> {
  const certFile = path.join(dir, 'localhost.crt');
  const keyFile = path.join(dir, 'localhost.key');
  if (fs.existsSync(certFile) && fs.existsSync(keyFile)) return { certFile, keyFile };
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keySize: 2048,
    days: 825,
    algorithm: 'sha256',
    extensions: [
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  } as never);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(keyFile, pems.private, { mode: 0o600 });
  fs.writeFileSync(certFile, pems.cert);
  return { certFile, keyFile };
}
