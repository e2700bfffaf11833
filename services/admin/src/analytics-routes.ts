// GET /v1/analytics/{usage,latency,errors}: JSON over the rollups, behind the
// admin token. Query parameters are validated (400 with the usual error body);
// results are bounded by `limit` (at most 10,000 rows).
import type { FastifyInstance } from 'fastify';
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import { ServiceError } from '@otm/shared/errors';
import {
  ERROR_DIMENSIONS,
  QueryError,
  USAGE_DIMENSIONS,
  analyticsQuerySchema,
  errorAnalytics,
  latencyAnalytics,
  parseAnalyticsQuery,
  usageAnalytics,
  type AnalyticsQuery,
  type RawQuery,
} from './analytics.js';

type Runner = (clickhouse: ClickHouseClient, query: AnalyticsQuery) => Promise<unknown[]>;

export function registerAnalyticsRoutes(app: FastifyInstance, clickhouse: ClickHouseClient): void {
  // The error rollup has no user or key columns: those filters are refused (400), never ignored.
  const { userId, keyId, userType, ...errorFilters } = analyticsQuerySchema.properties;
  void [userId, keyId, userType];
  const errorSchema = {
    ...analyticsQuerySchema,
    properties: { ...errorFilters, errorCode: { type: 'string', maxLength: 1024 } },
  };
  const routes: [string, Runner, readonly string[], object][] = [
    ['usage', usageAnalytics, USAGE_DIMENSIONS, analyticsQuerySchema],
    ['latency', latencyAnalytics, USAGE_DIMENSIONS, analyticsQuerySchema],
    ['errors', errorAnalytics, ERROR_DIMENSIONS, errorSchema],
  ];
  for (const [name, runner, dimensions, schema] of routes) {
    app.get<{ Querystring: RawQuery }>(`/v1/analytics/${name}`, { schema: { querystring: schema } }, async (request) => {
      let query: AnalyticsQuery;
      try {
        query = parseAnalyticsQuery(request.query, dimensions);
      } catch (error) {
        if (!(error instanceof QueryError)) throw error;
        throw new ServiceError('ValidationError', 'Invalid query parameters.', { errors: [{ path: error.path, message: error.message }] });
      }
      let rows: unknown[];
      try {
        rows = await runner(clickhouse, query);
      } catch {
        throw new ServiceError('Unavailable', 'The analytics store is unavailable; retry later.');
      }
      return {
        from: query.from.toISOString(),
        to: query.to.toISOString(),
        bucket: query.bucket,
        groupBy: query.groupBy,
        rows,
        truncated: rows.length >= query.limit,
      };
    });
  }
}
