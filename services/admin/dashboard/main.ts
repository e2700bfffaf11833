// The operators' dashboard: Overview, Models, Errors, Users and AI Module
// Configurations (keys). Plain TypeScript and Chart.js; every number comes from the
// analytics API with the admin token kept in this tab's sessionStorage.
import { Chart, registerables } from 'chart.js';

Chart.register(...registerables);

type Row = Record<string, any>;
interface Answer {
  rows: Row[];
}

const state = {
  token: sessionStorage.getItem('otm-admin-token') ?? '',
  since: '24h',
  environment: '',
  page: location.hash.slice(1) || 'overview',
};
const charts: Chart[] = [];
const app = document.getElementById('app')!;

const PAGES: [id: string, title: string][] = [
  ['overview', 'Overview'],
  ['models', 'Models'],
  ['errors', 'Errors'],
  ['users', 'Users'],
  ['keys', 'AI Module Configurations'],
];

function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Record<string, any> = {}, ...children: (Node | string | null)[]) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name.startsWith('on')) element.addEventListener(name.slice(2).toLowerCase(), value);
    else if (name === 'class') element.className = value;
    else element.setAttribute(name, String(value));
  }
  for (const child of children) if (child !== null) element.append(child);
  return element;
}

class Unauthorized extends Error {}

async function api<T>(path: string, init: RequestInit = {}): Promise<T> {
  const response = await fetch(path, {
    ...init,
    headers: { authorization: `Bearer ${state.token}`, ...(init.body ? { 'content-type': 'application/json' } : {}), ...init.headers },
  });
  if (response.status === 401) throw new Unauthorized();
  if (!response.ok)
    throw new Error(((await response.json().catch(() => ({}))) as { message?: string }).message ?? `HTTP ${response.status}`);
  return (response.status === 204 ? undefined : await response.json()) as T;
}

function analytics(kind: 'usage' | 'latency' | 'errors', params: Record<string, string>): Promise<Answer> {
  const query = new URLSearchParams({ since: state.since, ...params });
  if (state.environment) query.set('environment', state.environment);
  return api<Answer>(`/v1/analytics/${kind}?${query}`);
}

const bucketFor = (since: string) => ({ '1h': 'minute', '24h': 'hour', '7d': 'hour', '30d': 'day' })[since] ?? 'hour';
const number = (value: unknown, digits = 0) =>
  Number(value ?? 0).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const money = (value: unknown) => `$${Number(value ?? 0).toLocaleString('en-US', { maximumFractionDigits: 4, minimumFractionDigits: 2 })}`;
const percent = (value: unknown) => `${(Number(value ?? 0) * 100).toFixed(2)}%`;
const ms = (value: unknown) => (value === null || value === undefined ? '–' : `${number(value)} ms`);
const timeLabel = (iso: string) => {
  const date = new Date(iso);
  return state.since === '30d'
    ? date.toISOString().slice(5, 10)
    : date
        .toISOString()
        .slice(state.since === '7d' ? 5 : 11, 16)
        .replace('T', ' ');
};

function card(label: string, value: string) {
  return h('div', { class: 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value', 'data-metric': label }, value));
}

function panel(title: string, body: Node) {
  return h('section', { class: 'panel' }, h('h3', {}, title), body);
}

function empty(text = 'No data in this time range yet. Post usage records to the gateway and they appear here within seconds.') {
  return h('div', { class: 'empty' }, text);
}

function lineChart(
  labels: string[],
  datasets: { label: string; data: (number | null)[] }[],
  options: { stacked?: boolean; bar?: boolean } = {},
) {
  const canvas = h('canvas');
  const holder = h('div', { class: 'chart' }, canvas);
  const palette = ['#3454d1', '#12b76a', '#f79009', '#d92d20', '#7a5af8', '#0ba5ec'];
  charts.push(
    new Chart(canvas, {
      type: options.bar ? 'bar' : 'line',
      data: {
        labels,
        datasets: datasets.map((set, index) => ({
          ...set,
          borderColor: palette[index % palette.length],
          backgroundColor: palette[index % palette.length] + (options.bar ? 'cc' : '33'),
          fill: !options.bar && datasets.length === 1,
          tension: 0.25,
          pointRadius: labels.length > 60 ? 0 : 2,
        })),
      },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        plugins: { legend: { display: datasets.length > 1 } },
        scales: { x: { stacked: options.stacked }, y: { stacked: options.stacked, beginAtZero: true } },
      },
    }),
  );
  return holder;
}

function table(columns: [key: string, title: string, format?: (value: any) => string][], rows: Row[]) {
  if (rows.length === 0) return empty();
  return h(
    'table',
    {},
    h('thead', {}, h('tr', {}, ...columns.map(([, title, format]) => h('th', { class: format ? 'num' : '' }, title)))),
    h(
      'tbody',
      {},
      ...rows.map((row) =>
        h(
          'tr',
          {},
          ...columns.map(([key, , format]) => h('td', { class: format ? 'num' : '' }, format ? format(row[key]) : String(row[key] ?? ''))),
        ),
      ),
    ),
  );
}

async function overview(root: HTMLElement) {
  const bucket = bucketFor(state.since);
  const [totals, series, latency, pipeline] = await Promise.all([
    analytics('usage', { bucket: 'none' }),
    analytics('usage', { bucket }),
    analytics('latency', { bucket }),
    // The ingesters' backlog: records accepted and not yet loaded (absent when Kafka does not answer).
    api<{ lag: number }>('/v1/pipeline').catch((error: unknown) => {
      if (error instanceof Unauthorized) throw error;
      return undefined;
    }),
  ]);
  const total = totals.rows[0] ?? {};
  root.append(
    h(
      'div',
      { class: 'cards' },
      card('Requests', number(total.requests)),
      card('Total tokens', number(total.totalTokens)),
      card('Cost (USD)', money(total.costUsd)),
      card('Error rate', percent(total.errorRate)),
      card('Unpriced share', percent(total.unknownPriceShare)),
      card('Ingest backlog', pipeline ? number(pipeline.lag) : '—'),
    ),
  );
  if (series.rows.length === 0) {
    root.append(panel('Activity', empty()));
    return;
  }
  const labels = series.rows.map((row) => timeLabel(row.bucket));
  const latencyByBucket = new Map(latency.rows.map((row) => [row.bucket, row]));
  root.append(
    h(
      'div',
      { class: 'grid' },
      panel('Requests', lineChart(labels, [{ label: 'requests', data: series.rows.map((row) => row.requests) }])),
      panel(
        'Tokens',
        lineChart(
          labels,
          [
            { label: 'input', data: series.rows.map((row) => row.inputTokens) },
            { label: 'output', data: series.rows.map((row) => row.outputTokens) },
          ],
          { stacked: true, bar: true },
        ),
      ),
      panel('Cost (USD)', lineChart(labels, [{ label: 'cost', data: series.rows.map((row) => row.costUsd) }])),
      panel('Error rate', lineChart(labels, [{ label: 'error rate', data: series.rows.map((row) => row.errorRate) }])),
      panel(
        'p99 latency (ms)',
        lineChart(labels, [{ label: 'p99', data: series.rows.map((row) => latencyByBucket.get(row.bucket)?.latencyP99Ms ?? null) }]),
      ),
    ),
  );
}

async function models(root: HTMLElement) {
  const [usage, latency] = await Promise.all([
    analytics('usage', { bucket: 'none', groupBy: 'provider,model', orderBy: 'totalTokens' }),
    analytics('latency', { bucket: 'none', groupBy: 'provider,model' }),
  ]);
  const latencyOf = new Map(latency.rows.map((row) => [`${row.provider}/${row.model}`, row]));
  const rows: Row[] = usage.rows.map((row) => ({
    ...row,
    ...latencyOf.get(`${row.provider}/${row.model}`),
    name: `${row.provider}/${row.model}`,
  }));
  if (rows.length > 0) {
    const labels = rows.map((row) => row.name);
    root.append(
      h(
        'div',
        { class: 'grid' },
        panel('Tokens by model', lineChart(labels, [{ label: 'total tokens', data: rows.map((row) => row.totalTokens) }], { bar: true })),
        panel('Cost by model (USD)', lineChart(labels, [{ label: 'cost', data: rows.map((row) => row.costUsd) }], { bar: true })),
        panel(
          'Latency percentiles (ms)',
          lineChart(
            labels,
            [
              { label: 'p50', data: rows.map((row) => row.latencyP50Ms) },
              { label: 'p90', data: rows.map((row) => row.latencyP90Ms) },
              { label: 'p99', data: rows.map((row) => row.latencyP99Ms) },
            ],
            { bar: true },
          ),
        ),
      ),
    );
  }
  root.append(
    h('div', { class: 'gap-above' }),
    panel(
      'Models',
      table(
        [
          ['name', 'Provider / model'],
          ['requests', 'Requests', number],
          ['totalTokens', 'Tokens', number],
          ['costUsd', 'Cost', money],
          ['latencyP50Ms', 'p50', ms],
          ['latencyP99Ms', 'p99', ms],
          ['ttftP50Ms', 'TTFT p50', ms],
          ['outputTokensPerSec', 'Tokens/s', (value) => number(value, 1)],
          ['errorRate', 'Errors', percent],
        ],
        rows,
      ),
    ),
  );
}

async function errors(root: HTMLElement) {
  const bucket = bucketFor(state.since);
  const [series, codes, messages] = await Promise.all([
    analytics('usage', { bucket }),
    analytics('errors', { bucket: 'none', groupBy: 'errorCode', limit: '10' }),
    analytics('errors', { bucket: 'none', groupBy: 'errorCode,errorMessage', limit: '10' }),
  ]);
  root.append(
    h(
      'div',
      { class: 'grid' },
      panel(
        'Error rate over time',
        series.rows.length
          ? lineChart(
              series.rows.map((row) => timeLabel(row.bucket)),
              [{ label: 'error rate', data: series.rows.map((row) => row.errorRate) }],
            )
          : empty(),
      ),
      panel(
        'Top error codes',
        codes.rows.length
          ? lineChart(
              codes.rows.map((row) => row.errorCode || '(none)'),
              [{ label: 'errors', data: codes.rows.map((row) => row.errors) }],
              { bar: true },
            )
          : empty('No errors in this time range.'),
      ),
    ),
    h('div', { class: 'gap-above' }),
    panel(
      'Top error messages',
      table(
        [
          ['errorCode', 'Code'],
          ['errorMessage', 'Message'],
          ['errors', 'Count', number],
        ],
        messages.rows,
      ),
    ),
  );
}

async function users(root: HTMLElement) {
  const [top, split] = await Promise.all([
    analytics('usage', { bucket: 'none', groupBy: 'userId,userType', orderBy: 'totalTokens', limit: '20' }),
    analytics('usage', { bucket: 'none', groupBy: 'userType' }),
  ]);
  root.append(
    h(
      'div',
      { class: 'grid' },
      panel(
        'Internal vs external (tokens)',
        split.rows.length
          ? lineChart(
              split.rows.map((row) => row.userType),
              [{ label: 'tokens', data: split.rows.map((row) => row.totalTokens) }],
              { bar: true },
            )
          : empty(),
      ),
      panel(
        'Internal vs external (cost, USD)',
        split.rows.length
          ? lineChart(
              split.rows.map((row) => row.userType),
              [{ label: 'cost', data: split.rows.map((row) => row.costUsd) }],
              { bar: true },
            )
          : empty(),
      ),
    ),
    h('div', { class: 'gap-above' }),
    panel(
      'Top users by tokens',
      table(
        [
          ['userId', 'User'],
          ['userType', 'Type'],
          ['requests', 'Requests', number],
          ['totalTokens', 'Tokens', number],
          ['costUsd', 'Cost', money],
        ],
        top.rows,
      ),
    ),
  );
}

async function keys(root: HTMLElement) {
  const list = await api<{ keys: Row[] }>('/v1/keys');
  const created = h('div');
  const name = h('input', { placeholder: 'Name, e.g. checkout-service', 'aria-label': 'Key name', id: 'key-name' }) as HTMLInputElement;
  const environment = h(
    'select',
    { 'aria-label': 'Environment', id: 'key-env' },
    ...['prod', 'qa', 'preview', 'dev'].map((env) => h('option', { value: env }, env)),
  ) as HTMLSelectElement;
  const create = h(
    'button',
    {
      id: 'create-key',
      onClick: async () => {
        if (!name.value.trim()) return name.focus();
        const key = await api<Row>('/v1/keys', {
          method: 'POST',
          body: JSON.stringify({ environment: environment.value, name: name.value.trim() }),
        });
        const secret = h('div', { class: 'secret', id: 'new-key' }, key.key);
        const copy = h(
          'button',
          {
            class: 'secondary',
            id: 'copy-key',
            onClick: async () => {
              await navigator.clipboard?.writeText(key.key).catch(() => undefined);
              copy.textContent = 'Copied';
            },
          },
          'Copy',
        );
        created.replaceChildren(
          h(
            'div',
            { class: 'notice' },
            h('strong', {}, 'Copy this key now. '),
            'It is shown once and stored only as a hash.',
            h('div', { class: 'row gap-above-small' }, secret, copy),
          ),
        );
        await renderKeyTable();
      },
    },
    'Create key',
  );
  const tableHolder = h('div');
  async function renderKeyTable() {
    const current = await api<{ keys: Row[] }>('/v1/keys');
    tableHolder.replaceChildren(
      current.keys.length === 0
        ? empty('No keys yet. Create one to start sending usage records.')
        : h(
            'table',
            {},
            h(
              'thead',
              {},
              h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Id'), h('th', {}, 'Environment'), h('th', {}, 'Created'), h('th', {}, '')),
            ),
            h(
              'tbody',
              {},
              ...current.keys.map((key) =>
                h(
                  'tr',
                  { 'data-key-id': key.id },
                  h('td', {}, key.name),
                  h('td', {}, h('code', {}, key.id)),
                  h('td', {}, h('span', { class: 'badge' }, key.environment)),
                  h('td', {}, new Date(key.createdAt).toLocaleString()),
                  h(
                    'td',
                    { class: 'num' },
                    h(
                      'button',
                      {
                        class: 'danger',
                        'data-delete': key.id,
                        onClick: async () => {
                          if (!confirm(`Delete key "${key.name}" (${key.id})? Every gateway refuses it within 2 seconds.`)) return;
                          await api(`/v1/keys/${key.id}`, { method: 'DELETE' });
                          await renderKeyTable();
                        },
                      },
                      'Delete',
                    ),
                  ),
                ),
              ),
            ),
          ),
    );
  }
  void list;
  await renderKeyTable();
  root.append(
    panel('Create an ingest key', h('div', {}, h('div', { class: 'row' }, name, environment, create), created)),
    h('div', { class: 'gap-above' }),
    panel('Keys', tableHolder),
  );
}

const renderers: Record<string, (root: HTMLElement) => Promise<void>> = { overview, models, errors, users, keys };

function login(message = '') {
  const input = h('input', { type: 'password', placeholder: 'Admin token', id: 'token', 'aria-label': 'Admin token' }) as HTMLInputElement;
  const submit = () => {
    state.token = input.value.trim();
    sessionStorage.setItem('otm-admin-token', state.token);
    void render();
  };
  input.addEventListener('keydown', (event) => event.key === 'Enter' && submit());
  app.replaceChildren(
    h(
      'div',
      { class: 'login' },
      h('h2', {}, 'otm-telemetry'),
      h('p', {}, 'Sign in with the admin token (npm start prints it).'),
      input,
      h('button', { id: 'sign-in', onClick: submit }, 'Sign in'),
      message ? h('div', { class: 'error' }, message) : null,
    ),
  );
  input.focus();
}

async function render() {
  if (!state.token) return login();
  for (const chart of charts.splice(0)) chart.destroy();
  const since = h(
    'select',
    {
      id: 'range',
      'aria-label': 'Time range',
      onChange: (event: Event) => ((state.since = (event.target as HTMLSelectElement).value), render()),
    },
    ...[
      ['1h', 'Last hour'],
      ['24h', 'Last 24 hours'],
      ['7d', 'Last 7 days'],
      ['30d', 'Last 30 days'],
    ].map(([value, label]) => {
      const option = h('option', { value: value! }, label!);
      if (value === state.since) option.setAttribute('selected', '');
      return option;
    }),
  );
  const environment = h(
    'select',
    {
      id: 'environment',
      'aria-label': 'Environment',
      onChange: (event: Event) => ((state.environment = (event.target as HTMLSelectElement).value), render()),
    },
    ...[
      ['', 'All environments'],
      ['prod', 'prod'],
      ['qa', 'qa'],
      ['preview', 'preview'],
      ['dev', 'dev'],
    ].map(([value, label]) => {
      const option = h('option', { value: value! }, label!);
      if (value === state.environment) option.setAttribute('selected', '');
      return option;
    }),
  );
  const content = h('main', {}, h('div', { class: 'loading' }, 'Loading…'));
  app.replaceChildren(
    h(
      'header',
      {},
      h('h1', {}, 'otm-telemetry'),
      h(
        'nav',
        {},
        ...PAGES.map(([id, title]) => h('a', { href: `#${id}`, class: id === state.page ? 'active' : '', 'data-page': id }, title)),
      ),
      h(
        'div',
        { class: 'toolbar' },
        since,
        environment,
        h(
          'button',
          { class: 'secondary', onClick: () => (sessionStorage.removeItem('otm-admin-token'), (state.token = ''), login()) },
          'Sign out',
        ),
      ),
    ),
    content,
  );
  const title = PAGES.find(([id]) => id === state.page)?.[1] ?? 'Overview';
  const body = h('div', { id: `page-${state.page}` });
  try {
    await (renderers[state.page] ?? overview)(body);
    content.replaceChildren(h('h2', {}, title), body);
  } catch (error) {
    if (error instanceof Unauthorized) {
      sessionStorage.removeItem('otm-admin-token');
      state.token = '';
      return login('That token was refused.');
    }
    content.replaceChildren(h('h2', {}, title), h('div', { class: 'error' }, `Could not load: ${(error as Error).message}`));
  }
  document.body.dataset.ready = state.page;
}

window.addEventListener('hashchange', () => {
  state.page = location.hash.slice(1) || 'overview';
  void render();
});
void render();
