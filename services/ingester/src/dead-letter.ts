// Messages that can never be loaded go to the dead-letter topic unchanged, with
// the reason and their origin in headers. They never block the partition.
import { sendAcknowledged, type Producer } from '@otm/shared/kafka';

export interface DeadLetter {
  topic: string;
  partition: number;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  reason: string;
  /** More headers (e.g. the ClickHouse code and message of a refused row). */
  headers?: Record<string, string>;
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
