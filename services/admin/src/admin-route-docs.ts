// The admin API's routes as data: what each takes and answers, for the OpenAPI document
// (scripts/gen-openapi.ts) and for the routes themselves, which validate their bodies,
// parameters and query strings with these same schemas (keys-routes.ts, erasure.ts).
import { CAPTURE_POLICIES, ENVIRONMENTS } from '@otm/schemas';
import type { ErrorType } from '@otm/shared/errors';

export const keyCreateBody = {
  type: 'object',
  additionalProperties: false,
  required: ['environment', 'name'],
  properties: {
    environment: { type: 'string', enum: [...ENVIRONMENTS], description: 'The environment the key writes to' },
    name: { type: 'string', minLength: 1, maxLength: 200, description: 'Shown to operators; no control characters or bidi overrides' },
    description: { type: 'string', maxLength: 1000 },
    capture: { type: 'string', enum: [...CAPTURE_POLICIES], description: "The key's capture policy (default full)" },
  },
} as const;

export const captureBody = {
  type: 'object',
  additionalProperties: false,
  required: ['capture'],
  properties: { capture: { type: 'string', enum: [...CAPTURE_POLICIES] } },
} as const;

export const environmentParams = {
  type: 'object',
  properties: { environment: { type: 'string', enum: [...ENVIRONMENTS] } },
} as const;

export const auditQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { limit: { type: 'integer', minimum: 1, maximum: 1000, description: 'Entries at most, newest first (default 100)' } },
} as const;

export const erasureParams = {
  type: 'object',
  properties: { userId: { type: 'string', minLength: 1, maxLength: 1024 } },
} as const;

export const erasureQuery = {
  type: 'object',
  additionalProperties: false,
  required: ['environment'],
  properties: { environment: { type: 'string', enum: [...ENVIRONMENTS], description: "The environment of the user's records" } },
} as const;

const keyView = {
  type: 'object',
  required: ['id', 'name', 'environment', 'createdAt', 'capture'],
  properties: {
    id: { type: 'string', description: 'The key id (not the secret)' },
    name: { type: 'string' },
    environment: { type: 'string', enum: [...ENVIRONMENTS] },
    description: { type: 'string' },
    createdAt: { type: 'string', format: 'date-time' },
    capture: { type: 'string', enum: [...CAPTURE_POLICIES] },
  },
} as const;

const environmentCaptures = {
  type: 'object',
  required: ['environments'],
  properties: {
    environments: {
      type: 'object',
      description: "Each environment's capture policy",
      additionalProperties: { type: 'string', enum: [...CAPTURE_POLICIES] },
    },
  },
} as const;

/** Records to remove from history: by event key, by request id, or both (1,000 of each at most). */
export const removalBody = {
  type: 'object',
  additionalProperties: false,
  required: ['reason'],
  properties: {
    eventKeys: { type: 'array', maxItems: 1000, items: { type: 'string', minLength: 1, maxLength: 1024 } },
    requestIds: { type: 'array', maxItems: 1000, items: { type: 'string', minLength: 1, maxLength: 1024 } },
    reason: { type: 'string', minLength: 1, maxLength: 1024, description: 'Why the records go (kept in the audit log)' },
  },
  anyOf: [
    { required: ['eventKeys'], properties: { eventKeys: { type: 'array', minItems: 1 } } },
    { required: ['requestIds'], properties: { requestIds: { type: 'array', minItems: 1 } } },
  ],
} as const;

const removalJob = {
  type: 'object',
  required: ['id', 'state', 'eventKeys', 'requestIds', 'reason', 'requestedAt'],
  properties: {
    id: { type: 'string' },
    state: { type: 'string', enum: ['running', 'done', 'failed'] },
    eventKeys: { type: 'array', items: { type: 'string' } },
    requestIds: { type: 'array', items: { type: 'string' } },
    reason: { type: 'string' },
    requestedAt: { type: 'string', format: 'date-time' },
    finishedAt: { type: 'string', format: 'date-time' },
    records: { type: 'integer', description: 'Records found and removed (0 when none is left: asking again is harmless)' },
    removed: { type: 'object', properties: { events: { type: 'integer' }, io: { type: 'integer' } } },
    error: { type: 'string' },
    statusUrl: { type: 'string', description: 'Where to follow the job (in the 202 answer)' },
  },
} as const;

const erasureJob = {
  type: 'object',
  required: ['id', 'environment', 'userId', 'state', 'step', 'requestedAt'],
  properties: {
    id: { type: 'string' },
    environment: { type: 'string', enum: [...ENVIRONMENTS] },
    userId: { type: 'string' },
    state: { type: 'string', enum: ['running', 'done', 'failed'] },
    step: { type: 'string', description: 'What the job is doing, or did last' },
    requestedAt: { type: 'string', format: 'date-time' },
    erasedAt: { type: 'string', format: 'date-time', description: 'Records of the user received at or before it are erased' },
    finishedAt: { type: 'string', format: 'date-time' },
    removed: {
      type: 'object',
      properties: { events: { type: 'integer' }, io: { type: 'integer' }, errorRollupKeys: { type: 'integer' } },
    },
    error: { type: 'string' },
    statusUrl: { type: 'string', description: 'Where to follow the job (in the 202 answer)' },
  },
} as const;

export interface AdminRouteDoc {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Fastify's form: parameters as `:name`. */
  url: string;
  operationId: string;
  summary: string;
  description?: string;
  params?: object;
  querystring?: object;
  body?: object;
  /** Status -> what it means, and the body's schema. */
  answers: Record<number, { description: string; schema?: object }>;
  errors: ErrorType[];
}

/** Every route of the admin service besides analytics and the pipeline, which have their own. */
export const adminRouteDocs: AdminRouteDoc[] = [
  {
    method: 'get',
    url: '/v1/keys',
    operationId: 'listKeys',
    summary: 'The ingest keys (never their secrets)',
    answers: {
      200: {
        description: 'The keys',
        schema: { type: 'object', required: ['keys'], properties: { keys: { type: 'array', items: keyView } } },
      },
    },
    errors: ['AuthError', 'Unavailable'],
  },
  {
    method: 'post',
    url: '/v1/keys',
    operationId: 'createKey',
    summary: 'Create an ingest key; the answer is the only time its secret is shown',
    body: keyCreateBody,
    answers: {
      201: {
        description: 'Created; `key` is the secret (Cache-Control: no-store)',
        schema: {
          ...keyView,
          required: [...keyView.required, 'key'],
          properties: { ...keyView.properties, key: { type: 'string', description: 'otm_<env>_<secret>' } },
        },
      },
    },
    errors: ['ValidationError', 'AuthError', 'Unavailable'],
  },
  {
    method: 'delete',
    url: '/v1/keys/:id',
    operationId: 'deleteKey',
    summary: 'Delete a key: every gateway refuses it within 2 s',
    answers: { 204: { description: 'Deleted' } },
    errors: ['AuthError', 'NotFound', 'Unavailable'],
  },
  {
    method: 'patch',
    url: '/v1/keys/:id',
    operationId: 'setKeyCapture',
    summary: "Set a key's capture policy",
    body: captureBody,
    answers: { 200: { description: 'The key as changed', schema: keyView } },
    errors: ['ValidationError', 'AuthError', 'NotFound', 'Unavailable'],
  },
  {
    method: 'get',
    url: '/v1/capture-policies',
    operationId: 'listCapturePolicies',
    summary: "Each environment's capture policy",
    answers: { 200: { description: 'The policies', schema: environmentCaptures } },
    errors: ['AuthError', 'Unavailable'],
  },
  {
    method: 'put',
    url: '/v1/capture-policies/:environment',
    operationId: 'setCapturePolicy',
    summary: "Set an environment's capture policy (the stricter of it and a key's applies)",
    params: environmentParams,
    body: captureBody,
    answers: { 200: { description: 'Every environment’s policy after the change', schema: environmentCaptures } },
    errors: ['ValidationError', 'AuthError', 'Unavailable'],
  },
  {
    method: 'get',
    url: '/v1/audit',
    operationId: 'auditLog',
    summary: 'The audit log of admin changes, newest first',
    querystring: auditQuery,
    answers: {
      200: {
        description: 'The entries',
        schema: {
          type: 'object',
          required: ['entries'],
          properties: {
            entries: {
              type: 'array',
              items: {
                type: 'object',
                properties: {
                  at: { type: 'string' },
                  actor: { type: 'string', description: '`admin-token@<client address>` or `cli:<user>@<host>`' },
                  action: {
                    type: 'string',
                    description: '`key.create`, `key.delete`, `key.capture`, `environment.capture`, `user.erase`, …',
                  },
                  target: { type: 'string' },
                  details: { type: 'object' },
                  requestId: { type: 'string' },
                },
              },
            },
          },
        },
      },
    },
    errors: ['ValidationError', 'AuthError', 'Unavailable'],
  },
  {
    method: 'delete',
    url: '/v1/admin/users/:userId/data',
    operationId: 'eraseUser',
    summary: "Erase one user's data in one environment (a job: follow statusUrl)",
    description:
      "Removes the user's records from every table and rollup, keeps their records still queued in Kafka out, and announces the erasure on the erasure topic. Asking again resumes a failed job.",
    params: erasureParams,
    querystring: erasureQuery,
    answers: { 202: { description: 'The job, started or resumed', schema: erasureJob } },
    errors: ['ValidationError', 'AuthError', 'Unavailable'],
  },
  {
    method: 'get',
    url: '/v1/admin/erasures/:id',
    operationId: 'erasureJob',
    summary: 'An erasure job',
    answers: { 200: { description: 'The job', schema: erasureJob } },
    errors: ['AuthError', 'NotFound', 'Unavailable'],
  },
  {
    method: 'post',
    url: '/v1/admin/records/removals',
    operationId: 'removeRecords',
    summary: 'Remove records from history by event key or request id (a job: follow statusUrl)',
    description:
      'Deletes the records from usage_events, usage_io and usage_events_by_user and fixes every rollup they were counted in; written to the audit log. Asking again is harmless: records already gone are not found.',
    body: removalBody,
    answers: { 202: { description: 'The job, started', schema: removalJob } },
    errors: ['ValidationError', 'AuthError', 'Unavailable'],
  },
  {
    method: 'get',
    url: '/v1/admin/records/removals/:id',
    operationId: 'removalJob',
    summary: 'A record removal job',
    answers: { 200: { description: 'The job', schema: removalJob } },
    errors: ['AuthError', 'NotFound', 'Unavailable'],
  },
];
