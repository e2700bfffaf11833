// Outcomes of a pipeline step are data; only infrastructure failures throw.
export type StepOutcome<T> = { kind: 'ok'; value: T } | { kind: 'deadLetter'; reason: string };

export const ok = <T>(value: T): StepOutcome<T> => ({ kind: 'ok', value });
export const deadLetter = <T>(reason: string): StepOutcome<T> => ({ kind: 'deadLetter', reason });
