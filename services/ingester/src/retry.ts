// Every dependency call of the ingester's load is retried with capped exponential
// backoff until it works, or until the work is given up (a rebalance, a stop): a failing
// dependency delays the load and never drops a record.
import type { Logger } from '@otm/shared/logger';
import { FAILURE_REASONS, failureReason } from './failure-reason.js';
import type { IngesterMetrics } from './metrics.js';

/** What a retry reports to and how long it waits: the load unit's context fits it. */
export interface RetryContext {
  deps: { metrics: Pick<IngesterMetrics, 'retries'>; logger: Logger };
  options: { retryInitialMs: number; retryMaxMs: number };
}

/** Thrown inside a retry loop when the batch must be given up (shutdown, rebalance). */
export class Abandoned extends Error {}

/** Retries an infrastructure call with capped exponential backoff until it works or the batch is abandoned. */
export async function retrying<T>(
  context: RetryContext,
  what: string,
  work: () => Promise<T>,
  alive: () => boolean,
  heartbeat: () => Promise<void>,
): Promise<T> {
  let delay = context.options.retryInitialMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (error instanceof Abandoned) throw error;
      const reason = failureReason(error);
      // A step of the work may name its own dependency (the erasure lease is Redis inside the insert's retry).
      const dependency = (error as { dependency?: string }).dependency ?? what;
      context.deps.metrics.retries.inc({ dependency, reason });
      if (attempt === 1 || attempt % 10 === 0) {
        context.deps.logger.warn(
          { dependency, reason, attempt, err: (error as Error).message, hint: FAILURE_REASONS[reason].action },
          'dependency failed; retrying',
        );
      }
    }
    const until = Date.now() + delay;
    while (Date.now() < until) {
      if (!alive()) throw new Abandoned();
      await new Promise((resolve) => setTimeout(resolve, Math.min(250, until - Date.now())));
    }
    await heartbeat().catch(() => undefined);
    if (!alive()) throw new Abandoned();
    delay = Math.min(delay * 2, context.options.retryMaxMs);
  }
}
