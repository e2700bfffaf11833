// ClickHouse (Debian's package, 18.16) for the local stack: HTTP, or HTTPS and native
// TLS with migrating, writing and reading users in the secure profile.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { SECURE_USERS, ensureSecureMaterial } from './secure.js';
import { ProcessService, ensureDebianPackage, httpOk, onPath } from './process-service.js';
import { ensureVolume, releaseVolume } from './volume.js';
import { recordMountOwner } from './stale-mounts.js';

export class ClickHouseService extends ProcessService {
  readonly name: string = 'clickhouse';
  // 18.16 loads every table's metadata before it answers: a data folder holding the
  // databases of many interrupted test runs (thousands of tables) took past a minute.
  readonly startTimeoutMs = 180_000;
  protected get home() {
    return path.join(this.config.dir, 'clickhouse');
  }
  get address() {
    return `http${this.config.secure ? 's' : ''}://${this.config.host}:${this.httpPort}`;
  }
  protected get httpPort(): number {
    return this.config.clickhouseHttpPort;
  }
  protected get tcpPort(): number {
    return this.config.clickhouseTcpPort;
  }
  /** Configuration beside config.xml (config.d/, which ClickHouse merges into it); none for the single server. */
  protected extraConfig(): string | undefined {
    return undefined;
  }

  /**
   * The data folder's own journaled ext4 volume (volume.ts): the single server of the
   * default profile, the one tests and benchmarks load; 0 GiB for none.
   */
  protected get volumeGiB(): number {
    return this.config.secure ? 0 : this.config.clickhouseVolumeGiB;
  }
  private get volume() {
    return { dir: path.join(this.home, 'data'), image: path.join(this.home, 'volume.img'), sizeGiB: this.volumeGiB };
  }

  protected prepare() {
    ensureDebianPackage('clickhouse-server', 'clickhouse-server');
    if (this.volumeGiB > 0) {
      const state = ensureVolume(this.volume);
      // Written down per machine, so a later stack finds this mount if this one is killed.
      if (state.mounted) recordMountOwner(this.config.dir);
      console.log(
        state.mounted
          ? `${this.name}: data on its own ext4 volume (${state.device})`
          : `${this.name}: data on the machine's filesystem (no volume of its own: ${state.reason})`,
      );
    }
    for (const folder of ['log', 'data', 'tmp', 'user_files', 'format_schemas', 'config.d']) {
      fs.mkdirSync(path.join(this.home, folder), { recursive: true });
    }
    const template = fs.readFileSync(path.join(this.config.root, 'deploy/clickhouse/config.xml.template'), 'utf8');
    const values: Record<string, string> = {
      dir: this.home,
      listenHost: '127.0.0.1',
      httpPort: String(this.httpPort),
      tcpPort: String(this.tcpPort),
    };
    const configXml = template.replace(/\$\{(\w+)\}/g, (_, key: string) => values[key] ?? '');
    fs.writeFileSync(path.join(this.home, 'config.xml'), this.config.secure ? this.secureConfig(configXml) : configXml);
    const extra = this.extraConfig();
    const extraFile = path.join(this.home, 'config.d', 'otm.xml');
    if (extra) fs.writeFileSync(extraFile, extra);
    else fs.rmSync(extraFile, { force: true });
    if (this.config.secure) fs.writeFileSync(path.join(this.home, 'users.xml'), this.secureUsers());
    else fs.copyFileSync(path.join(this.config.root, 'deploy/clickhouse/users.xml'), path.join(this.home, 'users.xml'));
    const binary = onPath('clickhouse-server') ? 'clickhouse-server' : '/usr/sbin/clickhouse-server';
    return { command: binary, args: [`--config-file=${path.join(this.home, 'config.xml')}`] };
  }

  /** The secure profile: HTTPS and the native protocol over TLS only, with the profile's certificate. */
  private secureConfig(configXml: string): string {
    const material = ensureSecureMaterial(this.config);
    return configXml
      .replace(/^\s*<http_port>.*\n/m, `    <https_port>${this.httpPort}</https_port>\n`)
      .replace(/^\s*<tcp_port>.*\n/m, `    <tcp_port_secure>${this.tcpPort}</tcp_port_secure>\n`)
      .replace(
        '</yandex>',
        [
          '    <openSSL>',
          '        <server>',
          `            <certificateFile>${material.serverCertFile}</certificateFile>`,
          `            <privateKeyFile>${material.serverKeyFile}</privateKeyFile>`,
          '            <verificationMode>none</verificationMode>',
          '            <loadDefaultCAFile>false</loadDefaultCAFile>',
          '            <cacheSessions>true</cacheSessions>',
          '            <disableProtocols>sslv2,sslv3,tlsv1,tlsv1_1</disableProtocols>',
          '            <preferServerCiphers>true</preferServerCiphers>',
          '        </server>',
          '    </openSSL>',
          '</yandex>',
        ].join('\n'),
      );
  }

  /**
   * The secure profile's users (18.16 has no SQL users or GRANT: users.xml). `default` has a
   * password nobody is given; otm_migrator changes the schema (npm run migrate); otm_writer
   * (ingester, admin jobs) and otm_reader (analytics, readonly=2: SELECT and settings) see
   * only the profile's database. docs/production.md gives the GRANTs of current releases.
   */
  private secureUsers(): string {
    const { passwords } = ensureSecureMaterial(this.config);
    const sha256 = (password: string) => createHash('sha256').update(password).digest('hex');
    const user = (name: string, password: string, profile: string, databases?: string[]) =>
      [
        `        <${name}>`,
        `            <password_sha256_hex>${sha256(password)}</password_sha256_hex>`,
        '            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>',
        `            <profile>${profile}</profile>`,
        '            <quota>default</quota>',
        ...(databases
          ? [
              '            <allow_databases>',
              ...databases.map((name) => `                <database>${name}</database>`),
              '            </allow_databases>',
            ]
          : []),
        `        </${name}>`,
      ].join('\n');
    const database = this.config.clickhouseDatabase;
    const limits = '<max_memory_usage>4000000000</max_memory_usage><load_balancing>random</load_balancing>';
    return [
      '<?xml version="1.0"?>',
      "<!-- The secure profile's users, written by scripts/stack/clickhouse.ts. -->",
      '<yandex>',
      '    <profiles>',
      `        <default>${limits}</default>`,
      `        <reader>${limits}<readonly>2</readonly></reader>`,
      '    </profiles>',
      '    <users>',
      user('default', passwords.clickhouseDefault, 'default'),
      user(SECURE_USERS.clickhouseMigrator, passwords.clickhouseMigrator, 'default'),
      user(SECURE_USERS.clickhouseWriter, passwords.clickhouseWriter, 'default', [database, 'system']),
      user(SECURE_USERS.clickhouseReader, passwords.clickhouseReader, 'reader', [database, 'system']),
      '    </users>',
      '    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>',
      '</yandex>',
      '',
    ].join('\n');
  }

  override async down(): Promise<void> {
    await super.down();
    // The server has stopped: its volume is let go (the data stays in the image).
    if (this.volumeGiB > 0 && !releaseVolume(this.volume)) console.log(`${this.name}: its volume is still mounted (busy)`);
  }

  async healthy(): Promise<boolean> {
    return httpOk(`${this.address}/ping`, this.config.secure ? ensureSecureMaterial(this.config).caFile : undefined);
  }
}
