// The Kafka client the bench compares kafkajs with: @confluentinc/kafka-javascript
// (librdkafka behind a KafkaJS-compatible API). It is not a dependency of the project:
// the bench installs it on first use under .stack/kafka-javascript.
//
// Its install fetches a prebuilt binary from the project's own release site, which may
// not be reachable; it then builds from the sources in the package. With its default
// (static) linking that build downloads zlib, zstd, OpenSSL and the others from their own
// sites too; with CKJS_LINKING=dynamic it links Debian's libraries instead (installed
// here with apt when missing), and node-gyp takes the headers of the running Node.js
// (npm_config_nodedir) instead of downloading them. About a minute on two cores.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { aptInstall } from '../stack/process-service.js';

export const ALTERNATIVE_CLIENT = '@confluentinc/kafka-javascript';
export const ALTERNATIVE_CLIENT_VERSION = '1.10.1';

/** What the build needs from Debian: a compiler and the libraries librdkafka links. */
const BUILD_PACKAGES = ['build-essential', 'python3', 'libssl-dev', 'zlib1g-dev', 'libzstd-dev', 'liblz4-dev', 'libsasl2-dev'];

function installedDebianPackage(name: string): boolean {
  const result = spawnSync('dpkg-query', ['-W', '-f=${Status}', name], { encoding: 'utf8' });
  return result.status === 0 && result.stdout.includes('install ok installed');
}

function ensureBuildPackages(): void {
  const missing = BUILD_PACKAGES.filter((name) => !installedDebianPackage(name));
  if (missing.length > 0) aptInstall(missing);
}

/** The running Node.js's own directory when it carries its headers (the npm registry's node package does). */
function nodeHeaders(): string | undefined {
  const home = path.resolve(path.dirname(process.execPath), '..');
  return fs.existsSync(path.join(home, 'include', 'node', 'node.h')) ? home : undefined;
}

/** The client's module (its KafkaJS-compatible API under `.KafkaJS`), installed under `stackDir` on first use. */
export function alternativeKafkaClient(stackDir: string): { KafkaJS: any; version: string } {
  const home = path.join(stackDir, 'kafka-javascript', ALTERNATIVE_CLIENT_VERSION);
  const manifest = path.join(home, 'node_modules', ALTERNATIVE_CLIENT, 'package.json');
  const binary = path.join(home, 'node_modules', ALTERNATIVE_CLIENT, 'build', 'Release', 'confluent-kafka-javascript.node');
  if (!fs.existsSync(binary)) {
    ensureBuildPackages();
    fs.mkdirSync(home, { recursive: true });
    // Its own package.json: npm must not walk up to the project's workspaces.
    fs.writeFileSync(path.join(home, 'package.json'), `${JSON.stringify({ name: 'alternative-kafka-client', private: true }, null, 2)}\n`);
    const headers = nodeHeaders();
    console.log(`installing ${ALTERNATIVE_CLIENT}@${ALTERNATIVE_CLIENT_VERSION} (built against Debian's libraries) ...`);
    const result = spawnSync(
      'npm',
      ['install', '--no-audit', '--no-fund', '--loglevel=error', `${ALTERNATIVE_CLIENT}@${ALTERNATIVE_CLIENT_VERSION}`],
      {
        cwd: home,
        stdio: ['ignore', 'inherit', 'inherit'],
        env: { ...process.env, CKJS_LINKING: 'dynamic', ...(headers ? { npm_config_nodedir: headers } : {}) },
      },
    );
    if (result.status !== 0 || !fs.existsSync(binary)) {
      throw new Error(`${ALTERNATIVE_CLIENT} did not install (npm exit ${result.status ?? result.signal}); its build's output is above`);
    }
  }
  const required = createRequire(manifest)(ALTERNATIVE_CLIENT) as { KafkaJS: any };
  const version = (JSON.parse(fs.readFileSync(manifest, 'utf8')) as { version: string }).version;
  return { KafkaJS: required.KafkaJS, version };
}
