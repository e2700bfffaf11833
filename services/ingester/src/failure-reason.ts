// Why a dependency call failed, in the few words an operator acts on: a full Redis
// needs memory or a shorter dedupe window, an unreachable one needs starting, an
// overloaded ClickHouse needs time or fewer, larger inserts. The ingester retries all
// of them the same way; the reason labels its retry metric and its log lines.
/**
 * Every reason a dependency call fails for, what it means and what an operator does
 * about it (docs/errors.md is generated from this). The retry is the same for all.
 */
export const FAILURE_REASONS = {
  full: {
    meaning: "Redis refused a write: it is at maxmemory with the noeviction policy (OOM), or a MULTI's write was refused for that",
    action: 'raise maxmemory or lower DEDUPE_TTL_SECONDS; nothing is lost meanwhile (offsets stay uncommitted)',
  },
  overloaded: {
    meaning: 'ClickHouse refused an insert for load: memory limit exceeded (241) or too many parts (252: inserts faster than merges)',
    action: 'give ClickHouse time or memory; fewer, larger inserts (INGEST_BATCH_MAX_ROWS, INGEST_GATHER_MS)',
  },
  unreachable: {
    meaning: 'the connection was refused, reset or is closed, or the host did not resolve',
    action: 'start the dependency or fix its address; the load resumes by itself',
  },
  timeout: {
    meaning: 'the dependency did not answer in time',
    action: "look at the dependency's own load; the call is retried with backoff",
  },
  error: {
    meaning: 'any other failure (its message is in the log line)',
    action: 'read the log line `dependency failed; retrying`',
  },
} as const satisfies Record<string, { meaning: string; action: string }>;

export type FailureReason = keyof typeof FAILURE_REASONS;

const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);
/** ClickHouse: 241 memory limit exceeded, 252 too many parts (inserts faster than merges). */
const CLICKHOUSE_OVERLOADED = new Set(['241', '252']);

export function failureReason(error: unknown): FailureReason {
  const {
    message = '',
    code,
    name,
    previousErrors,
  } = (error ?? {}) as {
    message?: string;
    code?: unknown;
    name?: string;
    previousErrors?: { message?: string }[];
  };
  // Redis answers writes with "OOM command not allowed when used memory > 'maxmemory'";
  // in a MULTI (the erasure lease) the exec fails with EXECABORT and the OOM inside.
  if (message.startsWith('OOM ')) return 'full';
  if (previousErrors?.some((previous) => previous.message?.startsWith('OOM '))) return 'full';
  if (code !== undefined && CLICKHOUSE_OVERLOADED.has(String(code))) return 'overloaded';
  if ((typeof code === 'string' && UNREACHABLE_CODES.has(code)) || name === 'MaxRetriesPerRequestError') return 'unreachable';
  if (/stream isn't writeable|connection is closed|socket hang up|ECONNREFUSED|ECONNRESET/i.test(message)) return 'unreachable';
  if (code === 'ETIMEDOUT' || /timed? ?out/i.test(message)) return 'timeout';
  return 'error';
}
