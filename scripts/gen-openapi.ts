// Generates the OpenAPI 3.1 document of the HTTP API from what the services run: the
// usage record's JSON Schema (schemas/), the gateway's ingest routes as data
// (ingest-routes.ts), the analytics routes as data (analytics-routes.ts) and the
// error catalog. Writes schemas/openapi.json (served by the gateway at GET
// /openapi.json) and docs/api.md (its rendering). `--check` fails when either is stale.
import fs from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { format, resolveConfig } from 'prettier';
import { usageRecordSchema } from '@otm/schemas';
import { errorCatalog, refusals, type ErrorType } from '@otm/shared/errors';
import { messageTemplate } from './lib/refusal-text.js';
import { errorBodySchema, ingestRoutes, type RouteDoc } from '../services/gateway/src/ingest-routes.js';
import { analyticsAnswerSchema, analyticsRoutes } from '../services/admin/src/analytics-routes.js';
import { pipelineAnswerSchema, pipelineRoute } from '../services/admin/src/pipeline-routes.js';
import { adminRouteDocs, type AdminRouteDoc } from '../services/admin/src/admin-route-docs.js';
import { loadGatewayConfig } from '../services/gateway/src/config.js';
import { projectRoot as root } from './lib/project-root.js';

const { check } = new Command('gen:openapi')
  .description('Write schemas/openapi.json and docs/api.md from the routes, the schemas and the error catalog')
  .option('--check', 'write nothing; exit 1 when either file is stale')
  .parse(process.argv)
  .opts<{ check?: boolean }>();

type Json = Record<string, unknown>;

/** The usage record's definitions become components; its `#/definitions/x` refs follow them. */
function usageRecordComponents(): Record<string, Json> {
  const { $schema, $id, definitions, ...record } = usageRecordSchema as unknown as Json & { definitions: Record<string, Json> };
  void [$schema, $id];
  const retarget = (schema: unknown): Json =>
    JSON.parse(
      JSON.stringify(schema).replace(/"#\/definitions\/(\w+)"/g, (_match, name: string) => `"#/components/schemas/${pascal(name)}"`),
    );
  const usageRecord = retarget(record);
  const properties = usageRecord.properties as Json;
  return {
    ...Object.fromEntries(Object.entries(definitions).map(([name, schema]) => [pascal(name), retarget(schema)])),
    UsageRecord: usageRecord,
    // A batch item: the record's members plus its own idempotency key (removed before validation).
    UsageRecordBatchItem: {
      ...usageRecord,
      title: 'UsageRecordBatchItem',
      description: 'A usage record, optionally with its own idempotencyKey (the only extra member allowed in a batch item).',
      properties: {
        ...properties,
        idempotencyKey: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7E]+$' },
      },
    },
    ErrorBody: errorBodySchema as unknown as Json,
    OtlpStatus: {
      type: 'object',
      description: 'google.rpc.Status: the error body of the OTLP route, in the encoding of the request (protobuf or JSON)',
      required: ['code', 'message'],
      properties: { code: { type: 'integer', description: 'gRPC status code' }, message: { type: 'string' } },
    },
  };
}

const pascal = (name: string) => name[0]!.toUpperCase() + name.slice(1);

const reasonOf: Record<number, string> = {
  400: 'Bad request',
  401: 'Unauthorized',
  404: 'Not found',
  408: 'Request timeout',
  413: 'Payload too large',
  415: 'Unsupported media type',
  422: 'Unprocessable',
  429: 'Too many requests',
  500: 'Internal error',
  503: 'Unavailable',
  504: 'Query timeout',
};

/** Error answers by status, each naming the errorTypes it carries. */
function errorResponses(errors: readonly ErrorType[], body = 'ErrorBody'): Record<string, Json> {
  const byStatus = new Map<number, ErrorType[]>();
  for (const errorType of [...errors, 'InternalError' as const]) {
    const status = errorCatalog[errorType].statusCode;
    byStatus.set(status, [...(byStatus.get(status) ?? []), errorType]);
  }
  const retryAfter = { 'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } } };
  return Object.fromEntries(
    [...byStatus.entries()]
      .sort(([a], [b]) => a - b)
      .map(([status, types]) => [
        String(status),
        {
          description: `${reasonOf[status] ?? 'Error'}: errorType ${types.map((type) => `\`${type}\``).join(', ')}`,
          ...(status === 429 || status === 503 ? { headers: retryAfter } : {}),
          content: {
            'application/json': { schema: { $ref: `#/components/schemas/${body}` } },
            ...(body === 'OtlpStatus' ? { 'application/x-protobuf': { schema: { type: 'string', format: 'binary' } } } : {}),
          },
        },
      ]),
  );
}

function ingestOperation(route: RouteDoc): Json {
  const body =
    route.requestBody?.body === 'usageRecordBatch'
      ? {
          type: 'array',
          minItems: 1,
          maxItems: gatewayDefaults.BATCH_MAX_RECORDS,
          items: { $ref: '#/components/schemas/UsageRecordBatchItem' },
        }
      : { $ref: '#/components/schemas/UsageRecord' };
  const otlp = route.requestBody?.body === 'otlpTraces';
  const content = Object.fromEntries(
    (route.requestBody?.mediaTypes ?? []).map((mediaType) => [
      mediaType,
      mediaType === 'application/x-ndjson'
        ? { schema: { type: 'string', description: 'One UsageRecordBatchItem per line; blank lines are skipped' } }
        : mediaType === 'application/x-protobuf'
          ? {
              schema: { type: 'string', format: 'binary', description: 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest' },
            }
          : otlp
            ? {
                schema: {
                  type: 'object',
                  description: 'ExportTraceServiceRequest in the OTLP/JSON mapping (trace and span ids in hex)',
                  properties: { resourceSpans: { type: 'array', items: { type: 'object' } } },
                },
              }
            : { schema: body },
    ]),
  );
  const answerTypes = otlp ? ['application/json', 'application/x-protobuf'] : ['application/json'];
  return {
    summary: route.summary,
    description: route.description,
    operationId: route === ingestRoutes.batch ? 'ingestUsageBatch' : otlp ? 'ingestOtlpTraces' : 'ingestUsage',
    tags: ['ingest'],
    security: [{ apiKeyHeader: [] }, { apiKeyBearer: [] }],
    parameters: (route.headers ?? []).map((header) => ({
      name: header.name,
      in: 'header',
      required: header.required,
      description: header.description,
      schema: { type: 'string' },
    })),
    requestBody: { required: true, content },
    responses: {
      ...Object.fromEntries(
        Object.entries(route.responses).map(([status, answer]) => [
          status,
          {
            description: answer.description,
            content: Object.fromEntries(
              answerTypes.map((type) => [
                type,
                type === 'application/x-protobuf' ? { schema: { type: 'string', format: 'binary' } } : { schema: answer.schema },
              ]),
            ),
          },
        ]),
      ),
      ...errorResponses(route.errors, otlp ? 'OtlpStatus' : 'ErrorBody'),
    },
  };
}

const parameterDescriptions: Record<string, string> = {
  from: 'Start, RFC 3339 (default: `to` minus `since`)',
  to: 'End, RFC 3339 (default: now)',
  since: 'Window ending at `to`, e.g. 15m, 24h, 7d (default 24h)',
  bucket: 'Time bucket of the rows',
  groupBy: 'Comma-separated dimensions',
  limit: 'Rows at most',
  orderBy: 'Sort rows by this measure, descending',
};

function analyticsOperation(route: (typeof analyticsRoutes)[number]): Json {
  const properties = route.querystring.properties as Record<string, Json>;
  return {
    summary: route.summary,
    operationId: `${route.name}Analytics`,
    tags: ['analytics'],
    servers: ADMIN_SERVER,
    security: [{ adminToken: [] }],
    parameters: Object.entries(properties).map(([name, schema]) => ({
      name,
      in: 'query',
      required: false,
      description: parameterDescriptions[name] ?? (name === 'groupBy' ? undefined : `Only rows with this ${name}`),
      schema,
    })),
    responses: {
      200: { description: 'Rows of the rollup', content: { 'application/json': { schema: analyticsAnswerSchema } } },
      ...errorResponses(['ValidationError', 'AuthError', 'Unavailable', 'QueryTimeout']),
    },
  };
}

const ADMIN_SERVER = [{ url: 'http://127.0.0.1:8480', description: 'the admin service, local default' }];

/** `/v1/keys/:id` as OpenAPI writes it: `/v1/keys/{id}`. */
export const openApiPath = (url: string) => url.replace(/:(\w+)/g, '{$1}');

/** Parameters of an object schema (path or query). */
function parametersOf(schema: object | undefined, where: 'path' | 'query'): Json[] {
  const properties = ((schema as Json | undefined)?.properties ?? {}) as Record<string, Json>;
  const required = new Set(((schema as Json | undefined)?.required as string[] | undefined) ?? []);
  return Object.entries(properties).map(([name, property]) => {
    const { description, ...rest } = property;
    return { name, in: where, required: where === 'path' || required.has(name), ...(description ? { description } : {}), schema: rest };
  });
}

function adminOperation(route: AdminRouteDoc): Json {
  const pathNames = [...route.url.matchAll(/:(\w+)/g)].map((match) => match[1]!);
  const declared = parametersOf(route.params, 'path');
  const pathParameters = pathNames.map(
    (name) => declared.find((parameter) => parameter.name === name) ?? { name, in: 'path', required: true, schema: { type: 'string' } },
  );
  return {
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    operationId: route.operationId,
    tags: ['admin'],
    servers: ADMIN_SERVER,
    security: [{ adminToken: [] }],
    parameters: [...pathParameters, ...parametersOf(route.querystring, 'query')],
    ...(route.body ? { requestBody: { required: true, content: { 'application/json': { schema: route.body } } } } : {}),
    responses: {
      ...Object.fromEntries(
        Object.entries(route.answers).map(([status, answer]) => [
          status,
          { description: answer.description, ...(answer.schema ? { content: { 'application/json': { schema: answer.schema } } } : {}) },
        ]),
      ),
      ...errorResponses(route.errors),
    },
  };
}

/** The admin routes grouped by path, as OpenAPI's `paths` holds them. */
function adminPaths(): Record<string, Json> {
  const paths: Record<string, Json> = {};
  for (const route of adminRouteDocs) {
    const at = openApiPath(route.url);
    paths[at] = { ...(paths[at] ?? {}), [route.method]: adminOperation(route) };
  }
  return paths;
}

const gatewayDefaults = loadGatewayConfig({ GATEWAY_PLAIN_HTTP: 'true' });

export function buildOpenApiDocument(): Json {
  const probe = { 200: { description: 'Up', content: { 'application/json': { schema: { type: 'object' } } } } };
  return {
    openapi: '3.1.0',
    info: {
      title: 'otm-telemetry',
      // One version for the project: the root package's (docs/versioning.md).
      version: (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version,
      description:
        'Ingestion of LLM usage records (one per call) and analytics over them. A record answered 202 is durably on Kafka (acks=all) and is stored once, whatever retries happen. Every error answer has the ErrorBody shape, except on the OTLP route, which answers a google.rpc.Status as the OTLP specification asks.',
    },
    servers: [{ url: 'https://127.0.0.1:8443', description: 'the gateway, local default' }],
    tags: [
      { name: 'ingest', description: 'The gateway: authenticated with an ingest key' },
      { name: 'analytics', description: 'The admin service: authenticated with the admin token' },
      {
        name: 'admin',
        description: 'The admin service: keys, capture policies, the audit log, erasure; authenticated with the admin token',
      },
      { name: 'operations', description: 'Health and this document' },
    ],
    paths: {
      [ingestRoutes.single.url]: { post: ingestOperation(ingestRoutes.single) },
      [ingestRoutes.batch.url]: { post: ingestOperation(ingestRoutes.batch) },
      [ingestRoutes.otlpTraces.url]: { post: ingestOperation(ingestRoutes.otlpTraces) },
      ...Object.fromEntries(analyticsRoutes.map((route) => [route.url, { get: analyticsOperation(route) }])),
      [pipelineRoute.url]: {
        get: {
          summary: pipelineRoute.summary,
          operationId: 'pipeline',
          tags: ['analytics'],
          servers: ADMIN_SERVER,
          security: [{ adminToken: [] }],
          responses: {
            200: { description: 'The lag as Kafka reports it', content: { 'application/json': { schema: pipelineAnswerSchema } } },
            ...errorResponses(['AuthError', 'Unavailable']),
          },
        },
      },
      ...adminPaths(),
      '/openapi.json': {
        get: { summary: 'This document', operationId: 'openApi', tags: ['operations'], security: [], responses: probe },
      },
      '/healthz': { get: { summary: 'Liveness', operationId: 'healthz', tags: ['operations'], security: [], responses: probe } },
      '/readyz': {
        get: {
          summary: 'Readiness: Kafka and the registry reachable (not Redis: known keys are answered from the key cache while it is away)',
          operationId: 'readyz',
          tags: ['operations'],
          security: [],
          responses: { ...probe, 503: { description: 'A dependency is unreachable', content: probe[200].content } },
        },
      },
    },
    components: {
      schemas: usageRecordComponents(),
      securitySchemes: {
        apiKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'otm_<env>_<secret>' },
        apiKeyBearer: { type: 'http', scheme: 'bearer', description: 'The same ingest key as a bearer token' },
        adminToken: { type: 'http', scheme: 'bearer', description: 'The admin token' },
      },
    },
  };
}

/** Members of an object schema (and of the objects in its arrays) as table rows. */
function propertiesTable(schema: Json, prefix = ''): string[] {
  const rows = prefix ? [] : ['| member | type | description |', '| --- | --- | --- |'];
  for (const [name, member] of Object.entries((schema.properties as Record<string, Json> | undefined) ?? {})) {
    const type = member.enum ? (member.enum as unknown[]).join(' \\| ') : String(member.type ?? '');
    rows.push(`| \`${prefix}${name}\` | ${type} | ${((member.description as string | undefined) ?? '').replaceAll('|', '\\|')} |`);
    if (member.type === 'object') rows.push(...propertiesTable(member, `${prefix}${name}.`));
    const items = member.items as Json | undefined;
    if (member.type === 'array' && items?.type === 'object') rows.push(...propertiesTable(items, `${prefix}${name}[].`));
  }
  return rows;
}

/** docs/api.md: the document as a page a person reads. */
function renderMarkdown(document: Json): string {
  const lines = [
    '# HTTP API',
    '',
    '<!-- Generated by `npm run gen:openapi` from schemas/openapi.json. Do not edit. -->',
    '',
    `The OpenAPI 3.1 document is \`schemas/openapi.json\`, served by the gateway at \`GET /openapi.json\`; this page renders it. ${(document.info as Json).description as string}`,
    '',
  ];
  for (const [url, operations] of Object.entries(document.paths as Record<string, Record<string, Json>>)) {
    for (const [method, operation] of Object.entries(operations)) {
      lines.push(`## ${method.toUpperCase()} ${url}`, '', `**${operation.summary as string}**`, '');
      const servers = (operation.servers ?? document.servers) as { url: string; description: string }[];
      lines.push(`Server: ${servers.map((server) => `\`${server.url}\` (${server.description})`).join(', ')}.`, '');
      if (operation.description) lines.push(operation.description as string, '');
      const parameters = (operation.parameters as Json[] | undefined) ?? [];
      if (parameters.length > 0) {
        lines.push('| parameter | in | description |', '| --- | --- | --- |');
        for (const parameter of parameters) {
          const schema = parameter.schema as Json;
          const allowed = schema.enum ? ` One of: ${(schema.enum as string[]).join(', ')}.` : '';
          lines.push(
            `| \`${parameter.name as string}\` | ${parameter.in as string} | ${(parameter.description as string | undefined) ?? ''}${allowed} |`,
          );
        }
        lines.push('');
      }
      const body = (operation.requestBody as Json | undefined)?.content as Json | undefined;
      if (body) {
        lines.push(
          `Request body: ${Object.keys(body)
            .map((type) => `\`${type}\``)
            .join(' or ')}.`,
          '',
        );
        const schema = (body['application/json'] as Json | undefined)?.schema as Json | undefined;
        // The admin bodies are small: their members shown (the usage record has its own pages).
        if (schema?.properties && !schema.title) lines.push(...propertiesTable(schema), '');
      }
      lines.push('| status | answer |', '| --- | --- |');
      const bodies = new Map<string, Json>();
      for (const [status, answer] of Object.entries(operation.responses as Record<string, Json>)) {
        lines.push(`| ${status} | ${answer.description as string} |`);
        const schema = ((answer.content as Json | undefined)?.['application/json'] as Json | undefined)?.schema as Json | undefined;
        if (status.startsWith('2') && schema?.properties) bodies.set(status, schema);
      }
      lines.push('');
      // Bodies shared by several statuses are shown once.
      const shown = new Set<string>();
      for (const schema of bodies.values()) {
        const key = JSON.stringify(schema);
        if (shown.has(key)) continue;
        shown.add(key);
        const statuses = [...bodies].filter(([, other]) => JSON.stringify(other) === key).map(([code]) => code);
        lines.push(`Body of ${statuses.join(' and ')}:`, '', ...propertiesTable(schema), '');
      }
    }
  }
  lines.push(
    '## Error body',
    '',
    'Every error answer has this shape (the OTLP route excepted: it answers a google.rpc.Status); a 400 or 503 of the batch endpoint adds `results`, one entry per item as in a 207:',
    '',
    '```json',
    '{ "statusCode": 400, "errorType": "ValidationError", "message": "…", "errors": [ { "path": "/tokens/input", "message": "must be integer" } ] }',
    '```',
    '',
    '| errorType | status | retry? | gRPC code (OTLP) |',
    '| --- | --- | --- | --- |',
    ...Object.entries(errorCatalog).map(
      ([type, entry]) => `| \`${type}\` | ${entry.statusCode} | ${entry.retriable ? 'yes' : 'no'} | ${entry.grpcCode} |`,
    ),
    '',
    'Every refusal the services answer, by name (`refusals` in services/shared/src/errors.ts, the only place a message is written; `{…}` is filled in from the request or the limit):',
    '',
    '| refusal | errorType | message |',
    '| --- | --- | --- |',
    ...Object.entries(refusals).map(
      ([name, refusal]) => `| \`${name}\` | \`${refusal.errorType}\` | ${messageTemplate(refusal.message)} |`,
    ),
    '',
  );
  return lines.join('\n');
}

const document = buildOpenApiDocument();
// Formatted as `prettier --check` expects them.
const formatted = async (file: string, text: string) =>
  format(text, { ...(await resolveConfig(path.join(root, file))), filepath: path.join(root, file) });
const outputs: Record<string, string> = {
  'schemas/openapi.json': await formatted('schemas/openapi.json', JSON.stringify(document)),
  'docs/api.md': await formatted('docs/api.md', renderMarkdown(document)),
};
let stale = false;
for (const [file, content] of Object.entries(outputs)) {
  const target = path.join(root, file);
  if (fs.existsSync(target) && fs.readFileSync(target, 'utf8') === content) continue;
  if (check) {
    console.error(`${file} is stale: run npm run gen:openapi`);
    stale = true;
  } else {
    fs.writeFileSync(target, content);
    console.log(`wrote ${file}`);
  }
}
process.exitCode = stale ? 1 : 0;
