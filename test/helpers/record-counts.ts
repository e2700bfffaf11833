// The same records through the gateway's three ingest routes, and what
// otm_gateway_records_total counted for each: the routes must count alike.
import { httpRequest, type HttpAnswer } from './stack.js';

export type Route = 'single' | 'batch' | 'otlp';
export const ROUTES: Route[] = ['single', 'batch', 'otlp'];

/** otm_gateway_records_total by route, then outcome, from the gateway's metrics port. */
export async function recordCounts(metricsPort: number): Promise<Record<string, Record<string, number>>> {
  const metrics = await httpRequest(`http://127.0.0.1:${metricsPort}/metrics`);
  const counts: Record<string, Record<string, number>> = {};
  for (const match of metrics.text.matchAll(/^otm_gateway_records_total\{([^}]*)\} (\d+)$/gm)) {
    const labels = Object.fromEntries([...match[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((label) => [label[1], label[2]]));
    (counts[labels.route!] ??= {})[labels.outcome!] = Number(match[2]);
  }
  return counts;
}

/** What each route counted between two readings (outcomes that did not move are left out). */
export function increments(before: Record<string, Record<string, number>>, after: Record<string, Record<string, number>>) {
  const moved: Record<string, Record<string, number>> = {};
  for (const route of ROUTES) {
    for (const [outcome, value] of Object.entries(after[route] ?? {})) {
      const delta = value - (before[route]?.[outcome] ?? 0);
      if (delta !== 0) (moved[route] ??= {})[outcome] = delta;
    }
  }
  return moved;
}

/** A usage record as a GenAI span of an OTLP/JSON export (its key: trace and span id). */
function asExport(record: Record<string, any>, spanId: string, valid: boolean) {
  const started = Date.parse(record.timing.startTime);
  const attributes = [
    ...(valid ? [{ key: 'gen_ai.provider.name', value: { stringValue: record.request.provider } }] : []),
    { key: 'gen_ai.request.model', value: { stringValue: record.request.modelId } },
    { key: 'gen_ai.usage.input_tokens', value: { intValue: String(record.tokens.input) } },
    { key: 'gen_ai.usage.output_tokens', value: { intValue: String(record.tokens.output) } },
    { key: 'user.id', value: { stringValue: record.user?.id ?? 'route-counts' } },
  ];
  return {
    resourceSpans: [
      {
        scopeSpans: [
          {
            spans: [
              {
                traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
                spanId,
                name: 'chat',
                startTimeUnixNano: String(BigInt(started) * 1_000_000n),
                endTimeUnixNano: String(BigInt(started + record.timing.latencyMs) * 1_000_000n),
                attributes,
              },
            ],
          },
        ],
      },
    ],
  };
}

/**
 * Posts one record by `route`: `valid` false makes it refused for what it holds (a
 * negative token count; for OTLP, a GenAI span without a provider). The same `key` twice
 * is a retry of the same record.
 */
export function postBy(
  route: Route,
  gatewayUrl: string,
  apiKey: string,
  record: Record<string, any>,
  key: string,
  valid = true,
): Promise<HttpAnswer> {
  const body = valid ? record : { ...record, tokens: { ...record.tokens, input: -1 } };
  const headers = { 'x-api-key': apiKey, 'content-type': 'application/json' };
  if (route === 'single')
    return httpRequest(`${gatewayUrl}/v1/telemetry/usage`, {
      method: 'POST',
      headers: { ...headers, 'idempotency-key': key },
      body: JSON.stringify(body),
    });
  if (route === 'batch')
    return httpRequest(`${gatewayUrl}/v1/telemetry/usage/batch`, {
      method: 'POST',
      headers: { ...headers, 'idempotency-key': key },
      body: JSON.stringify([body]),
    });
  const spanId = Buffer.from(key).toString('hex').padEnd(16, '0').slice(-16);
  return httpRequest(`${gatewayUrl}/v1/otlp/v1/traces`, { method: 'POST', headers, body: JSON.stringify(asExport(record, spanId, valid)) });
}
