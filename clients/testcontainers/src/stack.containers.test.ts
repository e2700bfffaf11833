// The module used the way a team would in its own CI (npm run test:containers):
// start the pipeline in containers, send records with the SDK, read them back from
// the topic and from ClickHouse.
import { afterAll, describe, expect, it } from 'vitest';
import { createKafka } from '@otm/shared/kafka';
import { createClient } from '@otm/client';
import { OtmTelemetryStack, type StartedOtmTelemetryStack } from './index.js';

let stack: StartedOtmTelemetryStack | undefined;
afterAll(async () => {
  const started = Date.now();
  await stack?.stop();
  console.log(`[module test] the stack stopped in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  // A slow engine has taken over four minutes to stop and remove the seven containers.
}, 600_000);

describe('OtmTelemetryStack', () => {
  it('starts the pipeline; records sent with the SDK are on the topic and in ClickHouse', async () => {
    stack = await new OtmTelemetryStack({ environment: 'qa' }).start();
    const telemetry = createClient({ endpoint: stack.gatewayUrl, apiKey: stack.ingestKey, flushIntervalMs: 100 });
    for (let index = 0; index < 5; index++) {
      const call = telemetry.startCall({
        model: 'gpt-4o',
        provider: 'openai',
        user: { id: `user-${index}`, type: 'external' },
        prompt: 'hi',
      });
      call.firstToken();
      call.end({ inputTokens: 100 + index, outputTokens: 10, cachedInputTokens: 50 });
    }
    await telemetry.shutdown();
    expect(telemetry.stats()).toMatchObject({ sent: 5, failed: 0, dropped: 0 });

    // On the topic, read from the host through the advertised listener (the gateway's
    // batches are snappy: the project's Kafka module reads every codec).
    const kafka = createKafka({ clientId: 'module-test', brokers: stack.kafkaBrokers.split(',') });
    const consumer = kafka.consumer({ groupId: `module-test-${Date.now()}` });
    await consumer.connect();
    await consumer.subscribe({ topic: stack.topic, fromBeginning: true });
    const keys: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${keys.length} of 5 messages on the topic`)), 30_000);
      void consumer.run({
        eachMessage: async ({ message }) => {
          keys.push(message.key!.toString());
          if (keys.length === 5) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
    await consumer.disconnect();
    expect(keys.every((key) => key.startsWith(`${stack!.ingestKeyId}:`))).toBe(true);

    // In ClickHouse, loaded by the ingester container.
    const query = async (sql: string) => {
      const url = `${stack!.clickhouseUrl}/?database=${stack!.clickhouseDatabase}&query=${encodeURIComponent(`${sql} FORMAT JSONEachRow`)}`;
      const answer = await fetch(url);
      return (await answer.text()).trim();
    };
    const deadline = Date.now() + 60_000;
    let rows = '';
    while (Date.now() < deadline) {
      rows = await query(
        'SELECT count() AS n, sum(input_tokens) AS input, sum(cached_input_tokens) AS cached, any(environment) AS env FROM usage_events',
      );
      if (rows.includes('"n":"5"')) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(JSON.parse(rows)).toEqual({ n: '5', input: '510', cached: '250', env: 'qa' });
  });
});
