// OTLP/HTTP ingest end to end: real OpenTelemetry SDKs export GenAI spans to the real
// gateway (TLS, the ingest key as a header), the ingester loads them, and ClickHouse
// holds the mapped values. The JavaScript SDK with the protobuf exporter (gzip) and the
// JSON exporter; Python's SDK with opentelemetry-exporter-otlp-proto-http (the example
// in examples/python-otlp, pip-installed into a virtualenv here; skipped, saying so,
// only when python3 is absent). A retried export stores nothing twice; a span without
// GenAI attributes is ignored; refused spans come back in partial_success.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpanStatusCode, type Attributes } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Agent, request as undiciRequest } from 'undici';
import { loadOtlpRoot, OTLP_TYPES } from '../services/gateway/src/otlp.js';
import { pythonWith, runPython } from './helpers/python.js';
import {
  createTestKey,
  eventually,
  httpRequest,
  queryRows,
  startGateway,
  startIngester,
  testCertificate,
  testClickHouse,
  testNames,
  type ServiceProcess,
} from './helpers/stack.js';

const n = testNames('otlp');
const services: ServiceProcess[] = [];
let gateway: ServiceProcess;
let apiKey: string;
let ca: Buffer;
const clickhouse = testClickHouse(n.database);

beforeAll(async () => {
  services.push(await startIngester(n));
  gateway = await startGateway({ topic: n.topic, keyPrefix: n.keyPrefix });
  services.push(gateway);
  apiKey = (await createTestKey(n.keyPrefix, 'qa', 'otlp')).key;
  ca = fs.readFileSync((await testCertificate()).certFile);
});

afterAll(async () => {
  await Promise.all(services.map((service) => service.stop()));
  await clickhouse.close();
});

interface Call {
  name: string;
  attributes: Attributes;
  startMs: number;
  durationMs: number;
  firstTokenMs?: number;
  error?: string;
}

/** Spans as an instrumented application ends them, held in memory to be exported (and exported again). */
function recordSpans(calls: Call[], withPlainSpan = true): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'otlp-js-test', 'deployment.environment.name': 'qa' }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  const tracer = provider.getTracer('otm-telemetry-test');
  for (const call of calls) {
    const span = tracer.startSpan(call.name, { attributes: call.attributes, startTime: call.startMs });
    if (call.firstTokenMs !== undefined) span.addEvent('gen_ai.first_token', call.startMs + call.firstTokenMs);
    if (call.error) {
      span.setAttribute('error.type', call.error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: `${call.error} from upstream` });
    }
    span.end(call.startMs + call.durationMs);
  }
  if (withPlainSpan) tracer.startSpan('GET /health', { attributes: { 'http.request.method': 'GET' } }).end();
  return memory.getFinishedSpans();
}

function exportWith(exporter: ProtobufExporter | JsonExporter, spans: ReadableSpan[]): Promise<{ code: number; error?: Error }> {
  return new Promise((resolve) => exporter.export(spans, resolve));
}

const exporterOptions = () => ({
  url: `${gateway.url}/v1/otlp/v1/traces`,
  headers: { 'x-api-key': apiKey },
  httpAgentOptions: { ca },
});

interface Row {
  trace: string;
  model_id: string;
  provider: string;
  status: string;
  user_id: string;
  user_type: string;
  input_tokens: string | null;
  output_tokens: string | null;
  cached_input_tokens: string | null;
  reasoning_tokens: string | null;
  latency_ms: string | null;
  ttft_ms: string | null;
  error_code: string | null;
  context: string;
}

const rowsOf = (userPrefix: string) =>
  queryRows<Row>(
    clickhouse,
    `SELECT visitParamExtractString(context, 'otel.trace_id') AS trace, model_id, provider, status, user_id, user_type, toString(input_tokens) AS input_tokens,
            toString(output_tokens) AS output_tokens, toString(cached_input_tokens) AS cached_input_tokens, toString(reasoning_tokens) AS reasoning_tokens,
            toString(latency_ms) AS latency_ms, toString(ttft_ms) AS ttft_ms, error_code, context
       FROM usage_events WHERE startsWith(user_id, '${userPrefix}') ORDER BY input_tokens`,
  );

const metric = async (outcome: string) => {
  const text = (await httpRequest(`http://127.0.0.1:${gateway.metricsPort}/metrics`)).text;
  return Number(new RegExp(`^otm_gateway_otlp_spans_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
};

describe('OTLP/HTTP from the JavaScript SDK', () => {
  it('protobuf + gzip: GenAI spans become usage records with the mapped values; a retried export stores nothing twice', async () => {
    const now = Date.now() - 60_000;
    const user = `${n.groupId}-proto`;
    const spans = recordSpans([
      {
        name: 'chat gpt-4o',
        startMs: now,
        durationMs: 2000,
        firstTokenMs: 300,
        attributes: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.provider.name': 'openai',
          'gen_ai.request.model': 'gpt-4o',
          'gen_ai.response.model': 'gpt-4o-2024-08-06',
          'gen_ai.usage.input_tokens': 1200,
          'gen_ai.usage.output_tokens': 300,
          'gen_ai.usage.cache_read.input_tokens': 1000,
          'gen_ai.usage.reasoning.output_tokens': 120,
          'user.id': user,
        },
      },
      {
        name: 'chat claude',
        startMs: now + 10,
        durationMs: 500,
        error: 'rate_limit',
        attributes: {
          'gen_ai.system': 'anthropic',
          'gen_ai.request.model': 'claude-sonnet-4',
          'gen_ai.usage.input_tokens': 1300,
          'user.id': user,
        },
      },
    ]);
    expect(spans).toHaveLength(3);
    const ignoredBefore = await metric('ignored');
    const exporter = new ProtobufExporter({ ...exporterOptions(), compression: 'gzip' as never });
    expect(await exportWith(exporter, spans)).toMatchObject({ code: 0 });
    // The exporter's retry sends the same spans again.
    expect(await exportWith(exporter, spans)).toMatchObject({ code: 0 });
    await exporter.shutdown();

    const rows = await eventually(async () => {
      const found = await rowsOf(user);
      return found.length >= 2 && found;
    });
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(await rowsOf(user)).toHaveLength(2);
    const [streamed, failed] = rows;
    expect(streamed).toMatchObject({
      model_id: 'gpt-4o-2024-08-06',
      provider: 'openai',
      status: 'success',
      user_type: 'external',
      input_tokens: '1200',
      output_tokens: '300',
      cached_input_tokens: '1000',
      reasoning_tokens: '120',
      latency_ms: '2000',
      ttft_ms: '300',
      error_code: null,
    });
    expect(streamed!.trace).toBe(spans[0]!.spanContext().traceId);
    expect(JSON.parse(streamed!.context)).toMatchObject({
      'service.name': 'otlp-js-test',
      'deployment.environment.name': 'qa',
      'gen_ai.operation.name': 'chat',
    });
    expect(failed).toMatchObject({
      model_id: 'claude-sonnet-4',
      provider: 'anthropic',
      status: 'error',
      error_code: 'rate_limit',
      latency_ms: '500',
      ttft_ms: '500',
    });
    // The plain span was ignored, twice (once per export), and counted.
    expect((await metric('ignored')) - ignoredBefore).toBe(2);
  });

  it('JSON: the same mapping through OTLP/JSON', async () => {
    const user = `${n.groupId}-json`;
    const spans = recordSpans(
      [
        {
          name: 'embeddings',
          startMs: Date.now() - 30_000,
          durationMs: 120,
          attributes: {
            'gen_ai.provider.name': 'openai',
            'gen_ai.request.model': 'text-embedding-3-small',
            'gen_ai.usage.input_tokens': 42,
            'user.id': user,
          },
        },
      ],
      false,
    );
    const exporter = new JsonExporter(exporterOptions());
    expect(await exportWith(exporter, spans)).toMatchObject({ code: 0 });
    await exporter.shutdown();
    const [row] = await eventually(async () => {
      const found = await rowsOf(user);
      return found.length > 0 && found;
    });
    expect(row).toMatchObject({ model_id: 'text-embedding-3-small', input_tokens: '42', output_tokens: '0', status: 'success' });
  });
});

describe('OTLP answers', () => {
  const span = (spanId: string, attributes: object[]) => ({
    traceId: '0af7651916cd43dd8448eb211c80319c',
    spanId,
    name: 'chat',
    startTimeUnixNano: String(BigInt(Date.now() - 5000) * 1_000_000n),
    endTimeUnixNano: String(BigInt(Date.now() - 4000) * 1_000_000n),
    attributes,
  });
  const post = (body: unknown, headers: Record<string, string> = {}) =>
    httpRequest(`${gateway.url}/v1/otlp/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey, ...headers },
      body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
    });

  it('partial_success names the refused GenAI spans; the others are accepted', async () => {
    const good = [
      { key: 'gen_ai.provider.name', value: { stringValue: 'openai' } },
      { key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o' } },
      { key: 'gen_ai.usage.input_tokens', value: { intValue: '7' } },
      { key: 'user.id', value: { stringValue: `${n.groupId}-partial` } },
    ];
    const answer = await post({
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                span('00f067aa0ba902b7', good),
                span('00f067aa0ba902b8', [{ key: 'gen_ai.request.model', value: { stringValue: 'x' } }]),
              ],
            },
          ],
        },
      ],
    });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toEqual({
      partialSuccess: { rejectedSpans: 1, errorMessage: 'span 00f067aa0ba902b8: no provider (gen_ai.provider.name or gen_ai.system)' },
    });
    await eventually(async () => (await rowsOf(`${n.groupId}-partial`)).length === 1);
  });

  it('errors are a google.rpc.Status in the encoding of the request', async () => {
    const unreadable = await undiciRequest(`${gateway.url}/v1/otlp/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-protobuf', 'x-api-key': apiKey },
      body: Buffer.from([0x0a, 0xff, 0xff, 0xff]),
      dispatcher: new Agent({ connect: { ca } }),
    });
    expect(unreadable.statusCode).toBe(400);
    expect(unreadable.headers['content-type']).toMatch(/^application\/x-protobuf/);
    const bytes = Buffer.from(await unreadable.body.arrayBuffer());
    const statusType = loadOtlpRoot().lookupType(OTLP_TYPES.status);
    const status = statusType.toObject(statusType.decode(bytes));
    expect(status.code).toBe(3);
    expect(status.message).toMatch(/not a protobuf ExportTraceServiceRequest/);

    const noKey = await post({ resourceSpans: [] }, { 'x-api-key': 'otm_wrong' });
    expect(noKey.status).toBe(401);
    expect(noKey.body).toEqual({ code: 16, message: expect.any(String) });
  });
});

describe('OTLP/HTTP from the Python SDK', () => {
  it('opentelemetry-exporter-otlp-proto-http: records in ClickHouse with the mapped values, a retried export stored once, the plain span ignored', async (context) => {
    const python = await pythonWith(['examples/python-otlp/requirements.txt']);
    if (!python) return context.skip('python3 is not on the PATH: the Python OTLP example needs it');
    const runId = n.groupId;
    const args = [
      'examples/python-otlp/export_spans.py',
      ...['--endpoint', `${gateway.url}/v1/otlp`, '--api-key', apiKey, '--ca-file', (await testCertificate()).certFile],
      // The same spans twice, as a retrying exporter sends them.
      ...['--calls', '3', '--run-id', runId, '--exports', '2'],
    ];
    // requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override the exporter's certificate_file.
    const env = { REQUESTS_CA_BUNDLE: '', CURL_CA_BUNDLE: '' };
    const exported = JSON.parse(await runPython(python, args, { env })) as { traceIds: string[]; spanIds: string[]; ignoredSpanId: string };
    expect(exported.spanIds).toHaveLength(3);
    const rows = await eventually(async () => {
      const found = await rowsOf(`py-otlp-${runId}`);
      return found.length >= 3 && found;
    });
    expect(
      rows.map((row) => [row.model_id, row.provider, row.input_tokens, row.output_tokens, row.status, row.ttft_ms, row.latency_ms]),
    ).toEqual([
      ['gpt-4o-mini', 'openai', '100', '20', 'success', '150', '900'],
      ['gpt-4o-mini', 'openai', '101', '21', 'success', '150', '900'],
      ['gpt-4o-mini', 'openai', '102', '22', 'error', '150', '900'],
    ]);
    expect(rows.map((row) => JSON.parse(row.context)['otel.span_id']).sort()).toEqual([...exported.spanIds].sort());
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(await rowsOf(`py-otlp-${runId}`)).toHaveLength(3);
    expect(rows.some((row) => JSON.parse(row.context)['otel.span_id'] === exported.ignoredSpanId)).toBe(false);
  });
});
