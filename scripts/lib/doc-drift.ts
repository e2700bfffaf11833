// What the Markdown of the repository names must exist (scripts/doc-drift.test.ts):
// every environment variable (a backticked UPPER_SNAKE name) is read somewhere in the
// code, every `npm run <script>` is a script of package.json, every route
// (`/v1/…`, `/healthz`, …) is one a service registers, and every repository path (a
// backticked `services/…`, `deploy/…`, … or a relative link) is there. A doc that
// names something the code no longer has is found here, not by a reader.

export interface Known {
  /** Whether a word (a variable's name) occurs in the code. */
  inCode(word: string): boolean;
  scripts: ReadonlySet<string>;
  /** Routes the services register, parameters as `:name`. */
  routes: readonly string[];
  /** Whether a path, relative to the repository's root, exists. */
  exists(relative: string): boolean;
}

export interface Drift {
  file: string;
  line: number;
  kind: 'variable' | 'script' | 'route' | 'path' | 'link';
  name: string;
}

/** The repository's top folders a backticked path may start with. */
const TOP_FOLDERS = ['services', 'schemas', 'deploy', 'scripts', 'docs', 'clients', 'examples', 'test', 'bench', 'patches', '.ci'];

const VARIABLE = /`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=[^`]*)?`/g;
const SCRIPT = /npm run ([a-z][a-z0-9:-]*)/g;
const ROUTE = /(?:^|[\s`(])((?:\/v1\/[A-Za-z0-9/:{}._-]+)|\/healthz|\/readyz|\/openapi\.json)/g;
const PATH = /`((?:\.\/)?[\w.-]+(?:\/[\w.-]+)+\/?)`/g;
const LINK = /\]\(([^)\s#]+)(?:#[^)\s]*)?\)/g;

/** A route as a pattern: parameters (`{id}`, `:id`, `<id>`, `${…}`) match one segment. */
function routePattern(route: string): RegExp {
  const segments = route
    .replace(/\/$/, '')
    .split('/')
    .map((segment) => (/^[{:<$]/.test(segment) ? '[^/]+' : segment.replace(/[.*+?^()|[\]\\]/g, '\\$&')));
  return new RegExp(`^${segments.join('/')}$`);
}

function routeKnown(route: string, known: Known): boolean {
  const asked = route.replace(/[.,;:]+$/, '').replace(/\/$/, '');
  // `/v1/…` with an ellipsis, or a prefix ending in `/`, names a family, not a route.
  if (asked.includes('…')) return true;
  const documented = routePattern(asked);
  return known.routes.some((registered) => {
    const concrete = registered.replace(/:[^/]+/g, 'x').replace(/\$\{[^}]+\}/g, 'x');
    return routePattern(registered).test(asked.replace(/\{[^}]+\}|<[^>]+>|:[A-Za-z]+/g, 'x')) || documented.test(concrete);
  });
}

/** Every name in one Markdown file that the code does not have. `file` is relative to the root. */
export function findDrift(file: string, text: string, known: Known): Drift[] {
  const found: Drift[] = [];
  const folder = file.includes('/') ? file.slice(0, file.lastIndexOf('/')) : '';
  let inFence = false;
  text.split('\n').forEach((line, index) => {
    const at = { file, line: index + 1 };
    if (/^\s*```/.test(line)) inFence = !inFence;
    for (const [, name] of line.matchAll(VARIABLE)) {
      if (!known.inCode(name!)) found.push({ ...at, kind: 'variable', name: name! });
    }
    for (const [, name] of line.matchAll(SCRIPT)) {
      if (!known.scripts.has(name!)) found.push({ ...at, kind: 'script', name: name! });
    }
    for (const [, route] of line.matchAll(ROUTE)) {
      if (!routeKnown(route!, known)) found.push({ ...at, kind: 'route', name: route! });
    }
    if (inFence) return;
    for (const [, candidate] of line.matchAll(PATH)) {
      const relative = candidate!.replace(/^\.\//, '');
      if (!TOP_FOLDERS.includes(relative.split('/')[0]!)) continue;
      // Globs and placeholders name families of files.
      if (/[*<>{}]|…/.test(relative)) continue;
      // Build output (`npm run build` writes each workspace's dist/): its workspace must exist.
      const built = /^(.*?)\/dist(\/|$)/.exec(relative)?.[1];
      if (built !== undefined) {
        if (!known.exists(built)) found.push({ ...at, kind: 'path', name: candidate! });
        continue;
      }
      if (!known.exists(relative) && !known.exists(joinPath(folder, relative))) found.push({ ...at, kind: 'path', name: candidate! });
    }
    for (const [, target] of line.matchAll(LINK)) {
      if (/^[a-z]+:/i.test(target!) || target!.startsWith('/')) continue;
      if (!known.exists(joinPath(folder, target!))) found.push({ ...at, kind: 'link', name: target! });
    }
  });
  return found;
}

/** `folder/relative` with `..` and `.` resolved, POSIX style. */
export function joinPath(folder: string, relative: string): string {
  const parts: string[] = [];
  for (const part of [...(folder ? folder.split('/') : []), ...relative.split('/')]) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return parts.join('/');
}
