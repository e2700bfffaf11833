// GET /v1/analytics/{usage,latency,errors,unpriced}: JSON over the rollups, behind the
// admin token. Query parameters are validated (400 with the usual error body);
// results are bounded by `limit` (at most 10,000 rows).
import type { FastifyInstance } from 'fastify';
import type { JsonSchemaToTsProvider } from '@fastify/type-provider-json-schema-to-ts';
import { refuse } from '@otm/shared/errors';
import {
  ERROR_DIMENSIONS,
  QueryError,
  QueryLimitExceeded,
  USAGE_DIMENSIONS,
  analyticsQuerySchema,
  errorAnalytics,
  latencyAnalytics,
  parseAnalyticsQuery,
  usageAnalytics,
  type AnalyticsQuery,
  unpricedAnalytics,
  type AnalyticsStore,
} from './analytics.js';

type Runner = (store: AnalyticsStore, query: AnalyticsQuery) => Promise<unknown[]>;

// The error rollup has no user or key columns: those filters are refused (400), never ignored.
const { userId, keyId, userType, ...errorFilters } = analyticsQuerySchema.properties;
void [userId, keyId, userType];
// The unpriced models: always over the whole range, by provider and model.
const { bucket, groupBy, orderBy, ...unpricedFilters } = analyticsQuerySchema.properties;
void [bucket, groupBy, orderBy];
const unpricedQuerySchema = { ...analyticsQuerySchema, properties: unpricedFilters } as const;

const errorQuerySchema = {
  ...analyticsQuerySchema,
  properties: { ...errorFilters, errorCode: { type: 'string', maxLength: 1024 } },
} as const;

/** The answer of every analytics route; the row columns depend on the route and groupBy. */
export const analyticsAnswerSchema = {
  type: 'object',
  required: ['from', 'to', 'bucket', 'groupBy', 'rows', 'truncated'],
  properties: {
    from: {
      type: 'string',
      format: 'date-time',
      description:
        'start of the range counted: earlier than asked when the query is counted in whole hours or days (latency in whole buckets; per-user days)',
    },
    to: { type: 'string', format: 'date-time', description: 'end of the range counted (later than asked in the same cases)' },
    bucket: { type: 'string' },
    groupBy: { type: 'array', items: { type: 'string' } },
    rows: { type: 'array', items: { type: 'object', additionalProperties: true } },
    truncated: { type: 'boolean', description: 'true when more rows than `limit` exist (the rows are the first `limit`)' },
  },
} as const;

/** The analytics routes as data: registered below and documented by scripts/gen-openapi.ts. */
export const analyticsRoutes = [
  {
    name: 'usage',
    summary: 'Requests, tokens and cost per time bucket and dimension',
    runner: usageAnalytics as Runner,
    dimensions: USAGE_DIMENSIONS as readonly string[],
    querystring: analyticsQuerySchema,
  },
  {
    name: 'latency',
    summary: 'Latency and time-to-first-token percentiles per time bucket and dimension',
    runner: latencyAnalytics as Runner,
    dimensions: USAGE_DIMENSIONS as readonly string[],
    querystring: analyticsQuerySchema,
  },
  {
    name: 'errors',
    summary: 'Errors per code, model and provider per time bucket',
    runner: errorAnalytics as Runner,
    dimensions: ERROR_DIMENSIONS as readonly string[],
    querystring: errorQuerySchema,
  },
  {
    name: 'unpriced',
    summary: 'The (provider, model) pairs without a price in the range, with their requests, the most unpriced first',
    runner: unpricedAnalytics as Runner,
    dimensions: USAGE_DIMENSIONS as readonly string[],
    querystring: unpricedQuerySchema,
  },
].map((route) => ({ ...route, url: `/v1/analytics/${route.name}` }));

export function registerAnalyticsRoutes(app: FastifyInstance, store: AnalyticsStore): void {
  for (const { url, runner, dimensions, querystring } of analyticsRoutes) {
    // The query's type comes from the route's own schema (JsonSchemaToTsProvider).
    app.withTypeProvider<JsonSchemaToTsProvider>().get(url, { schema: { querystring } }, async (request) => {
      let query: AnalyticsQuery;
      try {
        query = { ...parseAnalyticsQuery(request.query, dimensions), queryId: request.id };
      } catch (error) {
        if (!(error instanceof QueryError)) throw error;
        throw refuse('queryInvalid', { errors: [{ path: error.path, message: error.message }] });
      }
      let rows: unknown[];
      const limit = query.limit;
      // One row more than asked: whether more rows exist is known, not guessed. (The
      // runner sets from and to when it counts a wider range: the answer reports them.)
      query = { ...query, limit: limit + 1 };
      try {
        rows = await runner(store, query);
      } catch (error) {
        if (error instanceof QueryLimitExceeded) throw refuse('queryTimeout', { detail: error.message });
        throw refuse('analyticsUnavailable');
      }
      return {
        from: query.from.toISOString(),
        to: query.to.toISOString(),
        bucket: query.bucket,
        groupBy: query.groupBy,
        rows: rows.slice(0, limit),
        truncated: rows.length > limit,
      };
    });
  }
}
