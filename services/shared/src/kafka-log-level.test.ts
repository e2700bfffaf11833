import { describe, expect, it } from 'vitest';
import { kafkaLogLevel } from './kafka.js';

/** kafkajs's levels (its `logLevel`; kafkajs itself is imported by kafka.ts only). */
const logLevel = { ERROR: 1, WARN: 2 } as const;

describe('the level a kafkajs log line gets', () => {
  it('puts the restart line after a crash at debug: the crash is logged with its cause by the service', () => {
    expect(kafkaLogLevel(logLevel.ERROR, 'Restarting the consumer in 300ms')).toBe('debug');
  });

  it('puts a starting cluster’s answers at debug, found in the message or in the error', () => {
    expect(
      kafkaLogLevel(logLevel.ERROR, 'Crash: KafkaJSProtocolError', "The coordinator is loading and hence can't process requests"),
    ).toBe('debug');
    expect(
      kafkaLogLevel(
        logLevel.ERROR,
        'Response Metadata: There is no leader for this topic-partition as we are in the middle of a leadership election',
      ),
    ).toBe('debug');
  });

  it('keeps every other line at its own level', () => {
    expect(kafkaLogLevel(logLevel.ERROR, 'Crash: KafkaJSNonRetriableError', 'Broker refused the request')).toBe('error');
    expect(kafkaLogLevel(logLevel.WARN, 'Consumer group rebalancing')).toBe('warn');
    expect(kafkaLogLevel(logLevel.ERROR, 'Restarting the producer')).toBe('error');
  });
});
