// The audit log (admin_audit, migration 0006): who changed what, through the admin
// API or the CLI. An entry is written before the change is made, so no change exists
// without its entry; a change that then fails gets a second entry (`<action>.failed`).
// If the entry cannot be written, the change is not made (the caller answers 503).
import type { ClickHouseClient } from './clickhouse.js';
import { formatDateTime } from './clickhouse-values.js';

export interface AuditEntry {
  /** Who: `admin-token@<client address>` for the API, `cli:<user>@<host>` for the CLI. */
  actor: string;
  /** What: `key.create`, `key.delete`, `key.capture`, `environment.capture`, … */
  action: string;
  /** Which: a key id, an environment. */
  target: string;
  /** The change itself (never a secret): a policy, a name. */
  details?: Record<string, unknown>;
  requestId?: string;
}

export interface AuditRow {
  at: string;
  actor: string;
  action: string;
  target: string;
  details: Record<string, unknown>;
  requestId: string;
}

/** The entry could not be written, so the change was not made. */
export class AuditUnavailableError extends Error {}

export class AuditLog {
  constructor(private readonly clickhouse: ClickHouseClient) {}

  async record(entry: AuditEntry, now = Date.now()): Promise<void> {
    await this.clickhouse.insert({
      table: 'admin_audit',
      format: 'JSONEachRow',
      values: [
        {
          at: formatDateTime(now),
          at_ms: now,
          actor: entry.actor,
          action: entry.action,
          target: entry.target,
          details: JSON.stringify(entry.details ?? {}),
          request_id: entry.requestId ?? '',
        },
      ],
    });
  }

  /**
   * Writes the entry, makes the change, and records its failure if it fails. Throws
   * AuditUnavailableError, without making the change, when the entry cannot be written.
   */
  async around<T>(entry: AuditEntry, change: () => Promise<T>): Promise<T> {
    await this.record(entry).catch((error: unknown) => {
      throw new AuditUnavailableError((error as Error).message);
    });
    try {
      return await change();
    } catch (error) {
      await this.record({
        ...entry,
        action: `${entry.action}.failed`,
        details: { ...entry.details, error: (error as Error).message },
      }).catch(() => undefined);
      throw error;
    }
  }

  /** The newest entries first. */
  async recent(limit: number): Promise<AuditRow[]> {
    const result = await this.clickhouse.query({
      query: `SELECT at_ms, actor, action, target, details, request_id FROM admin_audit ORDER BY at_ms DESC LIMIT ${Math.max(1, Math.min(1000, Math.floor(limit)))}`,
      format: 'JSONEachRow',
    });
    const rows = await result.json<{
      at_ms: string | number;
      actor: string;
      action: string;
      target: string;
      details: string;
      request_id: string;
    }>();
    return rows.map((row) => ({
      at: new Date(Number(row.at_ms)).toISOString(),
      actor: row.actor,
      action: row.action,
      target: row.target,
      details: JSON.parse(row.details || '{}') as Record<string, unknown>,
      requestId: row.request_id,
    }));
  }
}
