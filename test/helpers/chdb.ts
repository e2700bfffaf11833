// A current ClickHouse (chDB: ClickHouse 26.x in process, from PyPI) behind the part of
// @clickhouse/client's interface the project's code uses (command, query, insert, exec),
// so the same functions (migrate, the load step, the analytics, the rollup recount) run
// on it unchanged and their answers can be compared with the 18.16 server's. One Python
// process per client pair, one chDB session in a directory of its own (test/chdb/serve.py).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import { pythonWith } from './python.js';
import { projectRoot } from './stack.js';

type Settings = Record<string, string | number | boolean | undefined>;

interface Answer {
  id: number;
  ok: boolean;
  text?: string;
  error?: string;
}

/** The chDB session: statements in order, one at a time. */
export class ChdbSession {
  private readonly waiting = new Map<number, { resolve(text: string): void; reject(error: Error): void }>();
  private next = 0;
  private buffer = '';

  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
  ) {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.buffer += chunk;
      for (let end = this.buffer.indexOf('\n'); end >= 0; end = this.buffer.indexOf('\n')) {
        const answer = JSON.parse(this.buffer.slice(0, end)) as Answer;
        this.buffer = this.buffer.slice(end + 1);
        const waiter = this.waiting.get(answer.id);
        this.waiting.delete(answer.id);
        if (answer.ok) waiter?.resolve(answer.text ?? '');
        else waiter?.reject(Object.assign(new Error(answer.error), { code: /^Code: (\d+)/.exec(answer.error ?? '')?.[1] }));
      }
    });
    child.on('exit', () => {
      for (const waiter of this.waiting.values()) waiter.reject(new Error('chDB exited'));
      this.waiting.clear();
    });
  }

  /** chDB in its virtual environment, or undefined when Python is absent (the caller skips and says so). */
  static async start(): Promise<ChdbSession | undefined> {
    const python = await pythonWith(['test/chdb/requirements.txt']);
    if (!python) return undefined;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'otm-chdb-'));
    const child = spawn(python, [path.join(projectRoot, 'test/chdb/serve.py'), dir], { stdio: ['pipe', 'pipe', 'inherit'] });
    const session = new ChdbSession(child, dir);
    await session.run({ sql: 'SELECT 1' });
    return session;
  }

  run(request: { sql: string; format?: string; database?: string; settings?: Settings; data?: string }): Promise<string> {
    const id = this.next++;
    const settings = Object.fromEntries(Object.entries(request.settings ?? {}).filter(([, value]) => value !== undefined));
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.child.stdin!.write(`${JSON.stringify({ ...request, settings, id })}\n`);
    });
  }

  /** A client in one database (null: none, as migrate()'s server client). */
  client(database: string | null): ClickHouseClient {
    return new ChdbClient(this, database ?? undefined) as unknown as ClickHouseClient;
  }

  async stop(): Promise<void> {
    this.child.stdin!.end();
    await new Promise((resolve) => this.child.once('exit', resolve));
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Only what the project calls; anything else is a TypeError in the test. */
class ChdbClient {
  constructor(
    private readonly session: ChdbSession,
    private readonly database: string | undefined,
  ) {}

  async command(params: { query: string; clickhouse_settings?: Settings }): Promise<void> {
    await this.session.run({ sql: params.query, database: this.database, settings: params.clickhouse_settings });
  }

  async query(params: { query: string; format?: string; clickhouse_settings?: Settings }) {
    const format = params.format ?? 'JSON';
    const text = await this.session.run({ sql: params.query, format, database: this.database, settings: params.clickhouse_settings });
    return {
      text: async () => text,
      json: async <T>() =>
        (format === 'JSONEachRow'
          ? text
              .split('\n')
              .filter((line) => line.trim() !== '')
              .map((line) => JSON.parse(line) as T)
          : (JSON.parse(text) as T)) as never,
    };
  }

  async insert(params: { table: string; values: unknown[]; format: string }): Promise<void> {
    const rows = params.values.map((value) => JSON.stringify(value)).join('\n');
    await this.session.run({ sql: `INSERT INTO ${params.table} FORMAT JSONEachRow\n${rows}`, database: this.database });
  }

  async exec(params: { query: string; values: Readable; clickhouse_settings?: Settings }) {
    const chunks: Buffer[] = [];
    for await (const chunk of params.values) chunks.push(Buffer.from(chunk as Buffer));
    const body = Buffer.concat(chunks);
    // Binary rows travel beside the statement (base64), text ones after it.
    await this.session.run(
      /FORMAT RowBinary\s*$/.test(params.query)
        ? { sql: params.query, data: body.toString('base64'), database: this.database, settings: params.clickhouse_settings }
        : { sql: `${params.query}\n${body.toString('utf8')}`, database: this.database, settings: params.clickhouse_settings },
    );
    return { stream: Readable.from([]) };
  }

  async close(): Promise<void> {}
}
