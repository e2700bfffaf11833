// The gateway benchmark's baseline: a bare Fastify server with the same TLS and
// body limits that inflates and parses the same JSON bodies and answers 202 (with a
// result per item for a batch), without authentication, validation or Kafka.
import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import compress from '@fastify/compress';

const [port, certFile, keyFile] = process.argv.slice(2);
const app = Fastify({
  https: { cert: fs.readFileSync(certFile!), key: fs.readFileSync(keyFile!), minVersion: 'TLSv1.2' },
  bodyLimit: 1_048_576,
  logger: false,
});
app.post('/v1/telemetry/usage', async (request, reply) => {
  const body = request.body as { tokens?: { input?: number; output?: number; total?: number } };
  const input = body.tokens?.input ?? 0;
  const output = body.tokens?.output ?? 0;
  return reply.code(202).send({
    requestId: randomUUID(),
    status: 'accepted',
    message: 'Usage record accepted for processing.',
    timestamp: new Date().toISOString(),
    usage: { inputTokens: input, outputTokens: output, totalTokens: body.tokens?.total ?? input + output },
  });
});
await app.register(compress, { globalCompression: false, requestEncodings: ['gzip'] });
app.post('/v1/telemetry/usage/batch', { bodyLimit: 5 * 1_048_576 }, async (request, reply) => {
  const items = request.body as unknown[];
  return reply.code(202).send({
    status: 'accepted',
    message: `All ${items.length} usage records accepted for processing.`,
    timestamp: new Date().toISOString(),
    accepted: items.length,
    refused: 0,
    results: items.map((_item, index) => ({ index, status: 202, requestId: randomUUID() })),
  });
});
await app.listen({ host: '127.0.0.1', port: Number(port) });
console.log(JSON.stringify({ msg: 'baseline listening', address: `https://127.0.0.1:${port}` }));
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
