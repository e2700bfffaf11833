// Apicurio Registry (Maven Central) for the local stack: the ccompat API, HTTPS with
// basic auth in the secure profile.
import fs from 'node:fs';
import path from 'node:path';
import { stackAddresses } from './config.js';
import { SECURE_USERS, ensureSecureMaterial } from './secure.js';
import { ProcessService, httpOk, pomProperty, run } from './process-service.js';

export class RegistryService extends ProcessService {
  readonly name = 'registry';
  readonly startTimeoutMs = 150_000;
  protected get home() {
    return path.join(this.config.dir, 'registry');
  }
  get address() {
    return stackAddresses(this.config).SCHEMA_REGISTRY_URL;
  }

  protected prepare() {
    const version = pomProperty(this.config, 'apicurio.version');
    const app = path.join(this.config.installDir, 'registry', 'app');
    const marker = path.join(app, '.version');
    if (!fs.existsSync(marker) || fs.readFileSync(marker, 'utf8') !== version) {
      console.log(`fetching Apicurio Registry ${version} (mvn dependency:copy) ...`);
      fs.rmSync(app, { recursive: true, force: true });
      fs.mkdirSync(app, { recursive: true });
      const artifact = `io.apicurio:apicurio-registry-app:${version}:tar.gz:all`;
      // Run outside the pom: newer dependency plugins insist on the artifact's parent
      // pom, which is not published; the 2.8 copy goal does not read it.
      run(
        'mvn',
        ['-q', '-B', 'org.apache.maven.plugins:maven-dependency-plugin:2.8:copy', `-Dartifact=${artifact}`, `-DoutputDirectory=${app}`],
        { cwd: app },
      );
      const archive = path.join(app, `apicurio-registry-app-${version}-all.tar.gz`);
      run('tar', ['xzf', archive, '-C', app]);
      fs.rmSync(archive);
      fs.writeFileSync(marker, version);
    }
    // 3.0.x ships a legacy runner jar; later 3.x the fast-jar quarkus-run.jar.
    const jar = fs.existsSync(path.join(app, 'quarkus-run.jar'))
      ? 'quarkus-run.jar'
      : fs.readdirSync(app).find((file) => file.endsWith('-runner.jar'));
    if (!jar) throw new Error(`no runnable jar in ${app}`);
    return {
      command: 'java',
      cwd: app,
      args: [
        `-Xmx${this.config.registryHeapMb}m`,
        '-XX:TieredStopAtLevel=1',
        `-Dquarkus.http.host=${this.config.host}`,
        ...(this.config.secure ? this.secureProperties() : [`-Dquarkus.http.port=${this.config.registryPort}`]),
        // Persistent storage: a restart must keep every schema id, or messages
        // already on the topic become undecodable.
        '-Dapicurio.storage.kind=sql',
        '-Dapicurio.storage.sql.kind=h2',
        `-Dapicurio.datasource.url=jdbc:h2:file:${path.join(this.home, 'db', 'registry')}`,
        '-Dapicurio.datasource.username=sa',
        '-Dapicurio.datasource.password=sa',
        // Pinned: the Confluent-compatible API hands out content ids.
        '-Dapicurio.ccompat.legacy-id-mode.enabled=false',
        '-Dquarkus.log.level=WARN',
        '-jar',
        jar,
      ],
    };
  }

  /**
   * The secure profile: HTTPS only (the plain port closed) with the profile's certificate,
   * and HTTP basic auth on every path for one user: Quarkus' own HTTPS and embedded-user
   * settings, which Apicurio is built on (no proxy in front).
   */
  private secureProperties(): string[] {
    const material = ensureSecureMaterial(this.config);
    return [
      `-Dquarkus.http.ssl-port=${this.config.registryPort}`,
      '-Dquarkus.http.insecure-requests=disabled',
      `-Dquarkus.http.ssl.certificate.files=${material.serverCertFile}`,
      `-Dquarkus.http.ssl.certificate.key-files=${material.serverKeyFile}`,
      '-Dquarkus.http.auth.basic=true',
      '-Dquarkus.security.users.embedded.enabled=true',
      '-Dquarkus.security.users.embedded.plain-text=true',
      `-Dquarkus.security.users.embedded.users.${SECURE_USERS.registry}=${material.passwords.registry}`,
      '-Dquarkus.http.auth.permission.everything.paths=/*',
      '-Dquarkus.http.auth.permission.everything.policy=authenticated',
    ];
  }

  async healthy(): Promise<boolean> {
    if (!this.config.secure) return httpOk(`${this.address}/subjects`);
    const material = ensureSecureMaterial(this.config);
    const login = Buffer.from(`${SECURE_USERS.registry}:${material.passwords.registry}`).toString('base64');
    return httpOk(`${this.address}/subjects`, material.caFile, { authorization: `Basic ${login}` });
  }
}
