// The dashboard's pages: Overview, Models, Errors, Users and AI Module Configurations
// (keys). Each renders into the element it is given, from the admin APIs.
import { Unauthorized, analyticsOrFailure as analytics, api, state, type Row } from './api.js';
import {
  bucketFor,
  card,
  empty,
  failure,
  h,
  isPartial,
  lineChart,
  money,
  moneyTick,
  ms,
  number,
  orFailure,
  panel,
  percent,
  table,
  timeLabel,
} from './ui.js';

export async function overview(root: HTMLElement) {
  const bucket = bucketFor(state.since);
  const [totals, series, latency, unpriced, pipeline] = await Promise.all([
    analytics('usage', { bucket: 'none' }),
    analytics('usage', { bucket }),
    analytics('latency', { bucket }),
    // The models without a price: what an operator adds to the price overrides.
    analytics('unpriced', { limit: '20' }),
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
      card('Requests', number(total.requests), total.requests),
      card('Total tokens', number(total.totalTokens), total.totalTokens),
      card('Cost (USD)', money(total.costUsd), total.costUsd),
      card('Error rate', percent(total.errorRate)),
      card('Unpriced share', percent(total.unknownPriceShare)),
      card('Cache hit ratio', percent(total.cacheHitRatio)),
      card('Ingest backlog', pipeline ? number(pipeline.lag) : '—', pipeline?.lag),
    ),
    ...(totals.failed !== undefined ? [failure(totals.failed)] : []),
  );
  if (series.rows.length === 0 && series.failed === undefined) {
    root.append(panel('Activity', empty()));
    return;
  }
  const labels = series.rows.map((row) => timeLabel(row.bucket));
  const latencyByBucket = new Map(latency.rows.map((row) => [row.bucket, row]));
  // The current bucket is still filling: drawn as partial, so it does not read as a drop.
  const partialLast = isPartial(series.rows.at(-1)?.bucket, bucket);
  root.append(
    h(
      'div',
      { class: 'grid' },
      panel(
        'Requests',
        orFailure([series], () =>
          lineChart(labels, [{ label: 'requests', data: series.rows.map((row) => row.requests) }], { bar: true, partialLast }),
        ),
      ),
      panel(
        'Tokens',
        orFailure([series], () =>
          lineChart(
            labels,
            [
              { label: 'input', data: series.rows.map((row) => row.inputTokens) },
              { label: 'output', data: series.rows.map((row) => row.outputTokens) },
            ],
            { stacked: true, bar: true, partialLast },
          ),
        ),
      ),
      panel(
        'Cost (USD)',
        orFailure([series], () =>
          lineChart(labels, [{ label: 'cost', data: series.rows.map((row) => row.costUsd) }], {
            bar: true,
            partialLast,
            format: moneyTick,
          }),
        ),
      ),
      panel(
        'Error rate',
        orFailure([series], () =>
          lineChart(labels, [{ label: 'error rate', data: series.rows.map((row) => row.errorRate) }], { partialLast, format: percent }),
        ),
      ),
      panel(
        'p99 latency (ms)',
        orFailure([series, latency], () =>
          lineChart(labels, [{ label: 'p99', data: series.rows.map((row) => latencyByBucket.get(row.bucket)?.latencyP99Ms ?? null) }], {
            partialLast,
          }),
        ),
      ),
    ),
  );
  if (unpriced.rows.length > 0 || unpriced.failed !== undefined) {
    root.append(
      h('div', { class: 'gap-above' }),
      panel(
        'Unpriced models (cost counted as 0: add them to the price overrides)',
        orFailure([unpriced], () =>
          table(
            [
              ['name', 'Provider / model'],
              ['unpricedRequests', 'Unpriced requests', number],
              ['requests', 'Requests', number],
            ],
            unpriced.rows.map((row) => ({ ...row, name: `${row.provider}/${row.model}` })),
          ),
        ),
      ),
    );
  }
}

export async function models(root: HTMLElement) {
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
  if (usage.failed !== undefined) {
    root.append(panel('Models', failure(usage.failed)));
    return;
  }
  if (rows.length > 0) {
    const labels = rows.map((row) => row.name);
    root.append(
      h(
        'div',
        { class: 'grid' },
        panel('Tokens by model', lineChart(labels, [{ label: 'total tokens', data: rows.map((row) => row.totalTokens) }], { bar: true })),
        panel(
          'Cost by model (USD)',
          lineChart(labels, [{ label: 'cost', data: rows.map((row) => row.costUsd) }], { bar: true, format: moneyTick }),
        ),
        panel(
          'Cache hit ratio by model (cache reads / input)',
          lineChart(labels, [{ label: 'cache hit ratio', data: rows.map((row) => row.cacheHitRatio) }], { bar: true, format: percent }),
        ),
        panel(
          'Latency percentiles (ms)',
          orFailure([latency], () =>
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
          ['cachedInputTokens', 'Cached input', number],
          ['cacheHitRatio', 'Cache hits', percent],
          ['reasoningTokens', 'Reasoning', number],
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

export async function errors(root: HTMLElement) {
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
        orFailure([series], () =>
          series.rows.length
            ? lineChart(
                series.rows.map((row) => timeLabel(row.bucket)),
                [{ label: 'error rate', data: series.rows.map((row) => row.errorRate) }],
                { partialLast: isPartial(series.rows.at(-1)?.bucket, bucket), format: percent },
              )
            : empty(),
        ),
      ),
      panel(
        'Top error codes',
        orFailure([codes], () =>
          codes.rows.length
            ? lineChart(
                codes.rows.map((row) => row.errorCode || '(none)'),
                [{ label: 'errors', data: codes.rows.map((row) => row.errors) }],
                { bar: true },
              )
            : empty('No errors in this time range.'),
        ),
      ),
    ),
    h('div', { class: 'gap-above' }),
    panel(
      'Top error messages',
      orFailure([messages], () =>
        table(
          [
            ['errorCode', 'Code'],
            ['errorMessage', 'Message'],
            ['errors', 'Count', number],
          ],
          messages.rows,
        ),
      ),
    ),
  );
}

export async function users(root: HTMLElement) {
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
        orFailure([split], () =>
          split.rows.length
            ? lineChart(
                split.rows.map((row) => row.userType),
                [{ label: 'tokens', data: split.rows.map((row) => row.totalTokens) }],
                { bar: true },
              )
            : empty(),
        ),
      ),
      panel(
        'Internal vs external (cost, USD)',
        orFailure([split], () =>
          split.rows.length
            ? lineChart(
                split.rows.map((row) => row.userType),
                [{ label: 'cost', data: split.rows.map((row) => row.costUsd) }],
                { bar: true, format: moneyTick },
              )
            : empty(),
        ),
      ),
    ),
    h('div', { class: 'gap-above' }),
    panel(
      'Top users by tokens',
      orFailure([top], () =>
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
    ),
  );
}

const CAPTURE_POLICIES = ['full', 'redact', 'metadata-only'];

/** A select of the capture policies (docs/privacy.md) that calls `change` with the one chosen. */
function captureSelect(current: string, label: string, id: string, change?: (policy: string) => Promise<void>) {
  const select = h(
    'select',
    {
      'aria-label': label,
      id,
      ...(change && {
        onChange: async () => {
          select.disabled = true;
          await change(select.value).finally(() => (select.disabled = false));
        },
      }),
    },
    ...CAPTURE_POLICIES.map((policy) => h('option', { value: policy, ...(policy === current ? { selected: true } : {}) }, policy)),
  ) as HTMLSelectElement;
  return select;
}

export async function keys(root: HTMLElement) {
  const created = h('div');
  const name = h('input', { placeholder: 'Name, e.g. checkout-service', 'aria-label': 'Key name', id: 'key-name' }) as HTMLInputElement;
  const environment = h(
    'select',
    { 'aria-label': 'Environment', id: 'key-env' },
    ...['prod', 'qa', 'preview', 'dev'].map((env) => h('option', { value: env }, env)),
  ) as HTMLSelectElement;
  const capture = captureSelect('full', 'Capture policy', 'key-capture');
  const create = h(
    'button',
    {
      id: 'create-key',
      onClick: async () => {
        if (!name.value.trim()) return name.focus();
        const key = await api<Row>('/v1/keys', {
          method: 'POST',
          body: JSON.stringify({ environment: environment.value, name: name.value.trim(), capture: capture.value }),
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
        await renderAudit();
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
              h(
                'tr',
                {},
                h('th', {}, 'Name'),
                h('th', {}, 'Id'),
                h('th', {}, 'Environment'),
                h('th', {}, 'Capture'),
                h('th', {}, 'Created'),
                h('th', {}, ''),
              ),
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
                  h(
                    'td',
                    {},
                    captureSelect(key.capture, `Capture policy of ${key.name}`, `capture-${key.id}`, async (policy) => {
                      await api(`/v1/keys/${key.id}`, { method: 'PATCH', body: JSON.stringify({ capture: policy }) });
                      await renderAudit();
                    }),
                  ),
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
                          await renderAudit();
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
  const auditHolder = h('div', { id: 'audit-log' });
  async function renderAudit() {
    const audit = await api<{ entries: Row[] }>('/v1/audit?limit=20');
    auditHolder.replaceChildren(
      audit.entries.length === 0
        ? empty('No changes recorded yet.')
        : table(
            [
              ['at', 'When', (value: string) => new Date(value).toLocaleString()],
              ['actor', 'Who'],
              ['action', 'What'],
              ['target', 'Which'],
              [
                'details',
                'Details',
                (value: Record<string, unknown>) =>
                  Object.entries(value)
                    .map(([k, v]) => `${k}: ${String(v)}`)
                    .join(', '),
              ],
            ],
            audit.entries,
          ),
    );
  }
  await renderKeyTable();
  const policies = await api<{ environments: Record<string, string> }>('/v1/capture-policies');
  const environmentPolicies = h(
    'div',
    { class: 'row' },
    ...Object.entries(policies.environments).map(([env, policy]) =>
      h(
        'label',
        {},
        h('span', { class: 'badge' }, env),
        ' ',
        captureSelect(policy, `Capture policy of ${env}`, `env-capture-${env}`, async (chosen) => {
          await api(`/v1/capture-policies/${env}`, { method: 'PUT', body: JSON.stringify({ capture: chosen }) });
          await renderAudit();
        }),
      ),
    ),
  );
  // Records that should never have been counted: removed by request id or event key.
  const removeIds = h('textarea', {
    id: 'remove-ids',
    rows: 3,
    'aria-label': 'Request ids or event keys',
    placeholder: 'Request ids or event keys, one per line',
  }) as HTMLTextAreaElement;
  const removeReason = h('input', {
    id: 'remove-reason',
    'aria-label': 'Reason',
    placeholder: 'Reason, e.g. a load test record',
  }) as HTMLInputElement;
  const removalState = h('div', { id: 'removal-state', class: 'muted' });
  const remove = h(
    'button',
    {
      class: 'danger',
      id: 'remove-records',
      onClick: async () => {
        const ids = [
          ...new Set(
            removeIds.value
              .split('\n')
              .map((line) => line.trim())
              .filter(Boolean),
          ),
        ].slice(0, 1000);
        if (ids.length === 0) return removeIds.focus();
        if (!removeReason.value.trim()) return removeReason.focus();
        if (!confirm(`Remove ${ids.length} record id(s) from history? Every total and chart they were counted in changes.`)) return;
        // A request id is the event key of a record sent without an Idempotency-Key: each line is tried as both.
        let job = await api<Row>('/v1/admin/records/removals', {
          method: 'POST',
          body: JSON.stringify({ requestIds: ids, eventKeys: ids, reason: removeReason.value.trim() }),
        });
        removalState.textContent = 'Removing…';
        while (job.state === 'running') {
          await new Promise((resolve) => setTimeout(resolve, 1000));
          job = await api<Row>(`/v1/admin/records/removals/${job.id}`);
        }
        removalState.textContent =
          job.state === 'done' ? `${job.records} record(s) removed; every rollup they were counted in rebuilt.` : `Failed: ${job.error}`;
        await renderAudit();
      },
    },
    'Remove',
  );
  root.append(
    panel('Create an ingest key', h('div', {}, h('div', { class: 'row' }, name, environment, capture, create), created)),
    h('div', { class: 'gap-above' }),
    panel('Keys', tableHolder),
    h('div', { class: 'gap-above' }),
    panel(
      'Capture policy per environment',
      h(
        'div',
        {},
        h(
          'p',
          { class: 'muted' },
          "What is kept of prompts and responses: full, redact (personal data and credentials replaced), or metadata-only (never stored). A key keeps the stricter of its own policy and its environment's.",
        ),
        environmentPolicies,
      ),
    ),
    h('div', { class: 'gap-above' }),
    panel(
      'Remove records from history',
      h(
        'div',
        {},
        h(
          'p',
          { class: 'muted' },
          'Records that should never have been counted (a test record, a producer bug) are deleted and every total they were counted in is rebuilt. Written to the audit log.',
        ),
        h('div', { class: 'row' }, removeIds, removeReason, remove),
        removalState,
      ),
    ),
    h('div', { class: 'gap-above' }),
    panel('Recent changes (audit log)', auditHolder),
  );
  await renderAudit();
}
