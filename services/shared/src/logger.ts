import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs. Key material and record text never reach a log line: the
 * redaction list is a backstop, the first rule is not to log request bodies.
 */
export function createLogger(name: string, level: string): Logger {
  return pino({
    name,
    level,
    base: { service: name },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [
        'req.headers["x-api-key"]',
        'req.headers.authorization',
        'headers["x-api-key"]',
        'headers.authorization',
        '*.prompt',
        '*.response',
        'key',
        'adminToken',
      ],
      censor: '[redacted]',
    },
  });
}
