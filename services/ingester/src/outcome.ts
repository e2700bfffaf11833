// How a record leaves the pipeline: every record the ingester takes from the topic
// ends in exactly one of the outcomes below, and nothing else lets it go (its offset
// commits only once every record of its chunk has one; chunk.ts). The runner counts
// them (otm_ingester_records_total{outcome}); the dead letters sent are the records
// whose outcome is `deadLetter`, with the reason from DEAD_LETTER_REASONS, the one
// place a dead-letter reason is written (docs/topic-contract.md is generated from it).
// A record not yet through (a rebalance took its partition, the process stops) has no
// outcome: it is not committed and comes again.

/** Every way a record leaves, and what it means (docs/ingester.md lists them). */
export const RECORD_OUTCOMES = {
  loaded: 'stored in usage_events (and its text in usage_io), counted by the rollups once',
  probe: "the freshness canary's record, stored in canary_probes and never counted as usage",
  duplicate: 'stored before with the same record (Redis holds its key, or ClickHouse does, or it came twice in the unit): dropped',
  erased: "an erased user's record received before the erasure: dropped, never stored nor dead-lettered",
  deadLetter: 'can never be loaded: sent unchanged to the dead-letter topic with its reason (DEAD_LETTER_REASONS)',
} as const;

export type OutcomeKind = keyof typeof RECORD_OUTCOMES;

/** A record that can never be loaded: why (a code and its text), and more headers for its dead letter. */
export interface DeadLettered {
  kind: 'deadLetter';
  code: DeadLetterCode;
  reason: string;
  headers?: DeadLetterHeaders;
}

export type RecordOutcome = { kind: Exclude<OutcomeKind, 'deadLetter'> } | DeadLettered;

/**
 * Why a record can never be loaded: a code (the `x-dlq-reason-code` header; a consumer
 * of the dead-letter topic routes on it), what it means, and the text of
 * `x-dlq-reason` with the detail. The only place a dead-letter reason is written;
 * docs/topic-contract.md is generated from this list.
 */
export const DEAD_LETTER_REASONS = {
  no_wire_header: {
    meaning: 'the value is shorter than the wire header, or its first byte is not the magic byte 0',
    reason: ({ detail }: { detail: string }) => detail,
  },
  unknown_schema: {
    meaning: 'the schema id of the wire header is not in the registry',
    reason: ({ schemaId }: { schemaId: number }) => `unknown schema id ${schemaId}`,
  },
  not_json: { meaning: 'the value after the wire header is not valid JSON', reason: () => 'value is not valid JSON' },
  schema_mismatch: {
    meaning: 'the document does not match the schema its id names',
    reason: ({ schemaId, path, message }: { schemaId: number; path: string; message: string }) =>
      `does not match schema ${schemaId}: ${path} ${message}`.trim(),
  },
  foreign_key_scope: {
    meaning: 'the event key is scoped by another API key than meta.apiKeyId',
    reason: ({ eventKey }: { eventKey: string }) =>
      `meta.eventKey ${JSON.stringify(eventKey.slice(0, 80))} is scoped by another API key than meta.apiKeyId`,
  },
  enrich_failed: {
    meaning: 'the record could not be turned into rows: a value its column cannot hold, named (not expected: enrich is total)',
    reason: ({ detail }: { detail: string }) => `enrich failed: ${detail}`,
  },
  event_key_collision: {
    meaning: 'the event key was loaded before with a different record',
    reason: ({ eventKey }: { eventKey: string }) => `event key collision: ${eventKey} was loaded with a different record`,
  },
  clickhouse_refused: {
    meaning: 'ClickHouse refused the row (its code and message in headers)',
    reason: ({ code, message }: { code: number; message: string }) => `clickhouse refused the row: code ${code}: ${message}`,
  },
} as const;

export type DeadLetterCode = keyof typeof DEAD_LETTER_REASONS;
export type ReasonParams<C extends DeadLetterCode> = Parameters<(typeof DEAD_LETTER_REASONS)[C]['reason']>[0];

/** The text of `x-dlq-reason` for `code`, from the catalog. */
export function deadLetterReason<C extends DeadLetterCode>(code: C, params: ReasonParams<C>): string {
  return (DEAD_LETTER_REASONS[code].reason as (params: unknown) => string)(params);
}

/** The headers of a dead letter, and what each holds (docs/topic-contract.md is generated from this). */
export const DEAD_LETTER_HEADERS = {
  'x-dlq-reason-code': 'why the record can never be loaded, as a code (the list below)',
  'x-dlq-reason': 'the same in words, with the detail (at most 1,000 characters)',
  'x-dlq-source-topic': 'the topic it was read from',
  'x-dlq-source-partition': 'its partition there',
  'x-dlq-source-offset': 'its offset there',
  'x-dlq-at': 'when it was dead-lettered (RFC 3339)',
  'x-dlq-clickhouse-code': 'a row ClickHouse refused: its error code',
  'x-dlq-clickhouse-message': 'a row ClickHouse refused: its message',
  'x-dlq-event-key': 'an event key collision: the key',
  'x-request-id': "the original message's `x-request-id`, when it had one",
} as const;

export type DeadLetterHeaders = Partial<Record<keyof typeof DEAD_LETTER_HEADERS, string>>;

/** A record that can never be loaded, as it goes to the dead-letter topic (dead-letter.ts sends it). */
export interface DeadLetter {
  topic: string;
  partition: number;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  code: DeadLetterCode;
  reason: string;
  /** More headers (e.g. the ClickHouse code and message of a refused row). */
  headers?: DeadLetterHeaders;
}

/** What a step answers for a record: its value, or the dead letter it must become. Only infrastructure failures throw. */
export type StepOutcome<T> = { kind: 'ok'; value: T } | DeadLettered;

export const ok = <T>(value: T): StepOutcome<T> => ({ kind: 'ok', value });
export const deadLetter = <C extends DeadLetterCode>(code: C, params: ReasonParams<C>, headers?: DeadLetterHeaders): DeadLettered =>
  headers === undefined
    ? { kind: 'deadLetter', code, reason: deadLetterReason(code, params) }
    : { kind: 'deadLetter', code, reason: deadLetterReason(code, params), headers };
