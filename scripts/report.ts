// npm run report -- --since 24h --by model [--env prod] [--admin-url ...]
// A usage table in the terminal, read from the admin service's analytics API with
// the admin token (ADMIN_TOKEN, else the one `npm start` keeps in .stack/admin-token).
import fs from 'node:fs';
import path from 'node:path';
import { Command, Option } from 'commander';
import { DependencyError, networkFailure, runCommand } from '@otm/shared/dependency-failure';
import { loadStackConfig } from './stack/config.js';

const dimensions: Record<string, string> = {
  model: 'provider,model',
  provider: 'provider',
  environment: 'environment',
  user: 'userId,userType',
  'user-type': 'userType',
  key: 'keyId',
};

const program = new Command('report')
  .description('Usage, cost and latency per model, provider, environment, user or key')
  .option('--since <span>', 'time span back from now: 30m, 24h, 7d', '24h')
  .addOption(new Option('--by <dimension>', 'group rows by').choices(Object.keys(dimensions)).default('model'))
  .addOption(new Option('--env <environment>', 'only this environment').choices(['prod', 'qa', 'preview', 'dev']))
  .option('--admin-url <url>', 'admin service', `http://${process.env.ADMIN_HOST ?? '127.0.0.1'}:${process.env.ADMIN_PORT ?? 8480}`)
  .option('--json', 'print the rows as JSON')
  .action(async (options: { since: string; by: string; env?: string; adminUrl: string; json?: boolean }) => {
    const tokenFile = path.join(loadStackConfig(process.env).dir, 'admin-token');
    const token = process.env.ADMIN_TOKEN || (fs.existsSync(tokenFile) ? fs.readFileSync(tokenFile, 'utf8').trim() : '');
    if (!token) throw new Error('no admin token: set ADMIN_TOKEN or run npm start once');
    const query = new URLSearchParams({ since: options.since, bucket: 'none', groupBy: dimensions[options.by]!, orderBy: 'totalTokens' });
    if (options.env) query.set('environment', options.env);
    const get = async (kind: string) => {
      const variables = ['--admin-url (ADMIN_HOST, ADMIN_PORT)'];
      const response = await fetch(`${options.adminUrl}/v1/analytics/${kind}?${query}`, {
        headers: { authorization: `Bearer ${token}` },
      }).catch((error: unknown) => {
        throw networkFailure('the admin service', error, options.adminUrl, variables) ?? error;
      });
      if (response.status === 401 || response.status === 403) {
        throw new DependencyError('the admin service', `${options.adminUrl} refused the admin token (${response.status})`, ['ADMIN_TOKEN']);
      }
      const body = (await response.json().catch(() => ({ rows: [], message: 'an answer that is not JSON' }))) as {
        rows: Record<string, any>[];
        message?: string;
      };
      if (!response.ok) throw new Error(`${response.status}: ${body.message}`);
      return body.rows;
    };
    const [usage, latency] = await Promise.all([get('usage'), get('latency')]);
    const groups = dimensions[options.by]!.split(',');
    const keyOf = (row: Record<string, any>) => groups.map((group) => row[group]).join(' / ');
    const latencyOf = new Map(latency.map((row) => [keyOf(row), row]));
    const rows = usage.map((row) => {
      const l = latencyOf.get(keyOf(row)) ?? {};
      return {
        [options.by]: keyOf(row),
        requests: row.requests,
        errors: `${(row.errorRate * 100).toFixed(1)}%`,
        tokens: row.totalTokens,
        'cost USD': Number(row.costUsd).toFixed(4),
        'p50 ms': l.latencyP50Ms === null ? '-' : Math.round(l.latencyP50Ms),
        'p99 ms': l.latencyP99Ms === null ? '-' : Math.round(l.latencyP99Ms),
        'ttft p50': l.ttftP50Ms === null ? '-' : Math.round(l.ttftP50Ms),
        'tok/s': l.outputTokensPerSec === null ? '-' : Number(l.outputTokensPerSec).toFixed(1),
      };
    });
    if (options.json) return console.log(JSON.stringify(rows));
    console.log(`usage over the last ${options.since}${options.env ? ` (${options.env})` : ''}, by ${options.by}`);
    if (rows.length === 0) console.log('no usage recorded in this span');
    else console.table(rows);
  });

await runCommand('report', async () => {
  await program.parseAsync(process.argv);
});
