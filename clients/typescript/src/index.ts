// @otm/client: send LLM usage records to otm-telemetry.
import { TelemetryClient, type ClientOptions } from './client.js';

export { TelemetryClient, ClientError, type ClientOptions, type ClientStats, type Overflow } from './client.js';
export type { CallTimer, CallDescription, CallFailure, CallOutcome } from './call-timer.js';
export type { UsageRecord } from './generated/usage-record.js';

export function createClient(options: ClientOptions): TelemetryClient {
  return new TelemetryClient(options);
}
