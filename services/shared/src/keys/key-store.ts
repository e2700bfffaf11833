// The key store: API key records in Redis addressed by the SHA-256 of the whole
// key. The plain key exists only in the answer to create(). Deleting a key
// publishes its digest so every gateway drops it from its cache at once.
//
//   <prefix>apikey:<sha256>      hash: id, environment, name, description, createdAt
//   <prefix>apikey-id:<id>       string: the sha256 (to delete by id)
//   <prefix>apikeys              set of ids
//   <prefix>apikeys:revoked      pub/sub channel; message = sha256
import type { Environment } from '@otm/schemas';
import type { Redis } from '../redis.js';
import { generateKey, generateKeyId, hashKey } from './key-format.js';

export interface ApiKeyRecord {
  id: string;
  environment: Environment;
  name: string;
  description: string;
  createdAt: string;
}

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

  async create(input: { environment: Environment; name: string; description?: string }): Promise<CreatedKey> {
    const key = generateKey(input.environment);
    const hash = hashKey(key);
    const record: ApiKeyRecord = {
      id: generateKeyId(),
      environment: input.environment,
      name: input.name,
      description: input.description ?? '',
      createdAt: new Date().toISOString(),
    };
    await this.redis
      .multi()
      .hset(this.recordKey(hash), { ...record })
      .set(`${this.prefix}apikey-id:${record.id}`, hash)
      .sadd(`${this.prefix}apikeys`, record.id)
      .exec();
    return { ...record, key };
  }

  /** The record for a key digest, or null when no such key exists. */
  async findByHash(hash: string): Promise<ApiKeyRecord | null> {
    const fields = await this.redis.hgetall(this.recordKey(hash));
    if (!fields.id) return null;
    return fields as unknown as ApiKeyRecord;
  }

  async list(): Promise<ApiKeyRecord[]> {
    const ids = await this.redis.smembers(`${this.prefix}apikeys`);
    if (ids.length === 0) return [];
    const hashes = await this.redis.mget(ids.map((id) => `${this.prefix}apikey-id:${id}`));
    const pipeline = this.redis.pipeline();
    for (const hash of hashes) if (hash) pipeline.hgetall(this.recordKey(hash));
    const results = (await pipeline.exec()) ?? [];
    return results
      .map(([, fields]) => fields as ApiKeyRecord)
      .filter((record) => record && record.id)
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
