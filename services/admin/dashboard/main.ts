// The operators' dashboard: Overview, Models, Errors, Users and AI Module
// Configurations (keys). Plain TypeScript and Chart.js; every number comes from the
// analytics API with the admin token kept in this tab's sessionStorage. This file
// holds the frame (sign-in, navigation, filters); pages.ts the pages, ui.ts the
// building blocks, api.ts the API client.
import { Unauthorized, state } from './api.js';
import { charts, h } from './ui.js';
import { errors, keys, models, overview, users } from './pages.js';

const app = document.getElementById('app')!;

const PAGES: [id: string, title: string][] = [
  ['overview', 'Overview'],
  ['models', 'Models'],
  ['errors', 'Errors'],
  ['users', 'Users'],
  ['keys', 'AI Module Configurations'],
];

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
