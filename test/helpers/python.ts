// A Python virtual environment for tests that run Python code (the validator parity
// check, the example consumer and producer): made once per set of requirement files and
// interpreter, kept per machine (not per checkout: a new clone reuses them) under
// ~/.cache/otm-telemetry/python/ (OTM_PYTHON_CACHE to move it), and reused while those
// files are unchanged. Packages come from pip's configured index. Without a python3 on the PATH it answers undefined, and the
// test says it skipped and why.
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { projectRoot } from './stack.js';
import { machineCache } from '../../scripts/lib/machine-cache.js';

const run = promisify(execFile);

/** The python3 on the PATH, or undefined when there is none. */
export async function systemPython(): Promise<string | undefined> {
  try {
    await run('python3', ['--version']);
    return 'python3';
  } catch {
    return undefined;
  }
}

/**
 * The interpreter of a virtualenv with the packages of `requirementFiles` (paths
 * relative to the project) installed, or undefined when Python is absent.
 */
export async function pythonWith(requirementFiles: string[]): Promise<string | undefined> {
  const python = await systemPython();
  if (!python) return undefined;
  const digest = createHash('sha256');
  digest.update((await run(python, ['--version'])).stdout);
  for (const file of requirementFiles) digest.update(fs.readFileSync(path.join(projectRoot, file)));
  const cache = machineCache('python', process.env.OTM_PYTHON_CACHE);
  const home = path.join(cache, digest.digest('hex').slice(0, 16));
  const interpreter = path.join(home, 'bin', 'python');
  const ready = path.join(home, '.installed');
  if (fs.existsSync(ready)) return interpreter;
  // One checkout makes it at a time (a venv cannot be moved once made: its scripts name
  // its path): the others wait for it. A lock older than the longest install is one a
  // killed run left: taken over.
  const lock = `${home}.lock`;
  fs.mkdirSync(cache, { recursive: true });
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch {
      if (fs.existsSync(ready)) return interpreter;
      const age = Date.now() - (fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 600_000) fs.rmSync(lock, { recursive: true, force: true });
      else await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
  try {
    // Made by another run between the look and the lock.
    if (!fs.existsSync(ready)) await makeVirtualenv(python, home, requirementFiles);
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
  return interpreter;
}

async function makeVirtualenv(python: string, home: string, requirementFiles: string[]): Promise<void> {
  const interpreter = path.join(home, 'bin', 'python');
  const ready = path.join(home, '.installed');
  fs.rmSync(home, { recursive: true, force: true });
  await run(python, ['-m', 'venv', home]);
  const requirements = requirementFiles.flatMap((file) => ['-r', path.join(projectRoot, file)]);
  await run(interpreter, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', ...requirements], {
    maxBuffer: 16 * 1024 * 1024,
  });
  fs.writeFileSync(ready, `${requirementFiles.join('\n')}\n`);
}

/** Runs a Python program with the interpreter; its stdout, or the error with stderr. */
export async function runPython(
  interpreter: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<string> {
  const { stdout } = await run(interpreter, args, {
    cwd: projectRoot,
    env: { ...process.env, PYTHONUNBUFFERED: '1', ...options.env },
    timeout: options.timeoutMs ?? 120_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}
