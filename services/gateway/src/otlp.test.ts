// OTLP decoding and the span -> usage record mapping, without a server: protobuf through
// the official definitions (a request encoded here with the same definitions), OTLP/JSON
// with hex ids, and each mapping rule of docs/ingest-api.md.
import { describe, expect, it } from 'vitest';
import { decodeJson, loadOtlpCodec, loadOtlpRoot, OTLP_TYPES, OtlpDecodeError, rfc3339, usageFromSpan, type OtlpSpan } from './otlp.js';

const codec = loadOtlpCodec();
const TRACE = '5b8efff798038103d269b633813fc60c';
const SPAN = 'eee19b7ec3c1b174';
const START = 1_764_000_000_123_456_789n;

function jsonRequest(attributes: object[], extra: Record<string, unknown> = {}) {
  return {
    resourceSpans: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: 'checkout' } }] },
        scopeSpans: [
          {
            scope: { name: 'test' },
            spans: [
              {
                traceId: TRACE,
                spanId: SPAN,
                name: 'chat gpt-4o',
                startTimeUnixNano: String(START),
                endTimeUnixNano: String(START + 2_500_000_000n),
                attributes,
                ...extra,
              },
            ],
          },
        ],
      },
    ],
  };
}

const genAi = [
  { key: 'gen_ai.operation.name', value: { stringValue: 'chat' } },
  { key: 'gen_ai.provider.name', value: { stringValue: 'openai' } },
  { key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o' } },
  { key: 'gen_ai.response.model', value: { stringValue: 'gpt-4o-2024-08-06' } },
  { key: 'gen_ai.usage.input_tokens', value: { intValue: '1200' } },
  { key: 'gen_ai.usage.output_tokens', value: { intValue: 350 } },
  { key: 'gen_ai.usage.cache_read.input_tokens', value: { intValue: '1000' } },
  { key: 'gen_ai.usage.reasoning.output_tokens', value: { intValue: '100' } },
  { key: 'gen_ai.response.finish_reasons', value: { arrayValue: { values: [{ stringValue: 'stop' }] } } },
  { key: 'user.id', value: { stringValue: 'u_42' } },
];

const only = (spans: OtlpSpan[]) => {
  expect(spans).toHaveLength(1);
  return spans[0]!;
};

describe('decoding', () => {
  it('reads protobuf through the official definitions, ids and nanoseconds intact', () => {
    // Encoded with the same .proto files the gateway loads, as an exporter would.
    const type = loadOtlpRoot().lookupType(OTLP_TYPES.request);
    const request = jsonRequest(genAi);
    const span = request.resourceSpans[0]!.scopeSpans[0]!.spans[0]!;
    const message = type.fromObject({
      ...request,
      resourceSpans: [
        {
          ...request.resourceSpans[0],
          scopeSpans: [
            {
              spans: [
                { ...span, traceId: Buffer.from(TRACE, 'hex'), spanId: Buffer.from(SPAN, 'hex'), status: { code: 2, message: 'boom' } },
              ],
            },
          ],
        },
      ],
    });
    const decoded = only(codec.decodeProtobuf(Buffer.from(type.encode(message).finish())));
    expect(decoded).toMatchObject({
      traceId: TRACE,
      spanId: SPAN,
      startNs: START,
      endNs: START + 2_500_000_000n,
      statusCode: 2,
      statusMessage: 'boom',
    });
    expect(decoded.attributes.get('gen_ai.usage.input_tokens')).toBe(1200);
    expect(decoded.attributes.get('gen_ai.response.finish_reasons')).toEqual(['stop']);
    expect(decoded.resource.get('service.name')).toBe('checkout');
  });

  it('reads OTLP/JSON with hex ids and string or number integers', () => {
    const decoded = only(decodeJson(jsonRequest(genAi)));
    expect(decoded.traceId).toBe(TRACE);
    expect(decoded.attributes.get('gen_ai.usage.output_tokens')).toBe(350);
  });

  it('refuses what is not OTLP, with a reason', () => {
    expect(() => codec.decodeProtobuf(Buffer.from([0x0a, 0xff, 0xff]))).toThrow(OtlpDecodeError);
    expect(() => decodeJson([])).toThrow(OtlpDecodeError);
    expect(() => decodeJson({ resourceSpans: {} })).toThrow(/resourceSpans must be an array/);
    const badId = jsonRequest(genAi);
    badId.resourceSpans[0]!.scopeSpans[0]!.spans[0]!.spanId = 'xyz';
    expect(() => decodeJson(badId)).toThrow(/spanId must be 8 bytes/);
    const zeroTrace = jsonRequest(genAi);
    zeroTrace.resourceSpans[0]!.scopeSpans[0]!.spans[0]!.traceId = '0'.repeat(32);
    expect(() => decodeJson(zeroTrace)).toThrow(/traceId/);
  });
});

describe('a GenAI span as a usage record', () => {
  it('maps model, provider, tokens, timing, user and context', () => {
    const outcome = usageFromSpan(only(decodeJson(jsonRequest(genAi))));
    expect(outcome).toEqual({
      kind: 'record',
      idempotencyKey: `otlp:${TRACE}:${SPAN}`,
      record: {
        request: { modelId: 'gpt-4o-2024-08-06', provider: 'openai', status: 'success' },
        user: { id: 'u_42', type: 'external' },
        tokens: { input: 1200, output: 350, cachedInput: 1000, reasoning: 100 },
        timing: {
          startTime: '2025-11-24T16:00:00.123456789Z',
          firstTokenTime: '2025-11-24T16:00:02.623456789Z',
          lastTokenTime: '2025-11-24T16:00:02.623456789Z',
          latencyMs: 2500,
        },
        io: {},
        context: {
          'otel.trace_id': TRACE,
          'otel.span_id': SPAN,
          'otel.span_name': 'chat gpt-4o',
          'service.name': 'checkout',
          'gen_ai.operation.name': 'chat',
          'gen_ai.response.finish_reasons': ['stop'],
        },
      },
    });
  });

  it('takes the first token from its event, the older attribute names, and the service as the user when there is none', () => {
    const attributes = [
      { key: 'gen_ai.system', value: { stringValue: 'anthropic' } },
      { key: 'gen_ai.request.model', value: { stringValue: 'claude-sonnet-4' } },
      { key: 'gen_ai.usage.prompt_tokens', value: { intValue: '10' } },
      { key: 'gen_ai.usage.completion_tokens', value: { intValue: '20' } },
      { key: 'gen_ai.usage.cache_creation_input_tokens', value: { intValue: '5' } },
    ];
    const events = [{ name: 'gen_ai.first_token', timeUnixNano: String(START + 400_000_000n) }];
    const outcome = usageFromSpan(only(decodeJson(jsonRequest(attributes, { events }))));
    expect(outcome.kind).toBe('record');
    const record = (outcome as { record: Record<string, any> }).record;
    expect(record.request).toEqual({ modelId: 'claude-sonnet-4', provider: 'anthropic', status: 'success' });
    expect(record.user).toEqual({ id: 'checkout', type: 'internal' });
    expect(record.tokens).toEqual({ input: 10, output: 20, cacheWrite: 5 });
    expect(record.timing.firstTokenTime).toBe('2025-11-24T16:00:00.523456789Z');
  });

  it('is an error when the span status says so or error.type is set', () => {
    const failed = usageFromSpan(
      only(
        decodeJson(
          jsonRequest([...genAi, { key: 'error.type', value: { stringValue: 'rate_limit_exceeded' } }], {
            status: { code: 2, message: 'HTTP 429' },
          }),
        ),
      ),
    );
    expect((failed as { record: Record<string, any> }).record.request.status).toBe('error');
    expect((failed as { record: Record<string, any> }).record.error).toEqual({ code: 'rate_limit_exceeded', message: 'HTTP 429' });
    const statusOnly = usageFromSpan(only(decodeJson(jsonRequest(genAi, { status: { code: 'STATUS_CODE_ERROR' } }))));
    expect((statusOnly as { record: Record<string, any> }).record.error).toEqual({ code: 'error', message: 'error' });
  });

  it('keeps prompt and response from the conventions, structured values as JSON', () => {
    const messages = [{ role: 'user', parts: [{ type: 'text', content: 'Hi' }] }];
    const outcome = usageFromSpan(
      only(
        decodeJson(
          jsonRequest([
            ...genAi,
            { key: 'gen_ai.input.messages', value: { stringValue: JSON.stringify(messages) } },
            { key: 'gen_ai.output.messages', value: { stringValue: '[{"role":"assistant"}]' } },
          ]),
        ),
      ),
    );
    expect((outcome as { record: Record<string, any> }).record.io).toEqual({
      prompt: JSON.stringify(messages),
      response: '[{"role":"assistant"}]',
    });
  });

  it('ignores a span without gen_ai attributes and refuses a GenAI span without model or provider', () => {
    expect(usageFromSpan(only(decodeJson(jsonRequest([{ key: 'http.method', value: { stringValue: 'GET' } }]))))).toEqual({
      kind: 'ignored',
    });
    const noModel = usageFromSpan(only(decodeJson(jsonRequest([{ key: 'gen_ai.provider.name', value: { stringValue: 'openai' } }]))));
    expect(noModel).toEqual({ kind: 'refused', reason: `span ${SPAN}: no model (gen_ai.response.model or gen_ai.request.model)` });
    const noProvider = usageFromSpan(only(decodeJson(jsonRequest([{ key: 'gen_ai.request.model', value: { stringValue: 'm' } }]))));
    expect(noProvider.kind).toBe('refused');
    const model = [
      { key: 'gen_ai.provider.name', value: { stringValue: 'openai' } },
      { key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o' } },
    ];
    // A successful call must say what it used; a failed one need not.
    expect(usageFromSpan(only(decodeJson(jsonRequest(model))))).toEqual({
      kind: 'refused',
      reason: `span ${SPAN}: no token usage (gen_ai.usage.input_tokens or gen_ai.usage.output_tokens)`,
    });
    expect(usageFromSpan(only(decodeJson(jsonRequest(model, { status: { code: 2 } })))).kind).toBe('record');
  });

  it('writes nanosecond timestamps as RFC 3339', () => {
    expect(rfc3339(0n)).toBe('1970-01-01T00:00:00.000000000Z');
    expect(rfc3339(1_700_000_000_000_000_001n)).toBe('2023-11-14T22:13:20.000000001Z');
  });
});
