// The state of the admin service's background jobs (erasure, record removal) in Redis,
// one key per job, kept 30 days: any admin replica answers a job's status.
import type { Redis } from './redis.js';

const JOB_TTL_SECONDS = 30 * 86_400;

export class JobStore<Job extends { id: string }> {
  /** `kind` names the keys: `<prefix><kind>-job:<id>`. */
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly kind: string,
  ) {}

  private key(id: string): string {
    return `${this.prefix}${this.kind}-job:${id}`;
  }

  async get(id: string): Promise<Job | null> {
    const text = await this.redis.get(this.key(id));
    return text ? (JSON.parse(text) as Job) : null;
  }

  async save(job: Job): Promise<void> {
    await this.redis.set(this.key(job.id), JSON.stringify(job), 'EX', JOB_TTL_SECONDS);
  }
}
