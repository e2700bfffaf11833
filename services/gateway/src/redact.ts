// Redaction of free text (prompt, response, error message and stack) for keys whose
// capture policy is `redact`: what looks like personal data or a credential is
// replaced by a typed placeholder (`[EMAIL]`) at the gateway, before the record is
// queued, so it never reaches Kafka or ClickHouse.
//
// Each detector is a regular expression that finds candidates in linear time: every
// quantifier has an upper bound, a candidate starts only where a run of its characters
// starts (a look-behind on the run's own class, never `\b`, so a hostile text such as
// `-eyJ` repeated offers one start per run, not one per four characters), and a
// private key's body stops at the next run of five dashes. recheck proves each pattern free
// of super-linear backtracking in `npm test` (redos.test.ts); where a check exists a library confirms the
// candidate: validator.js for card numbers (Luhn and issuer prefixes) and IBANs (the
// mod-97 checksum), libphonenumber-js for phone numbers (numbering plans of every
// region). The credential formats are the documented prefixes of the major
// providers. Precision and recall are measured on a labelled set
// (redact.test.ts, docs/privacy.md); the cost per KiB is measured by the benchmark.
import validator from 'validator';
import { findPhoneNumbersInText, isSupportedCountry, type CountryCode } from 'libphonenumber-js/max';

export interface Detector {
  /** The placeholder's name: `[EMAIL]`. */
  type: string;
  pattern: RegExp;
  /** Confirms a candidate (a checksum, a numbering plan); without it every match counts. */
  confirm?: (match: string) => boolean;
  /** A character the text must contain for the detector to run at all (a cheap pre-check). */
  needs?: RegExp;
  /**
   * At most this many `confirm` calls per text; past it, candidates are replaced
   * unconfirmed (fails closed: a text crowded with candidates costs a bounded time
   * and loses some look-alikes rather than keeping a real one).
   */
  confirmBudget?: number;
}

export interface RedactionResult {
  text: string;
  /** How many spans were replaced. */
  count: number;
}

const digitsOf = (text: string) => text.replace(/[^0-9]/g, '');

/** The built-in detectors, in the order they run: longest and most specific first. */
export function builtInDetectors(phoneRegion: CountryCode): Detector[] {
  return [
    {
      type: 'PRIVATE_KEY',
      // The body holds no run of five dashes, so it stops at the next PEM boundary and the
      // bodies scanned from successive headers never overlap: linear in the text.
      pattern:
        /-----BEGIN (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY-----(?:[^-]|-(?!----)){0,16384}-----END (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY-----/g,
      needs: /-----BEGIN/,
    },
    { type: 'JWT', pattern: /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{8,1024}/g, needs: /eyJ/ },
    {
      type: 'API_KEY',
      pattern: new RegExp(
        [
          // OpenAI (sk-, sk-proj-, sk-svcacct-) and Anthropic (sk-ant-api03-…)
          'sk-(?:proj-|svcacct-|admin-|ant-(?:api|admin)\\d{2}-)?[A-Za-z0-9_-]{20,256}',
          // AWS access key ids
          '(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}',
          // GitHub tokens
          'gh[pousr]_[A-Za-z0-9]{36,255}',
          'github_pat_[A-Za-z0-9_]{22,255}',
          // Google API keys
          'AIza[0-9A-Za-z_-]{35}',
          // Slack tokens
          'xox[abprs]-[A-Za-z0-9-]{10,255}',
          // Stripe keys
          '(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,255}',
          // Hugging Face tokens
          'hf_[A-Za-z0-9]{30,255}',
          // This project's own ingest keys
          'otm_(?:prod|qa|preview|dev)_[A-Za-z0-9_-]{43}',
        ]
          .map((source) => `(?<![A-Za-z0-9_-])${source}(?![A-Za-z0-9_-])`)
          .join('|'),
        'g',
      ),
    },
    { type: 'BEARER_TOKEN', pattern: /(?<=\b[Bb]earer[ \t]{1,8})[A-Za-z0-9._~+/=-]{16,4096}/g, needs: /earer/ },
    {
      type: 'EMAIL',
      pattern:
        /(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9-])/g,
      needs: /@/,
    },
    {
      type: 'IBAN',
      pattern: /(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])/g,
      confirm: (match) => validator.isIBAN(match.replace(/ /g, '')),
    },
    {
      type: 'CREDIT_CARD',
      pattern: /(?<![0-9])\d(?:[ -]?\d){12,18}(?![0-9])/g,
      confirm: (match) => validator.isCreditCard(digitsOf(match)),
    },
    {
      type: 'PHONE',
      // Candidates: an optional +country, an optional (area), then 7 to 19 digits with
      // separators, not inside a longer token (`INV-2026-000123`, a UUID's last group);
      // libphonenumber-js decides whether one is a real number.
      pattern: /(?<![\w+-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d[\d .-]{5,17}\d(?![\w-])/g,
      // Numbers have 7 to 15 digits (E.164) in at most 6 groups, at most two of one
      // digit (`+1`, a French `1`): a cheap shape check before the library's.
      confirm: (match) => plausiblePhone(match) && findPhoneNumbersInText(match, phoneRegion).length > 0,
      confirmBudget: 256,
    },
  ];
}

function plausiblePhone(candidate: string): boolean {
  const groups = candidate.match(/\d+/g) ?? [];
  const digits = groups.reduce((sum, group) => sum + group.length, 0);
  return digits >= 7 && digits <= 15 && groups.length <= 6 && groups.filter((group) => group.length === 1).length <= 2;
}

/** Operator-supplied patterns (`REDACT_PATTERNS`: a JSON object of NAME to regular expression). */
export function operatorDetectors(patterns: Record<string, string>): Detector[] {
  return Object.entries(patterns).map(([type, source]) => {
    if (!/^[A-Z][A-Z0-9_]{0,31}$/.test(type)) throw new Error(`REDACT_PATTERNS: "${type}" must be an upper-case name (A-Z, 0-9, _)`);
    return { type, pattern: new RegExp(source, 'g') };
  });
}

/** The gateway's redactor: the operator's patterns (REDACT_PATTERNS) first, then the built-in ones. */
export function redactorFrom(config: { REDACT_PATTERNS: string; REDACT_PHONE_REGION: string }): Redactor {
  let patterns: unknown;
  try {
    patterns = JSON.parse(config.REDACT_PATTERNS);
  } catch {
    throw new Error('REDACT_PATTERNS: must be a JSON object of NAME to regular expression');
  }
  if (
    patterns === null ||
    typeof patterns !== 'object' ||
    Array.isArray(patterns) ||
    Object.values(patterns).some((v) => typeof v !== 'string')
  ) {
    throw new Error('REDACT_PATTERNS: must be a JSON object of NAME to regular expression');
  }
  if (!isSupportedCountry(config.REDACT_PHONE_REGION))
    throw new Error(`REDACT_PHONE_REGION: unknown region "${config.REDACT_PHONE_REGION}"`);
  return new Redactor([...operatorDetectors(patterns as Record<string, string>), ...builtInDetectors(config.REDACT_PHONE_REGION)]);
}

export class Redactor {
  constructor(private readonly detectors: readonly Detector[]) {}

  redact(text: string): RedactionResult {
    let count = 0;
    let current = text;
    for (const detector of this.detectors) {
      if (detector.needs && !detector.needs.test(current)) continue;
      detector.pattern.lastIndex = 0;
      let budget = detector.confirmBudget ?? Infinity;
      current = current.replace(detector.pattern, (match: string) => {
        if (detector.confirm && budget-- > 0 && !detector.confirm(match)) return match;
        count += 1;
        return `[${detector.type}]`;
      });
    }
    return { text: current, count };
  }
}
