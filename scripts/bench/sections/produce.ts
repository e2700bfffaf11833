// 2. Produce path ------------------------------------------------------------------
import { createDurableProducer, ensureTopic, openKafkajsSender } from '@otm/shared/kafka';
import { ProduceBatcher } from '../../../services/gateway/src/produce-batcher.js';
import { ProducerHandle } from '../../../services/gateway/src/producer-handle.js';
import { runs, scale, runId, log, figure, kafka, results, wireMessages } from '../context.js';

export async function benchProduce(): Promise<void> {
  log('2. produce path: the gateway batcher vs kafkajs sendBatch in large batches');
  const messages = await wireMessages(scale.produceRecords, { seed: 7 }, (i) => `p-${runId}-${i}`);
  const batcherRates: number[] = [];
  const baselineRates: number[] = [];
  for (let run = 0; run < runs; run++) {
    const topic = `bench.produce.${runId}.${run}`;
    await ensureTopic(kafka, topic, 6);
    // As the gateway runs it: three producers, one batch in flight on each.
    const handles = Array.from(
      { length: 3 },
      () => new ProducerHandle(() => openKafkajsSender(kafka, { retries: 2, maxRetryTimeMs: 5000 })),
    );
    await Promise.all(handles.map((handle) => handle.current()));
    const batcher = new ProduceBatcher(handles, {
      topic,
      maxInFlightBatches: handles.length,
      lingerMs: 2,
      maxBatchRecords: 1000,
      maxBatchBytes: 4 * 1024 * 1024,
      maxQueuedRecords: messages.length,
      sendTimeoutMs: 30_000,
    });
    let started = performance.now();
    await Promise.all(messages.map((message) => batcher.enqueue(message)));
    batcherRates.push(messages.length / ((performance.now() - started) / 1000));
    await Promise.all(handles.map((handle) => handle.reset()));

    const baselineTopic = `${topic}.baseline`;
    await ensureTopic(kafka, baselineTopic, 6);
    const producer = createDurableProducer(kafka, { retries: 2, maxRetryTimeMs: 5000 });
    await producer.connect();
    started = performance.now();
    for (let start = 0; start < messages.length; start += 1000) {
      await producer.sendBatch({ acks: -1, topicMessages: [{ topic: baselineTopic, messages: messages.slice(start, start + 1000) }] });
    }
    baselineRates.push(messages.length / ((performance.now() - started) / 1000));
    await producer.disconnect();
    log(`   run ${run + 1}: batcher ${batcherRates.at(-1)!.toFixed(0)}/s, sendBatch ${baselineRates.at(-1)!.toFixed(0)}/s`);
  }
  const batched = figure(batcherRates);
  const base = figure(baselineRates);
  results.produce = {
    recordsPerSec: batched.median,
    baselinePerSec: base.median,
    ratio: batched.median / base.median,
    batcher: batched,
    baseline: base,
  };
}
