// The dashboard's building blocks: elements, formats, cards, panels, charts and tables.
import { Chart, registerables } from 'chart.js';
import { state, type Row } from './api.js';

Chart.register(...registerables);

export const charts: Chart[] = [];

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Record<string, any> = {}, ...children: (Node | string | null)[]) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name.startsWith('on')) element.addEventListener(name.slice(2).toLowerCase(), value);
    else if (name === 'class') element.className = value;
    else element.setAttribute(name, String(value));
  }
  for (const child of children) if (child !== null) element.append(child);
  return element;
}

export const bucketFor = (since: string) => ({ '1h': 'minute', '24h': 'hour', '7d': 'hour', '30d': 'day' })[since] ?? 'hour';
const BUCKET_MS: Record<string, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };
/** Whether the bucket starting at `iso` is still filling (it holds the present): drawn as partial, never read as a drop. */
export const isPartial = (iso: string | undefined, bucket: string) =>
  iso !== undefined && Date.parse(iso) + (BUCKET_MS[bucket] ?? 0) > Date.now();

/** Thousand, million, billion, trillion, quadrillion. */
const SUFFIXES = ['', 'K', 'M', 'B', 'T', 'Q'];
/**
 * A number that fits a card or an axis: exact below a million, else three significant
 * digits and a suffix (18.0 Q for 18 quadrillion; past that, a power of ten). The exact
 * value goes in the element's title.
 */
export function compact(value: number, digits = 0): string {
  const magnitude = Math.abs(value);
  if (!Number.isFinite(value)) return String(value);
  if (magnitude < 1e6) return value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  let tier = Math.floor(Math.log10(magnitude) / 3);
  if (tier >= SUFFIXES.length) return value.toExponential(2);
  let scaled = Number((value / 10 ** (tier * 3)).toPrecision(3));
  // 999.95 M reads 1.00 B, not 1000 M.
  if (Math.abs(scaled) >= 1000) {
    tier++;
    if (tier >= SUFFIXES.length) return value.toExponential(2);
    scaled = Number((scaled / 1000).toPrecision(3));
  }
  return `${scaled.toPrecision(3)} ${SUFFIXES[tier]}`;
}
export const number = (value: unknown, digits = 0) => compact(Number(value ?? 0), digits);
/** USD: cents, and down to a hundredth of a cent below a dollar; from $100,000 compact ($6.76 B). */
export const money = (value: unknown) => {
  const amount = Number(value ?? 0);
  const magnitude = Math.abs(amount);
  if (magnitude >= 1e5) {
    const thousands = Number((amount / 1e3).toPrecision(3));
    return `$${Math.abs(thousands) < 1000 ? `${thousands.toPrecision(3)} K` : compact(Math.abs(amount) < 1e6 ? Math.sign(amount) * 1e6 : amount)}`;
  }
  return `$${amount.toLocaleString('en-US', { maximumFractionDigits: magnitude < 1 ? 4 : 2, minimumFractionDigits: 2 })}`;
};
/** USD on an axis: whole dollars, or cents below $10; compact from a million. */
export const moneyTick = (value: number) => `$${compact(value, Math.abs(value) < 10 && value % 1 !== 0 ? 2 : 0)}`;
/** The exact value, for a title: every digit, grouped. */
export const exact = (value: unknown) =>
  typeof value === 'number' || (typeof value === 'string' && value !== '' && Number.isFinite(Number(value)))
    ? Number(value).toLocaleString('en-US', { maximumFractionDigits: 6 })
    : '';
/** A share as a percentage; null (not known, e.g. no record reports it) is a dash. */
export const percent = (value: unknown) => (value === null ? '—' : `${(Number(value ?? 0) * 100).toFixed(2)}%`);
export const ms = (value: unknown) => (value === null || value === undefined ? '–' : `${number(value)} ms`);
export const timeLabel = (iso: string) => {
  const date = new Date(iso);
  return state.since === '30d'
    ? date.toISOString().slice(5, 10)
    : date
        .toISOString()
        .slice(state.since === '7d' ? 5 : 11, 16)
        .replace('T', ' ');
};

/** A stat card; `raw` (the unformatted value) is shown exactly on hover. */
export function card(label: string, value: string, raw?: unknown) {
  const title = exact(raw);
  return h(
    'div',
    { class: 'card' },
    h('div', { class: 'label' }, label),
    h('div', { class: 'value', 'data-metric': label, ...(title ? { title } : {}) }, value),
  );
}

export function panel(title: string, body: Node) {
  return h('section', { class: 'panel' }, h('h3', {}, title), body);
}

/** What a failed query said (a 504 names what to narrow), shown where its chart or table would be. */
export function failure(message: string) {
  return h('div', { class: 'error query-error' }, message);
}

/** The drawing, or the failure of the first failed answer it needs. */
export function orFailure(answers: { failed?: string }[], draw: () => Node): Node {
  const failed = answers.find((answer) => answer.failed !== undefined);
  return failed ? failure(failed.failed!) : draw();
}

export function empty(text = 'No data in this time range yet. Post usage records to the gateway and they appear here within seconds.') {
  return h('div', { class: 'empty' }, text);
}

/**
 * A chart. Counts are bars (`bar`); rates and latencies are straight lines between the
 * points (no smoothing: a line never passes the data). `partialLast`: the last bucket is
 * still filling, so it is drawn pale (bars) or dashed (lines) and labelled "so far".
 * Axis ticks and tooltips are compact numbers (`format`). The y axis's width and ticks
 * are written on the holder (data-y-axis-width, data-y-ticks) for the browser tests.
 */
export function lineChart(
  labels: string[],
  datasets: { label: string; data: (number | null)[] }[],
  options: { stacked?: boolean; bar?: boolean; partialLast?: boolean; format?: (value: number) => string } = {},
) {
  const canvas = h('canvas');
  const holder = h('div', { class: 'chart', ...(options.partialLast ? { 'data-partial': 'last' } : {}) }, canvas);
  const palette = ['#3454d1', '#12b76a', '#f79009', '#d92d20', '#7a5af8', '#0ba5ec'];
  const last = labels.length - 1;
  const shownLabels = options.partialLast ? labels.map((label, index) => (index === last ? `${label} (so far)` : label)) : labels;
  const format = options.format ?? ((value: number) => compact(value, Math.abs(value) < 10 && value % 1 !== 0 ? 2 : 0));
  charts.push(
    new Chart(canvas, {
      type: options.bar ? 'bar' : 'line',
      data: {
        labels: shownLabels,
        datasets: datasets.map((set, index) => {
          const color = palette[index % palette.length]!;
          return {
            ...set,
            borderColor: color,
            backgroundColor: options.bar
              ? set.data.map((_, at) => color + (options.partialLast && at === last ? '55' : 'cc'))
              : color + '33',
            fill: !options.bar && datasets.length === 1,
            tension: 0,
            pointRadius: labels.length > 60 ? 0 : 2,
            ...(options.partialLast && !options.bar
              ? { segment: { borderDash: (context: { p1DataIndex: number }) => (context.p1DataIndex === last ? [5, 4] : undefined) } }
              : {}),
          };
        }),
      },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        plugins: {
          legend: { display: datasets.length > 1 },
          tooltip: { callbacks: { label: (item) => `${item.dataset.label}: ${exact(item.parsed.y)}` } },
        },
        scales: {
          x: { stacked: options.stacked },
          y: { stacked: options.stacked, beginAtZero: true, ticks: { callback: (value) => format(Number(value)) } },
        },
      },
      plugins: [
        {
          id: 'axis-report',
          afterLayout: (chart) => {
            holder.dataset.yAxisWidth = String(Math.round(chart.scales.y!.width));
            holder.dataset.width = String(Math.round(chart.width));
            holder.dataset.yTicks = chart.scales.y!.ticks.map((tick) => String(tick.label)).join('|');
          },
        },
      ],
    }),
  );
  return holder;
}

export function table(columns: [key: string, title: string, format?: (value: any) => string][], rows: Row[]) {
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
          ...columns.map(([key, , format]) =>
            h('td', format ? { class: 'num', title: exact(row[key]) } : {}, format ? format(row[key]) : String(row[key] ?? '')),
          ),
        ),
      ),
    ),
  );
}
