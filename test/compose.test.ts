// docker-compose.yml's secure option: every connection setting the services read (the
// security variables of infrastructureSpec) is passed to each service from the caller's
// environment, so the same file runs against dependencies that want TLS and credentials.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { infrastructureSpec } from '@otm/shared/config';
import { projectRoot } from './helpers/stack.js';

const compose = parse(fs.readFileSync(path.join(projectRoot, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, { environment?: Record<string, string> }>;
};
const connection = Object.keys(infrastructureSpec).filter((name) =>
  /^(KAFKA_(BROKERS|SECURITY|SASL|TLS)|SCHEMA_REGISTRY_(URL|USERNAME|PASSWORD|CA)|REDIS_(URL|TLS)|CLICKHOUSE_(URL|USER|PASSWORD|CA|DATABASE)|MIGRATE_ON_START)/.test(
    name,
  ),
);

describe('docker-compose.yml', () => {
  it('has the connection variables to check', () => {
    expect(connection).toEqual(
      expect.arrayContaining(['KAFKA_SASL_PASSWORD', 'SCHEMA_REGISTRY_CA_FILE', 'REDIS_TLS_CA_FILE', 'CLICKHOUSE_CA_FILE']),
    );
  });

  for (const service of ['gateway', 'ingester', 'admin']) {
    it(`${service}: every connection variable comes from the caller's environment, none is written in the file`, () => {
      const environment = compose.services[service]!.environment!;
      for (const name of connection) expect(environment[name], name).toMatch(new RegExp(`^\\$\\{${name}(:-[^}]*)?\\}$`));
      for (const [name, value] of Object.entries(environment)) {
        if (/PASSWORD|TOKEN/.test(name) && name !== 'ADMIN_TOKEN') expect(value, name).toMatch(/^\$\{\w+:-\}$/);
      }
    });
  }

  it('the admin service takes its HTTPS pair and the analytics reader from the environment', () => {
    const environment = compose.services.admin!.environment!;
    for (const name of ['ADMIN_TLS_CERT_FILE', 'ADMIN_TLS_KEY_FILE', 'ANALYTICS_CLICKHOUSE_USER', 'ANALYTICS_CLICKHOUSE_PASSWORD']) {
      expect(environment[name], name).toBe(`\${${name}:-}`);
    }
  });
});
