// Which licenses a runtime dependency may have (scripts/gen-licenses.ts,
// docs/dependency-licenses.md): permissive ones, with no obligation beyond keeping
// the notice. Anything else (copyleft, unknown, a checker's guess marked `*`) fails.

export const ALLOWED_LICENSES: ReadonlySet<string> = new Set([
  'MIT',
  'ISC',
  'BSD-2-Clause',
  'BSD-3-Clause',
  'Apache-2.0',
  '0BSD',
  'BlueOak-1.0.0',
  'CC0-1.0',
  'Unlicense',
]);

/** Whether an SPDX expression is allowed: one alternative of an OR suffices; every part of an AND must be. */
export function licenseAllowed(expression: string): boolean {
  const text = expression.replace(/[()]/g, ' ').trim();
  if (/\sOR\s/.test(text)) return text.split(/\sOR\s/).some((part) => licenseAllowed(part));
  if (/\sAND\s/.test(text)) return text.split(/\sAND\s/).every((part) => licenseAllowed(part));
  return ALLOWED_LICENSES.has(text);
}
