// A failure to reach or use a dependency, said in one line: which dependency, what went
// wrong in a few words, and the variables to fix. The command-line tools check their
// dependencies first with these (reachRedis, reachClickHouse) and print the line
// instead of a stack trace; runCommand does the printing and the exit code.
import { SchemaNotRegisteredError } from './registry.js';
import type { ClickHouseClient } from './clickhouse.js';
import { createRedis, lastRedisError, type Redis, type RedisConnectOptions } from './redis.js';

export type Dependency = 'Redis' | 'ClickHouse' | 'Kafka' | 'the schema registry' | 'the admin service';

export class DependencyError extends Error {
  constructor(
    readonly dependency: Dependency,
    readonly reason: string,
    readonly variables: readonly string[],
    /** The dependency answered and refused the credentials: not a state to wait out. */
    readonly refusedCredentials = false,
  ) {
    super(`${dependency}: ${reason}${variables.length > 0 ? `; check ${variables.join(', ')}` : ''}`);
    this.name = 'DependencyError';
  }
}

const TLS_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** The error and its causes, outermost first (fetch and some clients wrap the socket's error). */
function chain(error: unknown): { code?: string; message: string }[] {
  const found: { code?: string; message: string }[] = [];
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth++) {
    const { code, message, cause, originalError } = current as {
      code?: unknown;
      message?: unknown;
      cause?: unknown;
      originalError?: unknown;
    };
    const text = typeof message === 'string' ? message : String(current);
    // Some clients (the registry's, kafkajs' retries) keep the socket's code in the message only.
    const named = /\b(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|EPROTO)\b/.exec(text)?.[1];
    found.push({ code: typeof code === 'string' ? code : named, message: text });
    current = cause ?? originalError;
  }
  return found;
}

/** The address of a URL without its credentials: what the line may show. */
export function safeAddress(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`;
  } catch {
    return 'an address that is not a URL';
  }
}

/** The variable naming each dependency's private CA (a certificate it does not trust). */
const CA_VARIABLE: Record<Dependency, string> = {
  Kafka: 'KAFKA_TLS_CA_FILE',
  ClickHouse: 'CLICKHOUSE_CA_FILE',
  Redis: 'REDIS_TLS_CA_FILE',
  'the schema registry': 'SCHEMA_REGISTRY_CA_FILE',
  // fetch() trusts the system's CAs and NODE_EXTRA_CA_CERTS only.
  'the admin service': 'NODE_EXTRA_CA_CERTS',
};

/**
 * The network and TLS failures every dependency shares, or undefined when the error is
 * not one of them. `variables` name where the address (and the CA) are set.
 */
export function networkFailure(
  dependency: Dependency,
  error: unknown,
  address: string,
  variables: readonly string[],
): DependencyError | undefined {
  for (const { code, message } of chain(error)) {
    if (code === 'ECONNREFUSED') return new DependencyError(dependency, `connection refused at ${address}`, variables);
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
      return new DependencyError(dependency, `the host of ${address} is not known`, variables);
    if (code === 'ETIMEDOUT' || code === 'ECONNABORTED' || /timed? ?out/i.test(message)) {
      // TLS spoken to a plaintext port gets no answer at all.
      const tls = /^(rediss|https|ssl):/.test(address) ? ' (TLS to a plaintext port?)' : '';
      return new DependencyError(dependency, `no answer from ${address}${tls}`, variables);
    }
    if (code !== undefined && TLS_CODES.has(code))
      return new DependencyError(dependency, `the certificate of ${address} is not trusted (${code})`, [
        ...new Set([...variables, CA_VARIABLE[dependency], 'NODE_EXTRA_CA_CERTS']),
      ]);
    if (code === 'EPROTO' || /wrong version number|packet length too long/i.test(message))
      return new DependencyError(dependency, `TLS and plaintext mixed up at ${address} (${code ?? 'protocol error'})`, variables);
    if (code === 'ECONNRESET' || code === 'EPIPE')
      return new DependencyError(dependency, `the connection to ${address} was reset`, variables);
  }
  return undefined;
}

/** A Redis connection, or a DependencyError saying why there is none. The caller quits it. */
export async function reachRedis(url: string, options: RedisConnectOptions): Promise<Redis> {
  const redis = createRedis(url, options);
  try {
    await connectRedis(redis, url);
    await redis.ping();
    return redis;
  } catch (error) {
    redis.disconnect();
    throw error instanceof DependencyError ? error : redisFailure(lastRedisError(redis) ?? error, url);
  }
}

/** connect(), its failure said with the socket's own error (connect() says only "Connection is closed"). */
export async function connectRedis(redis: Redis, url: string): Promise<void> {
  try {
    await redis.connect();
  } catch (error) {
    throw redisFailure(lastRedisError(redis) ?? error, url);
  }
}

export function redisFailure(error: unknown, url: string): DependencyError {
  const address = safeAddress(url);
  for (const { message } of chain(error)) {
    if (/WRONGPASS|invalid username-password|NOAUTH|NOPERM|Authentication required/i.test(message))
      return new DependencyError(
        'Redis',
        `${address} refused the user and password (${message.split('\n')[0]!.slice(0, 120)})`,
        ['REDIS_URL (user and password)'],
        true,
      );
  }
  return networkFailure('Redis', error, address, ['REDIS_URL']) ?? new DependencyError('Redis', firstLine(error), ['REDIS_URL']);
}

/**
 * How long the first question to ClickHouse may go unanswered. TLS spoken to its
 * plaintext port usually fails at once, but when the handshake's random bytes hold no
 * line end the server waits for the rest of an HTTP request line and the handshake for
 * an answer, neither ever coming: without this bound a tool would sit out the client's
 * request timeout (twice: a minute).
 */
export const REACH_TIMEOUT_MS = 10_000;

/**
 * Asks ClickHouse `SELECT 1` (in the configured database when `database` is given) and
 * throws a DependencyError saying why it did not answer within `timeoutMs`.
 */
export async function reachClickHouse(
  client: ClickHouseClient,
  url: string,
  database?: string,
  timeoutMs = REACH_TIMEOUT_MS,
): Promise<void> {
  const deadline = AbortSignal.timeout(timeoutMs);
  try {
    // A client with a database asks in it: one that does not exist is refused (code 81).
    const result = await client.query({ query: 'SELECT 1 AS n', format: 'JSONEachRow', abort_signal: deadline });
    await result.json();
  } catch (error) {
    throw clickhouseFailure(
      deadline.aborted ? Object.assign(new Error(`timed out after ${timeoutMs} ms`), { code: 'ETIMEDOUT' }) : error,
      url,
      database,
    );
  }
}

export function clickhouseFailure(error: unknown, url: string, database?: string): DependencyError {
  const address = safeAddress(url);
  for (const link of chain(error)) {
    const { message } = link;
    // 18.16 answers in its own text format: the code is read from it.
    const code = link.code ?? /^Code: (\d+)/.exec(message)?.[1];
    // 516 (current releases); 192, 193, 194 (18.16: unknown user, wrong password, password required).
    if (
      code === '516' ||
      code === '192' ||
      code === '193' ||
      code === '194' ||
      /Authentication failed|password is incorrect|Wrong password|Unknown user|Password required/i.test(message)
    )
      return new DependencyError(
        'ClickHouse',
        `${address} refused the user and password`,
        ['CLICKHOUSE_USER', 'CLICKHOUSE_PASSWORD'],
        true,
      );
    if (code === '81' || (message.includes('Database ') && message.includes("doesn't exist")) || message.includes('UNKNOWN_DATABASE'))
      return new DependencyError(
        'ClickHouse',
        `the database ${database ?? ''} does not exist (npm run migrate creates it)`.replace('  ', ' '),
        ['CLICKHOUSE_DATABASE'],
      );
    if (code === '497' || /Not enough privileges|ACCESS_DENIED/i.test(message))
      return new DependencyError('ClickHouse', `the user lacks a privilege this needs (${message.split('\n')[0]!.slice(0, 160)})`, [
        'CLICKHOUSE_USER',
      ]);
  }
  return networkFailure('ClickHouse', error, address, ['CLICKHOUSE_URL']) ?? new DependencyError('ClickHouse', firstLine(error), []);
}

export function kafkaFailure(error: unknown, brokers: string): DependencyError {
  for (const { message } of chain(error)) {
    if (/SASL|Authentication failed|SaslAuthenticate/i.test(message))
      return new DependencyError(
        'Kafka',
        `${brokers} refused the credentials (${message.slice(0, 160)})`,
        ['KAFKA_SASL_USERNAME', 'KAFKA_SASL_PASSWORD', 'KAFKA_SASL_MECHANISM'],
        true,
      );
  }
  return networkFailure('Kafka', error, brokers, ['KAFKA_BROKERS']) ?? new DependencyError('Kafka', firstLine(error), ['KAFKA_BROKERS']);
}

export function registryFailure(error: unknown, url: string): DependencyError {
  const address = safeAddress(url);
  if (error instanceof SchemaNotRegisteredError)
    return new DependencyError('the schema registry', error.message, ['SCHEMA_REGISTRY_REGISTER']);
  for (const { message } of chain(error)) {
    if (/\b(401|403)\b|Unauthorized|Forbidden/i.test(message))
      return new DependencyError(
        'the schema registry',
        `${address} refused the request (${message.slice(0, 120)})`,
        ['SCHEMA_REGISTRY_USERNAME', 'SCHEMA_REGISTRY_PASSWORD'],
        true,
      );
  }
  return (
    networkFailure('the schema registry', error, address, ['SCHEMA_REGISTRY_URL']) ??
    new DependencyError('the schema registry', firstLine(error), ['SCHEMA_REGISTRY_URL'])
  );
}

/**
 * One start step of a service: an error ends the process with one fatal log line
 * (the dependency, what went wrong, the variables to fix) and exit code 1, for the
 * supervisor to restart it once the configuration or the dependency is mended.
 */
export async function startStep<T>(logger: FatalLogger, work: () => Promise<T>, explain: (error: unknown) => DependencyError): Promise<T> {
  try {
    return await work();
  } catch (error) {
    return exitFor(logger, explain(error));
  }
}

type FatalLogger = { fatal(details: object, message: string): void };

/** Ends the process: one fatal log line naming the dependency and the variables, exit code 1. */
export function exitFor(logger: FatalLogger, failure: DependencyError): never {
  logger.fatal({ dependency: failure.dependency, variables: failure.variables }, failure.message);
  process.exit(1);
}

/**
 * A dependency that failed after start-up: refused credentials end the process (exitFor),
 * anything else is logged as a warning and waited out by the caller.
 */
export function exitIfRefused(
  logger: FatalLogger & { warn(details: object, message: string): void },
  failure: DependencyError,
  waiting: string,
): void {
  if (failure.refusedCredentials) exitFor(logger, failure);
  logger.warn({ err: failure.message }, waiting);
}

const firstLine = (error: unknown) => (error instanceof Error ? error.message : String(error)).split('\n')[0]!.slice(0, 200);

/**
 * Runs a command's work: a DependencyError (or any other error) ends it with one line on
 * stderr, `<command>: …`, and exit code 1. OTM_DEBUG=1 prints the stack as well.
 */
export async function runCommand(command: string, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (error) {
    console.error(`${command}: ${error instanceof DependencyError ? error.message : firstLine(error)}`);
    if (process.env.OTM_DEBUG) console.error(error);
    // Not exitCode: a client's sockets or timers would keep the process alive.
    process.exit(1);
  }
}
