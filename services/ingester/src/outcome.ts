// Outcomes of a pipeline step are data; only infrastructure failures throw.
import { deadLetterReason, type DeadLetterCode, type ReasonParams } from './dead-letter.js';

export type StepOutcome<T> = { kind: 'ok'; value: T } | { kind: 'deadLetter'; code: DeadLetterCode; reason: string };

export const ok = <T>(value: T): StepOutcome<T> => ({ kind: 'ok', value });
export const deadLetter = <T, C extends DeadLetterCode = DeadLetterCode>(code: C, params: ReasonParams<C>): StepOutcome<T> => ({
  kind: 'deadLetter',
  code,
  reason: deadLetterReason(code, params),
});
