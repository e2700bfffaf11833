// GET /v1/pipeline: how far the ingesters are behind, for the dashboard's overview and
// for operators without Prometheus: the consumer group's lag per partition of the
// usage topic, read from Kafka (at most every 2 s), behind the admin token.
import type { FastifyInstance } from 'fastify';
import { refuse } from '@otm/shared/errors';
import { cachedConsumerLag, type KafkaInspector } from '@otm/shared/kafka';

export const pipelineAnswerSchema = {
  type: 'object',
  required: ['topic', 'group', 'lag', 'partitions', 'readAt'],
  properties: {
    topic: { type: 'string', description: 'The usage topic' },
    group: { type: 'string', description: "The ingesters' consumer group" },
    lag: { type: 'integer', description: 'Records on the topic not yet loaded and committed, all partitions together' },
    partitions: {
      type: 'array',
      description: 'One entry per partition; none while the usage topic does not exist yet (nothing accepted, nothing behind)',
      items: {
        type: 'object',
        required: ['partition', 'lag'],
        properties: { partition: { type: 'integer' }, lag: { type: 'integer' } },
      },
    },
    readAt: { type: 'string', format: 'date-time', description: 'When the figures were read from Kafka' },
  },
} as const;

export const pipelineRoute = { url: '/v1/pipeline', summary: "The ingesters' consumer lag, per partition of the usage topic" } as const;

export function registerPipelineRoutes(
  app: FastifyInstance,
  kafka: Pick<KafkaInspector, 'consumerLag'>,
  topic: string,
  group: string,
): void {
  const lag = cachedConsumerLag(kafka, group, topic, 2000);
  app.get(pipelineRoute.url, { schema: { response: { 200: pipelineAnswerSchema } } }, async () => {
    let partitions: { partition: number; lag: number }[];
    try {
      partitions = await lag();
    } catch {
      throw refuse('kafkaUnavailable');
    }
    return {
      topic,
      group,
      lag: partitions.reduce((sum, partition) => sum + partition.lag, 0),
      partitions,
      readAt: new Date().toISOString(),
    };
  });
}
