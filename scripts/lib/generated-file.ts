// What every `npm run gen:*` script does with the text it generated: write it, or with
// `--check` (run by npm test) write nothing and fail when the file on disk differs.
import fs from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { format, resolveConfig } from 'prettier';
import { projectRoot as root } from './project-root.js';

/** Formats `text` as `prettier --check` expects the file, then writes or checks it. */
export async function writeGenerated(target: string, text: string, options: { check: boolean; command: string }): Promise<void> {
  const file = path.join(root, target);
  const formatted = await format(text, { ...(await resolveConfig(file)), filepath: file });
  if (options.check) {
    if (!fs.existsSync(file) || fs.readFileSync(file, 'utf8') !== formatted) {
      console.error(`${target} is stale: run npm run ${options.command}`);
      process.exitCode = 1;
    }
  } else {
    fs.writeFileSync(file, formatted);
    console.log(`wrote ${target}`);
  }
}

/** A generator's command line: `--help`, and `--check` (returned as `check`). */
export function generatorOptions(name: string, description: string): { check: boolean } {
  const { check } = new Command(name)
    .description(description)
    .option('--check', 'write nothing; exit 1 when the file is stale')
    .parse(process.argv)
    .opts<{ check?: boolean }>();
  return { check: check === true };
}
