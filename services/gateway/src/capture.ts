// The capture policy of one request (docs/privacy.md): the stricter of the key's
// policy in force (its own and its environment's, from the key store) and the
// request's `X-OTM-Capture` header, which can lower what is kept, never raise it.
// Applied to each record after validation and before it is serialised and queued,
// so what a policy removes never reaches Kafka.
import type { FastifyRequest } from 'fastify';
import { CAPTURE_POLICIES, stricterCapture, type CapturePolicy, type QueuedRecordMeta, type UsageRecord } from '@otm/schemas';
import { refuse } from '@otm/shared/errors';
import type { Redactor } from './redact.js';

export type CaptureMeta = NonNullable<QueuedRecordMeta['capture']>;

export const CAPTURE_HEADER = 'x-otm-capture';

/** Every value of one request header, however many times it was sent (Node joins them with ", "). */
export function headerValues(request: FastifyRequest, name: string): string[] {
  const raw = request.raw.rawHeaders;
  const values: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) values.push(raw[i + 1]!);
  return values;
}

/** The policy for this request's records: the key's, lowered by the header when it asks for less. */
export function capturePolicyOf(request: FastifyRequest, inForce: CapturePolicy): CapturePolicy {
  const values = headerValues(request, CAPTURE_HEADER);
  if (values.length === 0) return inForce;
  const asked = values[0]!.trim().toLowerCase();
  if (values.length !== 1 || !(CAPTURE_POLICIES as readonly string[]).includes(asked)) {
    throw refuse('captureHeaderInvalid', {
      errors: [
        {
          path: 'header:X-OTM-Capture',
          message: values.length !== 1 ? 'must be sent once' : `must be one of ${CAPTURE_POLICIES.join(', ')}`,
        },
      ],
    });
  }
  return stricterCapture(inForce, asked as CapturePolicy);
}

/**
 * Applies the policy to a validated record, in place: `redact` replaces personal data
 * and credentials in the free text (prompt, response, error message and stack) by
 * typed placeholders; `metadata-only` drops prompt and response, keeping their
 * lengths, and redacts the error text. Returns what the queued record's meta says.
 */
export function applyCapture(record: UsageRecord, policy: CapturePolicy, redactor: Redactor): CaptureMeta {
  if (policy === 'full') return { policy };
  let redactions = 0;
  const redacted = (text: string | undefined) => {
    if (text === undefined || text === '') return text;
    const result = redactor.redact(text);
    redactions += result.count;
    return result.text;
  };
  const meta: CaptureMeta = { policy };
  if (record.error) {
    record.error.message = redacted(record.error.message)!;
    if (record.error.stack !== undefined) record.error.stack = redacted(record.error.stack);
  }
  if (record.io) {
    if (policy === 'metadata-only') {
      if (record.io.prompt !== undefined) meta.promptChars = record.io.prompt.length;
      if (record.io.response !== undefined) meta.responseChars = record.io.response.length;
      // An empty io, not none: the schema requires io on a success record.
      record.io = {};
    } else {
      if (record.io.prompt !== undefined) record.io.prompt = redacted(record.io.prompt);
      if (record.io.response !== undefined) record.io.response = redacted(record.io.response);
    }
  }
  meta.redactions = redactions;
  return meta;
}
