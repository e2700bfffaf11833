// Why a dependency call failed, in the few words an operator acts on: a full Redis
// needs memory or a shorter dedupe window, an unreachable one needs starting, an
// overloaded ClickHouse needs time or fewer, larger inserts. The ingester retries all
// of them the same way; the reason labels its retry metric and its log lines.
export type FailureReason = 'full' | 'overloaded' | 'unreachable' | 'timeout' | 'error';

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
