// The dashboard's API client: the admin token in this tab's sessionStorage, the page's
// state, and the calls to the admin service (analytics, keys, pipeline).

export type Row = Record<string, any>;
export interface Answer {
  rows: Row[];
  /** Set (and rows empty) when the query failed: its message, e.g. a 504 saying what to narrow. */
  failed?: string;
}

export const state = {
  token: sessionStorage.getItem('otm-admin-token') ?? '',
  since: '24h',
  environment: '',
  page: location.hash.slice(1) || 'overview',
};
export class Unauthorized extends Error {}

export async function api<T>(path: string, init: RequestInit = {}): Promise<T> {
  const response = await fetch(path, {
    ...init,
    headers: { authorization: `Bearer ${state.token}`, ...(init.body ? { 'content-type': 'application/json' } : {}), ...init.headers },
  });
  if (response.status === 401) throw new Unauthorized();
  if (!response.ok)
    throw new Error(((await response.json().catch(() => ({}))) as { message?: string }).message ?? `HTTP ${response.status}`);
  return (response.status === 204 ? undefined : await response.json()) as T;
}

export function analytics(kind: 'usage' | 'latency' | 'errors' | 'unpriced', params: Record<string, string>): Promise<Answer> {
  const query = new URLSearchParams({ since: state.since, ...params });
  if (state.environment) query.set('environment', state.environment);
  return api<Answer>(`/v1/analytics/${kind}?${query}`);
}

/** An analytics answer, or its failure as an empty answer with the message: each chart shows that message in its own place. */
export async function analyticsOrFailure(
  kind: 'usage' | 'latency' | 'errors' | 'unpriced',
  params: Record<string, string>,
): Promise<Answer> {
  try {
    return await analytics(kind, params);
  } catch (error) {
    if (error instanceof Unauthorized) throw error;
    return { rows: [], failed: (error as Error).message };
  }
}
