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
export const number = (value: unknown, digits = 0) =>
  Number(value ?? 0).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
export const money = (value: unknown) =>
  `$${Number(value ?? 0).toLocaleString('en-US', { maximumFractionDigits: 4, minimumFractionDigits: 2 })}`;
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

export function card(label: string, value: string) {
  return h('div', { class: 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value', 'data-metric': label }, value));
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

export function lineChart(
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
          ...columns.map(([key, , format]) => h('td', { class: format ? 'num' : '' }, format ? format(row[key]) : String(row[key] ?? ''))),
        ),
      ),
    ),
  );
}
