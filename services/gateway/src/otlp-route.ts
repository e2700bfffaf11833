// POST /v1/otlp/v1/traces: OTLP/HTTP trace exports (protobuf or JSON, gzip or not),
// with the ingest key in X-API-Key or Authorization: Bearer. Each GenAI span becomes a
// usage record through the one intake (intake.ts: schema, bounds, capture policy,
// replay, enqueue), keyed by trace and span id so an exporter's retry stores nothing
// twice (the same span twice in one export is one record); spans without GenAI attributes are ignored and counted. Answers follow the
// OTLP specification: 200 with an ExportTraceServiceResponse (partial_success when
// spans were rejected), 503/429 with Retry-After for what an exporter should retry,
// and every error body a google.rpc.Status in the request's encoding.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorCatalog, refuse } from '@otm/shared/errors';
import { registerJsonParser } from '@otm/shared/http-edge';
import { CAPTURE_HEADER } from './capture.js';
import { ingestRoutes } from './ingest-routes.js';
import type { GatewayMetrics } from './metrics.js';
import { countRecords } from './record-count.js';
import { countJson, countProtobuf, decodeJson, type OtlpCodec, type OtlpSpan } from './otlp.js';
import { ingestSpans, readable, summary } from './otlp-spans.js';
import type { RecordQueue } from './produce-batcher.js';
import type { IntakeContext } from './record-intake.js';

export interface OtlpRouteDeps {
  codec: OtlpCodec;
  batcher: RecordQueue;
  metrics: GatewayMetrics;
  authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  rateLimited(request: FastifyRequest, reply: FastifyReply, records: number): Promise<void>;
  intakeContext(request: FastifyRequest, receivedAt: Date): IntakeContext;
  /** At most this many spans (GenAI or not) and attributes per request, and this many bytes after decompression. */
  maxSpans: number;
  maxAttributes: number;
  maxBytes: number;
}

const PROTOBUF = 'application/x-protobuf';

/** OTLP/JSON nests resource, scope, span, attribute and value objects: deeper than a usage record. */
const OTLP_JSON_MAX_DEPTH = 48;

interface Decoded {
  spans: OtlpSpan[];
  protobuf: boolean;
}

export function registerOtlpRoute(app: FastifyInstance, deps: OtlpRouteDeps): void {
  const route = ingestRoutes.otlpTraces;
  void app.register(async (scope) => {
    registerJsonParser(scope, OTLP_JSON_MAX_DEPTH);
    scope.addContentTypeParser(PROTOBUF, { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    const isProtobuf = (request: FastifyRequest) =>
      (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() === PROTOBUF;

    // Every error answer of this route (from the shared edge, as JSON) becomes a
    // google.rpc.Status in the encoding the exporter sent.
    scope.addHook('onSend', async (request, reply, payload) => {
      if (reply.statusCode < 400 || typeof payload !== 'string') return payload;
      let answer: { message?: unknown; errorType?: unknown };
      try {
        answer = JSON.parse(payload) as typeof answer;
      } catch {
        return payload;
      }
      // The gRPC code of the answer's error type (errorCatalog); 2 (UNKNOWN) for anything else.
      const entry =
        typeof answer.errorType === 'string' ? (errorCatalog as Record<string, { grpcCode: number }>)[answer.errorType] : undefined;
      const status = { code: entry?.grpcCode ?? 2, message: String(answer.message ?? '') };
      if (isProtobuf(request)) {
        reply.type(PROTOBUF);
        return Buffer.from(deps.codec.encodeStatus(status));
      }
      reply.type('application/json');
      return JSON.stringify(status);
    });

    scope.post(
      route.url,
      {
        bodyLimit: deps.maxBytes,
        onRequest: deps.authenticate,
        preHandler: async (request, reply) => {
          // Every span and attribute is counted before anything is decoded or mapped, and
          // every span, GenAI or not, counts toward the limit and the key's rate.
          const protobuf = isProtobuf(request);
          const count = readable(() => (protobuf ? countProtobuf(request.body as Buffer) : countJson(request.body)));
          if (count.spans > deps.maxSpans) {
            throw refuse('exportTooManySpans', { max: deps.maxSpans, count: count.spans });
          }
          if (count.attributes > deps.maxAttributes) {
            throw refuse('exportTooManyAttributes', { max: deps.maxAttributes, count: count.attributes });
          }
          await deps.rateLimited(request, reply, Math.max(1, count.spans));
          (request as FastifyRequest & { otlp?: Decoded }).otlp = {
            spans: readable(() => (protobuf ? deps.codec.decodeProtobuf(request.body as Buffer) : decodeJson(request.body))),
            protobuf,
          };
        },
      },
      async (request, reply) => {
        const { spans, protobuf } = (request as FastifyRequest & { otlp: Decoded }).otlp;
        const context = deps.intakeContext(request, new Date());
        reply.header(CAPTURE_HEADER, context.capture);
        const outcome = await ingestSpans(spans, context, deps);
        deps.metrics.otlpSpans.inc({ outcome: 'accepted' }, outcome.accepted);
        deps.metrics.otlpSpans.inc({ outcome: 'rejected' }, outcome.rejected.length);
        deps.metrics.otlpSpans.inc({ outcome: 'ignored' }, outcome.ignored);
        countRecords(deps.metrics, 'otlp', outcome.tally);
        if (outcome.unavailable) {
          // The exporter retries the whole export; what was queued is keyed by span and stored once.
          throw refuse('queueUnavailableExport');
        }
        const partialSuccess =
          outcome.rejected.length > 0 ? { rejectedSpans: outcome.rejected.length, errorMessage: summary(outcome.rejected) } : undefined;
        const body = partialSuccess ? { partialSuccess } : {};
        if (protobuf)
          return reply
            .code(200)
            .type(PROTOBUF)
            .send(Buffer.from(deps.codec.encodeResponse(body)));
        return reply.code(200).type('application/json').send(body);
      },
    );
  });
}
