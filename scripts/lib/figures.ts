// Figures quoted from the benchmarks in the docs, kept equal to bench/results/latest.json
// (scripts/gen-figures.ts). In Markdown a figure is written between two comments that
// name it, which a reader does not see:
//
//   <!-- bench:ingester.rowsPerSec -->14,531<!-- /bench -->
//   <!-- bench:redaction.usPerKibProse:1 -->3.2<!-- /bench -->   (one decimal)
//
// The name is a path into latest.json; after a colon, the decimals (0 by default),
// and `%` for a share shown as a percentage. The text between the comments is
// rewritten from the results; a name the results do not hold is an error.

const FIGURE = /<!-- bench:([A-Za-z0-9_.[\]]+)(?::(\d)(%?))? -->([^<]*)<!-- \/bench -->/g;

export class MissingFigure extends Error {}

function lookup(results: unknown, name: string): unknown {
  let value: unknown = results;
  for (const part of name.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** A number as the docs write it: thousands separated by commas, `decimals` digits. */
export function formatFigure(value: number, decimals: number, percent: boolean): string {
  const shown = percent ? value * 100 : value;
  return shown.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals }) + (percent ? ' %' : '');
}

/** The text with every marked figure set from the results. Throws MissingFigure on a name the results lack. */
export function renderFigures(text: string, results: unknown, file = ''): string {
  return text.replace(FIGURE, (_, name: string, decimals: string | undefined, percent: string | undefined) => {
    const value = lookup(results, name);
    if (typeof value !== 'number' || !Number.isFinite(value)) throw new MissingFigure(`${file}: no figure ${name} in the results`);
    const shown = formatFigure(value, Number(decimals ?? 0), percent === '%');
    return `<!-- bench:${name}${decimals !== undefined ? `:${decimals}${percent ?? ''}` : ''} -->${shown}<!-- /bench -->`;
  });
}

/** The names of the figures a text quotes. */
export function figureNames(text: string): string[] {
  return [...text.matchAll(FIGURE)].map((match) => match[1]!);
}
