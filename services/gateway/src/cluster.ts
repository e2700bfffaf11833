// Runs one gateway process per core (node:cluster shares the listening socket).
// Each worker is a whole gateway (server.ts): its own producer, key cache and
// metrics port (METRICS_PORT + worker index). SIGTERM is passed to every worker,
// which drains as a single gateway does.
import cluster from 'node:cluster';
import os from 'node:os';
import { parseConfig } from '@otm/shared/config';
import { gatewayClusterSpec } from './config.js';

if (cluster.isPrimary) {
  const config = parseConfig(process.env, gatewayClusterSpec);
  const count = config.GATEWAY_WORKERS || os.availableParallelism();
  let stopping = false;
  const fork = (index: number) => {
    const worker = cluster.fork({
      METRICS_PORT: String(config.METRICS_PORT === 0 ? 0 : config.METRICS_PORT + index),
      GATEWAY_INSTANCE_ID: `${os.hostname()}-${process.pid}-w${index}`,
    });
    worker.on('exit', (code) => {
      if (!stopping) {
        console.error(`gateway worker ${index} exited (${code}); starting a new one`);
        fork(index);
      }
    });
  };
  for (let index = 0; index < count; index++) fork(index);
  const stop = () => {
    stopping = true;
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
    const check = setInterval(() => {
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        clearInterval(check);
        process.exit(0);
      }
    }, 50);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} else {
  await import('./server.js');
}
