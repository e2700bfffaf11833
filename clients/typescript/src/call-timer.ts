// Measures one LLM call, streaming or not, and turns it into a usage record:
// start when the call starts, first token when the first chunk arrives, end when the
// last one did. Times are the client's clock, in RFC 3339 with milliseconds.
import type { UsageRecord } from './generated/usage-record.js';

export interface CallDescription {
  model: string;
  provider: string;
  user: UsageRecord['user'];
  prompt?: string;
  context?: UsageRecord['context'];
  /** Its idempotency key; a random UUID when not given. */
  idempotencyKey?: string;
}

export interface CallOutcome {
  /** All input tokens, cache reads and cache writes included (docs/tokens.md says how each provider reports them). */
  inputTokens: number;
  /** All output tokens, reasoning included. */
  outputTokens: number;
  totalTokens?: number;
  /** Of inputTokens: read from the provider's prompt cache. */
  cachedInputTokens?: number;
  /** Of inputTokens: written to the provider's prompt cache. */
  cacheWriteTokens?: number;
  /** Of outputTokens: reasoning (thinking) tokens. */
  reasoningTokens?: number;
  response?: string;
}

export interface CallFailure {
  code: string;
  message: string;
  stack?: string;
  /** Tokens billed before the failure, if any (a stream can fail half way). */
  inputTokens?: number;
  outputTokens?: number;
}

export class CallTimer {
  private readonly startedAt = new Date();
  private firstTokenAt: Date | undefined;
  private finished = false;

  constructor(
    private readonly call: CallDescription,
    private readonly deliver: (record: UsageRecord, idempotencyKey?: string) => void,
  ) {}

  /** The first token (or chunk) arrived. Later calls change nothing. */
  firstToken(): void {
    this.firstTokenAt ??= new Date();
  }

  /** The call succeeded: queues its record. Returns it. */
  end(outcome: CallOutcome): UsageRecord {
    return this.finish('success', outcome);
  }

  /** The call failed: queues an error record. Returns it. */
  fail(failure: CallFailure): UsageRecord {
    const { code, message, stack, inputTokens, outputTokens } = failure;
    const tokens =
      inputTokens !== undefined || outputTokens !== undefined
        ? { inputTokens: inputTokens ?? 0, outputTokens: outputTokens ?? 0 }
        : undefined;
    return this.finish('error', tokens, { code, message, ...(stack === undefined ? {} : { stack }) });
  }

  private finish(status: 'success' | 'error', outcome: CallOutcome | undefined, error?: UsageRecord['error']): UsageRecord {
    if (this.finished) throw new Error('this call was already ended');
    this.finished = true;
    const endedAt = new Date();
    // A call that never streamed has its first token when its answer came.
    const firstTokenAt = this.firstTokenAt ?? endedAt;
    const record: UsageRecord = {
      request: { modelId: this.call.model, provider: this.call.provider, status },
      user: this.call.user,
    };
    if (outcome) {
      record.tokens = { input: outcome.inputTokens, output: outcome.outputTokens };
      if (outcome.totalTokens !== undefined) record.tokens.total = outcome.totalTokens;
      if (outcome.cachedInputTokens !== undefined) record.tokens.cachedInput = outcome.cachedInputTokens;
      if (outcome.cacheWriteTokens !== undefined) record.tokens.cacheWrite = outcome.cacheWriteTokens;
      if (outcome.reasoningTokens !== undefined) record.tokens.reasoning = outcome.reasoningTokens;
      record.timing = {
        startTime: this.startedAt.toISOString(),
        firstTokenTime: firstTokenAt.toISOString(),
        lastTokenTime: endedAt.toISOString(),
        latencyMs: endedAt.getTime() - this.startedAt.getTime(),
      };
      record.io = {};
      if (this.call.prompt !== undefined) record.io.prompt = this.call.prompt;
      if (outcome.response !== undefined) record.io.response = outcome.response;
    }
    if (error) record.error = error;
    if (this.call.context) record.context = this.call.context;
    this.deliver(record, this.call.idempotencyKey);
    return record;
  }
}
