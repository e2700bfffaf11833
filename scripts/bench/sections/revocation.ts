// 5. Revocation --------------------------------------------------------------------
import fs from 'node:fs';
import { Agent, request } from 'undici';
import { KeyStore } from '@otm/shared/keys/key-store';
import { type ServiceProcess } from '../../lib/service-process.js';
import {
  quick,
  runs,
  scale,
  runId,
  log,
  percentile,
  sleep,
  runLoad,
  tls,
  gatewayServiceEnv,
  startQuiet,
  bodies,
  bodiesFile,
  redis,
  results,
} from '../context.js';

export async function benchRevocation(): Promise<void> {
  log(`5. revocation: ${scale.revokedKeys} keys deleted while 2 gateways serve traffic`);
  const topic = `bench.revoke.${runId}`;
  const prefix = `bench-revoke-${runId}:`;
  const store = new KeyStore(redis, prefix);
  const gateways = await Promise.all(
    [18445, 18446].map((port) => startQuiet('gateway', gatewayServiceEnv(topic, prefix, port), /gateway listening/)),
  );
  const agent = new Agent({ connect: { ca: fs.readFileSync(tls.certFile) } });
  const post = async (gateway: ServiceProcess, key: string) => {
    const response = await request(`${gateway.url}/v1/telemetry/usage`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: bodies[0],
    });
    await response.body.text();
    return response.statusCode;
  };
  const samples: number[] = [];
  for (let run = 0; run < runs; run++) {
    const keys = await Promise.all(
      Array.from({ length: scale.revokedKeys }, (_, i) => store.create({ environment: 'dev', name: `revoke-${run}-${i}` })),
    );
    for (const key of keys) for (const gateway of gateways) await post(gateway, key.key); // warm both caches
    // Background traffic on both instances with a key that stays valid.
    const steady = await store.create({ environment: 'prod', name: 'steady' });
    const traffic = gateways.map((gateway) =>
      runLoad({
        url: `${gateway.url}/v1/telemetry/usage`,
        bodiesFile,
        headers: { 'x-api-key': steady.key },
        connections: 4,
        durationSeconds: quick ? 1.5 : 10,
        warmupSeconds: scale.warmupSeconds,
        rate: 300,
      }),
    );
    await sleep(500);
    for (const key of keys) {
      await store.delete(key.id);
      const deletedAt = performance.now();
      await Promise.all(
        gateways.map(async (gateway) => {
          while ((await post(gateway, key.key)) !== 401) {
            if (performance.now() - deletedAt > 5000) break;
          }
          samples.push(performance.now() - deletedAt);
        }),
      );
    }
    await Promise.allSettled(traffic);
    log(`   run ${run + 1}: p50 ${percentile(samples, 50).toFixed(1)} ms, max ${Math.max(...samples).toFixed(1)} ms`);
  }
  await Promise.all(gateways.map((gateway) => gateway.stop()));
  await agent.close();
  results.revocation = {
    p50Ms: percentile(samples, 50),
    p99Ms: percentile(samples, 99),
    maxMs: Math.max(...samples),
    samples: samples.length,
  };
}
