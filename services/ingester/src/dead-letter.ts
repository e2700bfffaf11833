// Messages that can never be loaded go to the dead-letter topic unchanged, with
// the reason and their origin in headers. They never block the partition.
import { sendAcknowledged, type Producer } from '@otm/shared/kafka';

/** The headers of a dead letter, and what each holds (docs/topic-contract.md is generated from this). */
export const DEAD_LETTER_HEADERS = {
  'x-dlq-reason': 'why the record can never be loaded (at most 1,000 characters)',
  'x-dlq-source-topic': 'the topic it was read from',
  'x-dlq-source-partition': 'its partition there',
  'x-dlq-source-offset': 'its offset there',
  'x-dlq-at': 'when it was dead-lettered (RFC 3339)',
  'x-dlq-clickhouse-code': 'a row ClickHouse refused: its error code',
  'x-dlq-clickhouse-message': 'a row ClickHouse refused: its message',
  'x-dlq-event-key': 'an event key collision: the key',
  'x-request-id': "the original message's `x-request-id`, when it had one",
} as const;

export interface DeadLetter {
  topic: string;
  partition: number;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  reason: string;
  /** More headers (e.g. the ClickHouse code and message of a refused row). */
  headers?: Partial<Record<keyof typeof DEAD_LETTER_HEADERS, string>>;
}

export async function sendDeadLetters(producer: Producer, dlqTopic: string, letters: readonly DeadLetter[]): Promise<void> {
  if (letters.length === 0) return;
  await sendAcknowledged(producer, {
    topic: dlqTopic,
    acks: -1,
    messages: letters.map((letter) => ({
      key: letter.key,
      value: letter.value,
      headers: {
        'x-dlq-reason': letter.reason.slice(0, 1000),
        'x-dlq-source-topic': letter.topic,
        'x-dlq-source-partition': String(letter.partition),
        'x-dlq-source-offset': letter.offset,
        'x-dlq-at': new Date().toISOString(),
        ...letter.headers,
      },
    })),
  });
}
