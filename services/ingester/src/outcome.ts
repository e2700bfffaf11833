// Outcomes of a pipeline step are data; only infrastructure failures throw.
import type { DeadLetterCode } from './dead-letter.js';

export type StepOutcome<T> = { kind: 'ok'; value: T } | { kind: 'deadLetter'; code: DeadLetterCode; reason: string };

export const ok = <T>(value: T): StepOutcome<T> => ({ kind: 'ok', value });
export const deadLetter = <T>(code: DeadLetterCode, reason: string): StepOutcome<T> => ({ kind: 'deadLetter', code, reason });
