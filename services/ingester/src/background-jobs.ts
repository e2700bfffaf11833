// What the ingester runs beside consuming: retention (services/shared/src/rollups/
// retention.ts) a minute after start, then every RETENTION_CHECK_INTERVAL_MS; and the
// backfill of the rollups of migrations 0008 to 0011 (services/shared/src/rollups/
// backfill.ts), by one ingester at a time (a lock in Redis), at start and every 10
// minutes until done; and the job that builds the day rollups from the hours
// (services/shared/src/rollups/day-levels.ts), by one ingester at a time (a lock in
// Redis), at start and every 5 minutes. A failed run is logged and tried again at the next.
import { randomUUID } from 'node:crypto';
import { BACKFILL_TIMEOUT_MS, createClickHouse, type ClickHouseClient, type ClickHouseSettings } from '@otm/shared/clickhouse';
import type { Logger } from '@otm/shared/logger';
import type { Redis } from '@otm/shared/redis';
import { backfillRollups, isFullyBackfilled } from '@otm/shared/rollups/backfill';
import { DAY_BUILD_LOCK, buildDays } from '@otm/shared/rollups/day-levels';
import type { RollupFence } from '@otm/shared/rollups/fence';
import { applyRetention, retentionPolicyFrom } from '@otm/shared/rollups/retention';

/** How often an ingester checks for days to build. */
const DAY_BUILD_INTERVAL_MS = 300_000;

export interface BackgroundJobs {
  /** Stops the timers and closes the backfill's connection. */
  stop(): Promise<void>;
}

export function startBackgroundJobs(parts: {
  clickhouse: ClickHouseClient;
  redis: Redis;
  fence: RollupFence;
  settings: ClickHouseSettings;
  config: Parameters<typeof retentionPolicyFrom>[0] & {
    RETENTION_CHECK_INTERVAL_MS: number;
    REDIS_KEY_PREFIX: string;
    MIGRATE_ON_START: boolean;
    ROLLUP_DAY_BUILD_DELAY_MS: number;
    /** Whether the day rollups are built by the job (migration 0014 applies). */
    buildDays: boolean;
  };
  logger: Logger;
}): BackgroundJobs {
  const { clickhouse, redis, fence, settings, config, logger } = parts;
  const retentionPolicy = retentionPolicyFrom(config);
  const retentionRun = async () => {
    try {
      const outcome = await applyRetention(clickhouse, retentionPolicy, Date.now(), false, settings.cluster);
      if (outcome.dropped.length > 0) logger.info({ dropped: outcome.dropped }, 'retention dropped expired partitions');
    } catch (error) {
      logger.warn({ err: (error as Error).message }, 'retention failed; tried again at the next interval');
    }
  };
  const retentionTimers = [
    setTimeout(() => void retentionRun(), 60_000),
    setInterval(() => void retentionRun(), config.RETENTION_CHECK_INTERVAL_MS),
  ];
  for (const timer of retentionTimers) timer.unref();

  const backfilling = createClickHouse(settings, { requestTimeoutMs: BACKFILL_TIMEOUT_MS });
  const backfillRun = async () => {
    if (await isFullyBackfilled(clickhouse).catch(() => false)) {
      clearInterval(backfillTimer);
      return;
    }
    const lock = `${config.REDIS_KEY_PREFIX}rollup-backfill-lock`;
    const token = randomUUID();
    if ((await redis.set(lock, token, 'PX', 3_600_000, 'NX').catch(() => null)) !== 'OK') return;
    try {
      const outcome = await backfillRollups(backfilling, fence, {
        cluster: settings.cluster,
        retireLegacy: config.MIGRATE_ON_START,
        log: (line) => logger.info(line),
      });
      if (outcome.done) clearInterval(backfillTimer);
    } catch (error) {
      logger.warn({ err: (error as Error).message }, 'rollup backfill failed; it resumes at the next attempt');
    } finally {
      if ((await redis.get(lock).catch(() => null)) === token) await redis.del(lock).catch(() => undefined);
    }
  };
  const backfillTimer = setInterval(() => void backfillRun(), 600_000);
  backfillTimer.unref();
  void backfillRun();

  const dayBuildRun = async () => {
    const lock = `${config.REDIS_KEY_PREFIX}${DAY_BUILD_LOCK}`;
    const token = randomUUID();
    if ((await redis.set(lock, token, 'PX', 3_600_000, 'NX').catch(() => null)) !== 'OK') return;
    try {
      await buildDays(backfilling, fence, {
        delayMs: config.ROLLUP_DAY_BUILD_DELAY_MS,
        cluster: settings.cluster,
        log: (line) => logger.info(line),
      });
    } catch (error) {
      logger.warn({ err: (error as Error).message }, 'building the day rollups failed; tried again at the next interval');
    } finally {
      if ((await redis.get(lock).catch(() => null)) === token) await redis.del(lock).catch(() => undefined);
    }
  };
  const dayBuildTimer = config.buildDays ? setInterval(() => void dayBuildRun(), DAY_BUILD_INTERVAL_MS) : undefined;
  dayBuildTimer?.unref();
  if (config.buildDays) void dayBuildRun();

  return {
    async stop() {
      for (const timer of retentionTimers) clearTimeout(timer);
      clearInterval(backfillTimer);
      clearInterval(dayBuildTimer);
      await backfilling.close();
    },
  };
}
