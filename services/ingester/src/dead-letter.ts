// Messages that can never be loaded go to the dead-letter topic unchanged, with
// the reason and their origin in headers. They never block the partition. Why a
// record is dead-lettered is an outcome (outcome.ts, DEAD_LETTER_REASONS).
import type { RecordSender } from '@otm/shared/kafka';
import type { DeadLetter } from './outcome.js';

export async function sendDeadLetters(sender: RecordSender, dlqTopic: string, letters: readonly DeadLetter[]): Promise<void> {
  if (letters.length === 0) return;
  await sender.send(
    dlqTopic,
    letters.map((letter) => ({
      key: letter.key,
      value: letter.value,
      headers: {
        'x-dlq-reason-code': letter.code,
        'x-dlq-reason': letter.reason.slice(0, 1000),
        'x-dlq-source-topic': letter.topic,
        'x-dlq-source-partition': String(letter.partition),
        'x-dlq-source-offset': letter.offset,
        'x-dlq-at': new Date().toISOString(),
        ...letter.headers,
      },
    })),
  );
}
