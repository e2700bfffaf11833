// 13. Kafka clients ------------------------------------------------------------------
// The patched kafkajs the services run on against @platformatic/kafka (pure TypeScript,
// no native build) and @confluentinc/kafka-javascript (librdkafka, KafkaJS-compatible
// API), in this process, on the same broker, with the same records, in the shapes the services use them: the gateway's produce (batches of
// 1,000 real records, acks from all replicas, idempotent, snappy, the Java client's
// murmur2 partitioning), one batch in flight and three; the ingester's read (eachBatch
// over a snappy topic, each message's wire header read and its JSON parsed). Records/s
// and this process's CPU per record (librdkafka's threads included).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Consumer, MessagesStreamModes, Producer, compatibilityPartitioner } from '@platformatic/kafka';
import { COMPRESSION_TYPES, createDurableProducer, ensureTopic } from '@otm/shared/kafka';
import { decodeWire } from '@otm/shared/registry';
import { addresses, figure, kafka, log, results, runId, runs, scale, stack, wireMessages } from '../context.js';
import { alternativeKafkaClient } from '../alternative-kafka-client.js';

interface Message {
  key: string;
  value: Buffer;
}

/** What each client is asked to do; each phase reports records/s and CPU µs per record. */
interface ClientUnderTest {
  name: string;
  /** Short, for topic and group names. */
  tag: 'kafkajs' | 'platformatic' | 'librdkafka';
  produce(topic: string, messages: Message[], inFlight: number): Promise<void>;
  consume(topic: string, groupId: string, count: number): Promise<void>;
}

const BATCH = 1000;

/** Sends `messages` in batches of BATCH, `inFlight` batches at a time; `sender` says which of the senders sent a batch. */
async function sendAll(messages: Message[], inFlight: number, send: (batch: Message[], sender: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async (_, sender) => {
      while (next < messages.length) {
        const start = next;
        next += BATCH;
        await send(messages.slice(start, start + BATCH), sender);
      }
    }),
  );
}

/** The ingester's per-message work, for both clients alike. */
function read(value: Buffer | null): void {
  const wire = decodeWire(value);
  if (wire.ok) JSON.parse(wire.json);
}

const kafkajsClient: ClientUnderTest = {
  name: 'kafkajs 2.2.4 (patched)',
  tag: 'kafkajs',
  async produce(topic, messages, inFlight) {
    // As the gateway runs it: one producer per batch in flight (ProducerHandle).
    const producers = Array.from({ length: inFlight }, () => createDurableProducer(kafka, { retries: 2, maxRetryTimeMs: 5000 }));
    await Promise.all(producers.map((producer) => producer.connect()));
    // Each sender keeps to its own producer: an idempotent kafkajs producer takes one batch at a time.
    await sendAll(messages, inFlight, (batch, sender) =>
      producers[sender]!.send({ topic, acks: -1, compression: COMPRESSION_TYPES.snappy, messages: batch }),
    );
    await Promise.all(producers.map((producer) => producer.disconnect()));
  },
  async consume(topic, groupId, count) {
    const consumer = kafka.consumer({ groupId, maxBytesPerPartition: 16 * 1024 * 1024, maxWaitTimeInMs: 250 });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    let seen = 0;
    await new Promise<void>((resolve) => {
      void consumer.run({
        eachBatch: async ({ batch }) => {
          for (const message of batch.messages) read(message.value);
          seen += batch.messages.length;
          if (seen >= count) resolve();
        },
      });
    });
    await consumer.disconnect();
  },
};

/** @platformatic/kafka's version, from its manifest. */
function platformaticVersion(): string {
  // Its exports name no package.json: read it beside the entry point (dist/index.js).
  const entry = createRequire(import.meta.url).resolve('@platformatic/kafka');
  return (JSON.parse(fs.readFileSync(path.join(path.dirname(entry), '..', 'package.json'), 'utf8')) as { version: string }).version;
}

const platformaticClient: ClientUnderTest = {
  name: `@platformatic/kafka ${platformaticVersion()}`,
  tag: 'platformatic',
  async produce(topic, messages, inFlight) {
    // An idempotent producer sends one batch at a time (its maxInflights is 1): one
    // producer per batch in flight, as the gateway runs kafkajs. The Java client's murmur2.
    const producers = Array.from(
      { length: inFlight },
      (_, index) =>
        new Producer({
          clientId: `bench-clients-${index}`,
          bootstrapBrokers: addresses.KAFKA_BROKERS.split(','),
          idempotent: true,
          acks: -1,
          compression: 'snappy',
          partitioner: compatibilityPartitioner,
        }),
    );
    await sendAll(messages, inFlight, (batch, sender) =>
      producers[sender]!.send({ messages: batch.map(({ key, value }) => ({ topic, key: Buffer.from(key), value })) }),
    );
    await Promise.all(producers.map((producer) => producer.close()));
  },
  async consume(topic, groupId, count) {
    const consumer = new Consumer({
      clientId: 'bench-clients',
      groupId,
      bootstrapBrokers: addresses.KAFKA_BROKERS.split(','),
      maxBytesPerPartition: 16 * 1024 * 1024,
      maxWaitTime: 250,
    });
    const stream = await consumer.consume({ topics: [topic], mode: MessagesStreamModes.EARLIEST, autocommit: false });
    let seen = 0;
    for await (const message of stream) {
      read(message.value as Buffer | null);
      if (++seen >= count) break;
    }
    await consumer.close(true);
  },
};

function confluentClient(KafkaJS: any, version: string): ClientUnderTest {
  const client = new KafkaJS.Kafka({ kafkaJS: { brokers: addresses.KAFKA_BROKERS.split(','), logLevel: KafkaJS.logLevel.ERROR } });
  return {
    name: `@confluentinc/kafka-javascript ${version} (librdkafka)`,
    tag: 'librdkafka',
    async produce(topic, messages, inFlight) {
      // One producer: librdkafka pipelines the batches in flight on its own connections.
      const producer = client.producer({
        kafkaJS: { idempotent: true, acks: -1, compression: KafkaJS.CompressionTypes.SNAPPY },
        partitioner: 'murmur2_random',
      });
      await producer.connect();
      await sendAll(messages, inFlight, (batch) => producer.send({ topic, messages: batch }));
      await producer.disconnect();
    },
    async consume(topic, groupId, count) {
      // Batches as large as a fetch holds (its default is 32 messages a call).
      const consumer = client.consumer({ kafkaJS: { groupId, fromBeginning: true }, 'js.consumer.max.batch.size': -1 });
      await consumer.connect();
      await consumer.subscribe({ topic });
      let seen = 0;
      await new Promise<void>((resolve) => {
        void consumer.run({
          eachBatch: async ({ batch }: { batch: { messages: { value: Buffer | null }[] } }) => {
            for (const message of batch.messages) read(message.value);
            seen += batch.messages.length;
            if (seen >= count) resolve();
          },
        });
      });
      await consumer.disconnect();
    },
  };
}

/** Records/s and CPU µs per record of one phase. */
async function timed(count: number, work: () => Promise<void>): Promise<{ perS: number; cpuUs: number }> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await work();
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  return { perS: count / seconds, cpuUs: (used.user + used.system) / count };
}

export async function benchKafkaClients(): Promise<void> {
  log(
    '13. Kafka clients: the patched kafkajs vs @platformatic/kafka and @confluentinc/kafka-javascript (librdkafka), same broker, same records',
  );
  const clients = [kafkajsClient, platformaticClient];
  let error: string | undefined;
  try {
    const { KafkaJS, version } = alternativeKafkaClient(stack.dir);
    clients.push(confluentClient(KafkaJS, version));
  } catch (failure) {
    error = (failure as Error).message;
    log(`   ${error}: librdkafka not compared`);
  }
  const messages: Message[] = await wireMessages(scale.produceRecords, { seed: 13 }, (i) => `kc-${runId}-${i}`);

  const phases = ['produce1', 'produce3', 'consume'] as const;
  const samples = new Map(
    clients.map((client) => [
      client.name,
      Object.fromEntries(phases.map((phase) => [phase, { perS: [] as number[], cpuUs: [] as number[] }])),
    ]),
  );
  const note = (client: ClientUnderTest, phase: (typeof phases)[number], measured: { perS: number; cpuUs: number }) => {
    const of = samples.get(client.name)![phase]!;
    of.perS.push(measured.perS);
    of.cpuUs.push(measured.cpuUs);
  };
  for (let run = 0; run < runs; run++) {
    // Each run starts with another client, so that drift in the broker favours none.
    const order = clients.map((_, index) => clients[(index + run) % clients.length]!);
    let readTopic = '';
    for (const client of order) {
      for (const inFlight of [1, 3]) {
        const topic = `bench.clients.${runId}.${run}.${client.tag}.${inFlight}`;
        await ensureTopic(kafka, topic, 6);
        // Fresh objects each time: librdkafka's layer writes into the messages it is given.
        const copies = messages.map(({ key, value }) => ({ key, value }));
        note(client, inFlight === 1 ? 'produce1' : 'produce3', await timed(messages.length, () => client.produce(topic, copies, inFlight)));
        // Both read the same topic: the one kafkajs wrote with one batch in flight.
        if (client === kafkajsClient && inFlight === 1) readTopic = topic;
      }
    }
    for (const client of order) {
      note(
        client,
        'consume',
        await timed(messages.length, () => client.consume(readTopic, `bench-clients-${runId}-${run}-${client.tag}`, messages.length)),
      );
    }
    for (const client of clients) {
      const of = samples.get(client.name)!;
      log(
        `   run ${run + 1}: ${client.name}: produce ${of.produce1!.perS.at(-1)!.toFixed(0)}/s (${of.produce1!.cpuUs.at(-1)!.toFixed(1)} µs CPU), three in flight ${of.produce3!.perS.at(-1)!.toFixed(0)}/s (${of.produce3!.cpuUs.at(-1)!.toFixed(1)} µs), read ${of.consume!.perS.at(-1)!.toFixed(0)}/s (${of.consume!.cpuUs.at(-1)!.toFixed(1)} µs)`,
      );
    }
  }
  results.kafkaClients = {
    ...(error === undefined ? {} : { error }),
    records: messages.length,
    meanValueBytes: Math.round(messages.reduce((sum, message) => sum + message.value.length, 0) / messages.length),
    rows: clients.map((client) => {
      const of = samples.get(client.name)!;
      return {
        client: client.name,
        ...Object.fromEntries(
          phases.flatMap((phase) => [
            [`${phase}PerS`, figure(of[phase]!.perS)],
            [`${phase}CpuUs`, figure(of[phase]!.cpuUs)],
          ]),
        ),
      };
    }),
  };
}
