// The alerting rules in deploy/prometheus/alerts.yml: well-formed rule groups, every
// expression parsed by Prometheus's own PromQL grammar (the Lezer parser its UI
// uses), and every metric they name exported by the gateway, the admin service or the ingester, so a
// renamed metric cannot leave an alert that never fires.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parser } from '@prometheus-io/lezer-promql';
import { createGatewayMetrics } from '../services/gateway/src/metrics.js';
import { createIngesterMetrics } from '../services/ingester/src/metrics.js';
import { requestMetrics } from '../services/shared/src/http-edge.js';
import { Registry } from 'prom-client';

interface Rule {
  alert?: string;
  expr?: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const file = path.join(import.meta.dirname, '../deploy/prometheus/alerts.yml');
const document = parse(fs.readFileSync(file, 'utf8')) as { groups: { name: string; rules: Rule[] }[] };
const rules = document.groups.flatMap((group) => group.rules);

/** Metric names the services export, with the series suffixes Prometheus derives from them. */
function exportedNames(): Set<string> {
  const gateway = createGatewayMetrics(() => 0).registry;
  requestMetrics(gateway, 'otm_gateway');
  const admin = new Registry();
  requestMetrics(admin, 'otm_admin');
  const registries = [gateway, admin, createIngesterMetrics({ lag: async () => [], oldestPendingMs: () => undefined }).registry];
  const names = new Set<string>(['up']);
  for (const registry of registries) {
    for (const metric of registry.getMetricsAsArray()) {
      names.add(metric.name);
      for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${metric.name}${suffix}`);
    }
  }
  return names;
}

/** Syntax errors the PromQL grammar finds in an expression (Lezer marks them as ⚠ nodes). */
function syntaxErrors(expr: string): string[] {
  const errors: string[] = [];
  parser.parse(expr).iterate({
    enter: (node) => {
      if (node.type.isError) errors.push(`at ${node.from}: ${JSON.stringify(expr.slice(node.from, node.from + 20))}`);
    },
  });
  return errors;
}

describe('deploy/prometheus/alerts.yml', () => {
  it('holds the alerts an operator needs, each with a severity, a summary and a description', () => {
    expect(rules.map((rule) => rule.alert).sort()).toEqual(
      expect.arrayContaining([
        'OtmDeadLetters',
        'OtmFreshnessAboveSlo',
        'OtmIngesterPartitionStopped',
        'OtmGateway5xxRate',
        'OtmIngesterDown',
        'OtmIngesterLagGrowing',
        'OtmIngesterNotConsuming',
      ]),
    );
    for (const rule of rules) {
      expect(rule.expr, rule.alert).toEqual(expect.any(String));
      expect(['warning', 'critical'], rule.alert).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary, rule.alert).toEqual(expect.any(String));
      expect(rule.annotations?.description, rule.alert).toEqual(expect.any(String));
      if (rule.for !== undefined) expect(rule.for, rule.alert).toMatch(/^\d+[smh]$/);
    }
  });

  it.each(rules.map((rule) => [rule.alert, rule.expr!] as const))('%s parses as PromQL', (_alert, expr) => {
    expect(syntaxErrors(expr)).toEqual([]);
  });

  it('the grammar check itself refuses a broken expression', () => {
    expect(syntaxErrors('sum(rate(otm_gateway_requests_total[5m]) > ')).not.toEqual([]);
    expect(syntaxErrors('sum by (status (otm_gateway_requests_total)')).not.toEqual([]);
  });

  it('names only metrics the services export', () => {
    const exported = exportedNames();
    for (const rule of rules) {
      const named = [...rule.expr!.matchAll(/\b(otm_[a-z_]+)\b/g)].map((match) => match[1]!);
      expect(named.length, rule.alert).toBeGreaterThan(['OtmIngesterDown', 'OtmGatewayDown'].includes(rule.alert!) ? -1 : 0);
      for (const name of named) expect(exported, `${rule.alert}: ${name}`).toContain(name);
    }
  });
});
