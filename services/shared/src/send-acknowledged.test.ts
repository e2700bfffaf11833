// sendAcknowledged: a send counts only when the broker answered for every partition
// its messages went to (kafkajs 2.2.4 can resolve without producing to a partition
// whose leader moved; see kafka.ts).
import { describe, expect, it } from 'vitest';
import { IncompleteSendError, sendAcknowledged, type Producer } from './kafka.js';

/** A stand-in for kafkajs: assigns partitions as given and answers for `answered` only. */
function producer(partitions: number[], answered: { partition: number; errorCode: number }[]): Producer {
  return {
    send: async ({ topic, messages }: { topic: string; messages: { partition?: number }[] }) => {
      messages.forEach((message, index) => (message.partition = partitions[index]));
      return answered.map((entry) => ({ topicName: topic, ...entry }));
    },
  } as unknown as Producer;
}

const record = (count: number) => ({ topic: 'usage', messages: Array.from({ length: count }, (_, i) => ({ key: `k${i}`, value: 'v' })) });

describe('sendAcknowledged', () => {
  it('resolves when every partition written to was answered', async () => {
    const answered = [
      { partition: 0, errorCode: 0 },
      { partition: 1, errorCode: 0 },
    ];
    await expect(sendAcknowledged(producer([0, 1, 1], answered), record(3))).resolves.toHaveLength(2);
  });

  it('throws when a partition is missing from the answer (the leader moved mid-send)', async () => {
    await expect(
      sendAcknowledged(
        producer(
          [0, 2, 1],
          [
            { partition: 0, errorCode: 0 },
            { partition: 1, errorCode: 0 },
          ],
        ),
        record(3),
      ),
    ).rejects.toThrow(IncompleteSendError);
  });

  it('throws when a partition was answered with an error, or a message has no partition', async () => {
    await expect(sendAcknowledged(producer([0], [{ partition: 0, errorCode: 6 }]), record(1))).rejects.toThrow(/partition\(s\) 0/);
    await expect(sendAcknowledged(producer([], []), record(1))).rejects.toThrow(IncompleteSendError);
  });
});
