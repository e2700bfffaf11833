// The answer's byte budget for error lists: the leading items that fit are kept, the
// rest cut and marked truncated, whichever list it is spent on.
import { afterEach, describe, expect, it } from 'vitest';
import { errorReportLimits, fitErrorBudget, setErrorReportLimits, withinErrorBudget } from './errors.js';

const original = { perItem: errorReportLimits.perItem, answerBytes: errorReportLimits.answerBytes };
afterEach(() => setErrorReportLimits(original));

describe('the error byte budget', () => {
  it('counts the leading items that fit, with what is spent already', () => {
    setErrorReportLimits({ perItem: 20, answerBytes: 10 });
    expect(withinErrorBudget([4, 4, 4], (n) => n)).toBe(2);
    expect(withinErrorBudget([4, 4, 4], (n) => n, 3)).toBe(1);
    expect(withinErrorBudget([10], (n) => n)).toBe(1);
    expect(withinErrorBudget([11, 1], (n) => n)).toBe(0); // never a later, smaller one after a cut
    expect(withinErrorBudget([], (n: number) => n)).toBe(0);
  });

  it("cuts the entries' errors from the first that does not fit, marks them truncated and says so", () => {
    const error = { path: '/x', message: 'must be integer' };
    const size = JSON.stringify([error]).length;
    setErrorReportLimits({ perItem: 20, answerBytes: size * 2 });
    const entries: { errors?: (typeof error)[]; truncated?: boolean }[] = [
      { errors: [error] },
      {},
      { errors: [error] },
      { errors: [error] },
    ];
    expect(fitErrorBudget(entries)).toBe(true);
    expect(entries).toEqual([{ errors: [error] }, {}, { errors: [error] }, { truncated: true }]);
    expect(fitErrorBudget([{ errors: [error] }])).toBe(false);
  });
});
