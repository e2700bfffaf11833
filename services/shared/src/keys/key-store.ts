// The key store: API key records in Redis addressed by the SHA-256 of the whole
// key. The plain key exists only in the answer to create(). Deleting a key
// publishes its digest so every gateway drops it from its cache at once.
//
//   <prefix>apikey:<sha256>      hash: id, environment, name, description, createdAt, capture
//   <prefix>apikey-id:<id>       string: the sha256 (to delete by id)
//   <prefix>apikeys              set of ids
//   <prefix>capture:environments hash: environment -> capture policy (absent: full)
//   <prefix>apikeys:revoked      pub/sub channel; message = sha256 of a key deleted or
//                                changed, or `*` when every cached look-up is stale
//                                (an environment's capture policy changed)
import { CAPTURE_POLICIES, ENVIRONMENTS, stricterCapture, type CapturePolicy, type Environment } from '@otm/schemas';
import type { Redis } from '../redis.js';
import { generateKey, generateKeyId, hashKey } from './key-format.js';

export interface ApiKeyRecord {
  id: string;
  environment: Environment;
  name: string;
  description: string;
  createdAt: string;
  /** The key's own capture policy (docs/privacy.md); records created before policies existed: full. */
  capture: CapturePolicy;
}

/** A key as the gateway sees it: with the policy in force, the stricter of its own and its environment's. */
export interface IngestKeyRecord extends ApiKeyRecord {
  captureInForce: CapturePolicy;
}

/** The message on the revocation channel that empties every gateway's key cache. */
export const EVERY_KEY = '*';

export interface CreatedKey extends ApiKeyRecord {
  key: string;
}

export class KeyStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  get revocationChannel(): string {
    return `${this.prefix}apikeys:revoked`;
  }

  private recordKey(hash: string): string {
    return `${this.prefix}apikey:${hash}`;
  }

  private get environmentsKey(): string {
    return `${this.prefix}capture:environments`;
  }

  /** Creates a key (with `id` when the caller chose it first, as the audit log does). */
  async create(input: {
    environment: Environment;
    name: string;
    description?: string;
    capture?: CapturePolicy;
    id?: string;
  }): Promise<CreatedKey> {
    const key = generateKey(input.environment);
    const hash = hashKey(key);
    const record: ApiKeyRecord = {
      id: input.id ?? generateKeyId(),
      environment: input.environment,
      name: input.name,
      description: input.description ?? '',
      createdAt: new Date().toISOString(),
      capture: input.capture ?? 'full',
    };
    await this.redis
      .multi()
      .hset(this.recordKey(hash), { ...record })
      .set(`${this.prefix}apikey-id:${record.id}`, hash)
      .sadd(`${this.prefix}apikeys`, record.id)
      .exec();
    return { ...record, key };
  }

  /** The record for a key digest with the capture policy in force, or null when no such key exists (one round trip). */
  async findByHash(hash: string): Promise<IngestKeyRecord | null> {
    const results = (await this.redis.multi().hgetall(this.recordKey(hash)).hgetall(this.environmentsKey).exec()) ?? [];
    const [[keyError, fields] = [null, undefined], [environmentsError, environments] = [null, undefined]] = results as [
      Error | null,
      Record<string, string> | undefined,
    ][];
    if (keyError || environmentsError) throw keyError ?? environmentsError;
    if (!fields?.id) return null;
    const record = asRecord(fields);
    const environmentPolicy = asPolicy(environments?.[record.environment]);
    return { ...record, captureInForce: stricterCapture(record.capture, environmentPolicy) };
  }

  /** Sets a key's own capture policy; every gateway drops its cached look-up. Null when no key has this id. */
  async setCapture(id: string, capture: CapturePolicy): Promise<ApiKeyRecord | null> {
    const hash = await this.redis.get(`${this.prefix}apikey-id:${id}`);
    if (!hash) return null;
    const results = await this.redis
      .multi()
      .hset(this.recordKey(hash), { capture })
      .hgetall(this.recordKey(hash))
      .publish(this.revocationChannel, hash)
      .exec();
    const fields = results?.[1]?.[1] as Record<string, string> | undefined;
    if (fields?.id) return asRecord(fields);
    // Deleted meanwhile: the hset left a hash holding only the policy.
    await this.redis.del(this.recordKey(hash));
    return null;
  }

  /** The capture policy of each environment (full where none is set). */
  async environmentCaptures(): Promise<Record<Environment, CapturePolicy>> {
    const set = await this.redis.hgetall(this.environmentsKey);
    return Object.fromEntries(ENVIRONMENTS.map((environment) => [environment, asPolicy(set[environment])])) as Record<
      Environment,
      CapturePolicy
    >;
  }

  /** Sets an environment's capture policy; every gateway drops every cached look-up. */
  async setEnvironmentCapture(environment: Environment, capture: CapturePolicy): Promise<void> {
    await this.redis
      .multi()
      .hset(this.environmentsKey, { [environment]: capture })
      .publish(this.revocationChannel, EVERY_KEY)
      .exec();
  }

  async list(): Promise<ApiKeyRecord[]> {
    const ids = await this.redis.smembers(`${this.prefix}apikeys`);
    if (ids.length === 0) return [];
    const hashes = await this.redis.mget(ids.map((id) => `${this.prefix}apikey-id:${id}`));
    const pipeline = this.redis.pipeline();
    for (const hash of hashes) if (hash) pipeline.hgetall(this.recordKey(hash));
    const results = (await pipeline.exec()) ?? [];
    return results
      .map(([, fields]) => fields as Record<string, string>)
      .filter((fields) => fields && fields.id)
      .map(asRecord)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /** Deletes the key and tells every gateway. False when no key has this id. */
  async delete(id: string): Promise<boolean> {
    const hash = await this.redis.get(`${this.prefix}apikey-id:${id}`);
    if (!hash) return false;
    await this.redis
      .multi()
      .del(this.recordKey(hash))
      .del(`${this.prefix}apikey-id:${id}`)
      .srem(`${this.prefix}apikeys`, id)
      .publish(this.revocationChannel, hash)
      .exec();
    return true;
  }
}

/** A policy as stored; anything else (absent, or written by an older version) is full. */
function asPolicy(value: string | undefined): CapturePolicy {
  return (CAPTURE_POLICIES as readonly string[]).includes(value ?? '') ? (value as CapturePolicy) : 'full';
}

function asRecord(fields: Record<string, string>): ApiKeyRecord {
  return {
    id: fields.id!,
    environment: fields.environment as Environment,
    name: fields.name ?? '',
    description: fields.description ?? '',
    createdAt: fields.createdAt ?? '',
    capture: asPolicy(fields.capture),
  };
}
