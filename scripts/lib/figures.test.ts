import { describe, expect, it } from 'vitest';
import { figureNames, formatFigure, MissingFigure, renderFigures } from './figures.js';

const results = { ingester: { rowsPerSec: 14530.77 }, redaction: { usPerKibProse: 3.1844 }, analytics: { share: 0.00157 } };

describe('renderFigures', () => {
  it('sets each marked figure from the results, as the docs write numbers', () => {
    const text =
      'The ingester loads <!-- bench:ingester.rowsPerSec -->0<!-- /bench --> rows/s; prose costs <!-- bench:redaction.usPerKibProse:1 -->9<!-- /bench --> µs per KiB.';
    expect(renderFigures(text, results)).toBe(
      'The ingester loads <!-- bench:ingester.rowsPerSec -->14,531<!-- /bench --> rows/s; prose costs <!-- bench:redaction.usPerKibProse:1 -->3.2<!-- /bench --> µs per KiB.',
    );
    expect(figureNames(text)).toEqual(['ingester.rowsPerSec', 'redaction.usPerKibProse']);
  });

  it('a figure changed on one side only is found: in the text, or in the results', () => {
    const text = renderFigures('<!-- bench:ingester.rowsPerSec -->x<!-- /bench -->', results);
    expect(renderFigures(text, results)).toBe(text);
    expect(renderFigures(text.replace('14,531', '11,231'), results)).not.toBe(text.replace('14,531', '11,231'));
    expect(renderFigures(text, { ingester: { rowsPerSec: 11231 } })).not.toBe(text);
  });

  it('percentages, and a name the results do not hold', () => {
    expect(renderFigures('<!-- bench:analytics.share:2% -->?<!-- /bench -->', results)).toContain('-->0.16 %<!--');
    expect(() => renderFigures('<!-- bench:ingester.gone -->1<!-- /bench -->', results)).toThrow(MissingFigure);
    expect(formatFigure(1234.5, 1, false)).toBe('1,234.5');
  });
});
