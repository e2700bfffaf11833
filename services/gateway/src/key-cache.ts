// In-memory cache of key look-ups so a valid request costs no Redis round trip in
// the common case. Three things bound how long a deleted key can live on here:
// the deletion message (immediate), the entry's own expiry (hitTtlMs, < 2 s), and
// a lost subscriber connection, which empties the cache at once.
//
// Refresh-ahead: once an entry has lived half its lifetime, the next request that
// uses it starts a look-up in the background and is answered from the entry, so a
// key in steady use never waits on Redis (a Redis pause of a few hundred
// milliseconds, an AOF rewrite say, does not reach the requests). The entry's
// lifetime counts from when its look-up was sent, so a slow answer does not
// stretch how long a deleted key can live on here.
//
// Known keys and unknown digests are held apart, each in a bounded LRU: a flood of
// unknown keys only pushes out other unknown digests, never a valid key (an unknown
// digest is remembered briefly; a newly created key was never looked up, so it is never
// among them).
import { LRUCache } from 'lru-cache';
import { EVERY_KEY, type IngestKeyRecord, type KeyStore } from '@otm/shared/keys/key-store';
import type { Redis } from '@otm/shared/redis';

interface Entry {
  record: IngestKeyRecord | null;
  expiresAt: number;
  refreshAt: number;
}

export interface KeyCacheOptions {
  hitTtlMs: number;
  missTtlMs: number;
  /** Known keys held at most (least recently used go first). */
  maxEntries: number;
  /** Unknown digests held at most. */
  maxUnknownEntries: number;
}

export class KeyCache {
  private readonly known: LRUCache<string, Entry>;
  private readonly unknown: LRUCache<string, Entry>;
  private readonly pending = new Map<string, Promise<IngestKeyRecord | null>>();
  /** Bumped on every invalidation so a look-up that raced a deletion is not cached. */
  private generation = 0;

  constructor(
    private readonly store: KeyStore,
    private readonly subscriber: Redis,
    private readonly options: KeyCacheOptions,
  ) {
    this.known = new LRUCache({ max: options.maxEntries });
    this.unknown = new LRUCache({ max: options.maxUnknownEntries });
  }

  async start(): Promise<void> {
    // A key deleted or changed: its digest; an environment's policy changed: every key.
    this.subscriber.on('message', (_channel: string, hash: string) => (hash === EVERY_KEY ? this.clear() : this.invalidate(hash)));
    // Whatever may have been published while we were not listening is unknown.
    for (const event of ['close', 'end', 'error', 'reconnecting']) {
      this.subscriber.on(event, () => this.clear());
    }
    await this.subscriber.connect();
    await this.subscriber.subscribe(this.store.revocationChannel);
  }

  invalidate(hash: string): void {
    this.generation++;
    this.known.delete(hash);
    this.unknown.delete(hash);
  }

  clear(): void {
    this.generation++;
    this.known.clear();
    this.unknown.clear();
  }

  /** The cached answer for a digest without asking the store: undefined when none is held. */
  peek(hash: string): IngestKeyRecord | null | undefined {
    const entry = this.entry(hash);
    return entry && entry.expiresAt > Date.now() ? entry.record : undefined;
  }

  private entry(hash: string): Entry | undefined {
    return this.known.get(hash) ?? this.unknown.get(hash);
  }

  /** The key's record, null for an unknown key; throws when the store is unreachable. */
  lookup(hash: string): IngestKeyRecord | null | Promise<IngestKeyRecord | null> {
    const now = Date.now();
    const entry = this.entry(hash);
    if (entry && entry.expiresAt > now) {
      if (entry.refreshAt <= now && !this.pending.has(hash)) this.fetch(hash).catch(() => undefined);
      return entry.record;
    }
    return this.pending.get(hash) ?? this.fetch(hash);
  }

  private fetch(hash: string): Promise<IngestKeyRecord | null> {
    const generation = this.generation;
    const sentAt = Date.now();
    const request = this.store
      .findByHash(hash)
      .then((record) => {
        if (generation === this.generation) {
          const ttl = record ? this.options.hitTtlMs : this.options.missTtlMs;
          const entry = { record, expiresAt: sentAt + ttl, refreshAt: sentAt + ttl / 2 };
          if (record) {
            this.known.set(hash, entry);
            this.unknown.delete(hash);
          } else {
            this.unknown.set(hash, entry);
            this.known.delete(hash);
          }
        }
        return record;
      })
      .finally(() => this.pending.delete(hash));
    this.pending.set(hash, request);
    return request;
  }
}
