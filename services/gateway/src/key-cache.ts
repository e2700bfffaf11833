// In-memory cache of key look-ups so a valid request costs no Redis round trip in
// the common case. Two things bound how long a deleted key can live on here while
// Redis answers: the deletion message (immediate) and the entry's own expiry
// (hitTtlMs, < 2 s: the entry is looked up again). A lost subscriber connection may
// have missed deletion messages: when it is back, every entry is expired (each key is
// asked again before it is answered from the cache) but kept as the outage answer:
// the subscription can be back before look-ups work again (the other connection still
// reconnecting, or a restarted server loading its data), and dropping the entries then
// refused every key until they did.
//
// When Redis does not answer, Kafka is still the only dependency a 202 needs: a known
// key whose look-up fails is answered from its last entry for up to outageTtlMs after
// that entry's last successful look-up (a key deleted meanwhile is refused once Redis
// answers again, or when that time is up); an unknown key cannot be checked: the
// caller answers 503. While look-ups fail, an expired known entry is answered at once
// and the store is asked again at most once a second per key.
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
  /** When the look-up that gave this entry was sent. */
  fetchedAt: number;
}

export interface KeyCacheOptions {
  hitTtlMs: number;
  missTtlMs: number;
  /** Known keys held at most (least recently used go first). */
  maxEntries: number;
  /** Unknown digests held at most. */
  maxUnknownEntries: number;
  /** How long after its last successful look-up a known key is still answered while the store fails (0: not at all). */
  outageTtlMs?: number;
}

export class KeyCache {
  private readonly known: LRUCache<string, Entry>;
  private readonly unknown: LRUCache<string, Entry>;
  private readonly pending = new Map<string, Promise<IngestKeyRecord | null>>();
  /** Bumped on every invalidation so a look-up that raced a deletion is not cached. */
  private generation = 0;
  /** When the last look-up failed (the store unreachable); 0 once one succeeds. */
  private failingSince = 0;
  private lastFailureAt = 0;
  /** The subscriber lost its connection: deletion messages may have been missed. */
  private subscriptionLost = false;

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
    // Whatever was published while we were not listening is unknown: every entry must be
    // asked again once the subscription is back (not before: while Redis is away the
    // entries are all there is to answer known keys with).
    for (const event of ['close', 'end', 'error', 'reconnecting']) {
      this.subscriber.on(event, () => (this.subscriptionLost = true));
    }
    this.subscriber.on('ready', () => {
      if (!this.subscriptionLost) return;
      this.subscriptionLost = false;
      this.expireAll();
    });
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

  /**
   * Every known key is asked again before it is answered from the cache; until the store
   * answers, its entry still answers as in an outage (outageTtlMs). Unknown digests go.
   */
  expireAll(): void {
    this.generation++;
    for (const entry of this.known.values()) {
      entry.expiresAt = 0;
      entry.refreshAt = 0;
    }
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

  /** Whether look-ups are failing (the store unreachable), and since when. */
  get storeFailingSince(): number {
    return this.failingSince;
  }

  /** The key's record, null for an unknown key; throws when the store is unreachable and the key is not known. */
  lookup(hash: string): IngestKeyRecord | null | Promise<IngestKeyRecord | null> {
    const now = Date.now();
    const entry = this.entry(hash);
    if (entry && entry.expiresAt > now) {
      if (entry.refreshAt <= now && !this.pending.has(hash)) this.fetch(hash).catch(() => undefined);
      return entry.record;
    }
    const stale = this.outageEntry(entry, now);
    if (stale && now - this.lastFailureAt < 1000) {
      // The store failed a moment ago: answer at once, ask again at most once a second.
      return stale.record;
    }
    const request = this.pending.get(hash) ?? this.fetch(hash);
    return stale ? request.catch(() => stale.record) : request;
  }

  /** An expired entry of a known key that may still answer while the store fails. */
  private outageEntry(entry: Entry | undefined, now: number): Entry | undefined {
    const outageTtlMs = this.options.outageTtlMs ?? 0;
    if (!entry?.record || outageTtlMs <= 0) return undefined;
    return now - entry.fetchedAt < outageTtlMs ? entry : undefined;
  }

  private fetch(hash: string): Promise<IngestKeyRecord | null> {
    const generation = this.generation;
    const sentAt = Date.now();
    const request = this.store
      .findByHash(hash)
      .then((record) => {
        this.failingSince = 0;
        if (generation === this.generation) {
          const ttl = record ? this.options.hitTtlMs : this.options.missTtlMs;
          const entry = { record, expiresAt: sentAt + ttl, refreshAt: sentAt + ttl / 2, fetchedAt: sentAt };
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
      .catch((error: unknown) => {
        this.lastFailureAt = Date.now();
        if (!this.failingSince) this.failingSince = this.lastFailureAt;
        throw error;
      })
      .finally(() => this.pending.delete(hash));
    this.pending.set(hash, request);
    return request;
  }
}
