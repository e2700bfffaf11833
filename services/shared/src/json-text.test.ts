// parseJsonText: JSON with prototype poisoning refused however the key is spelled, and
// everything else parsed exactly as JSON.parse does (the fast path skips the scan only
// where the scan cannot find anything).
import { describe, expect, it } from 'vitest';
import secureJson from 'secure-json-parse';
import { parseJsonText } from './http-edge.js';

const refused = (text: string) => {
  try {
    parseJsonText(text, 8);
  } catch (error) {
    return (error as { details?: { errors?: { message: string }[] } }).details?.errors?.[0]?.message ?? String(error);
  }
  return 'parsed';
};

describe('parseJsonText', () => {
  it.each([
    '{"__proto__":{"x":1}}',
    '{"a":{"__proto__":{"x":1}}}',
    '{"\\u005f_proto__":{"x":1}}',
    '{"__pr\\u006fto__":{"x":1}}',
    '{"_\\u005Fproto\\u005f_" :{"x":1}}',
    '{"constructor":{"prototype":{"x":1}}}',
    '{"\\u0063onstructor":{"prototype":{"x":1}}}',
    '[{"constru\\u0063tor":{"prototype":{"x":1}}}]',
    '\ufeff{"__proto__":{"x":1}}',
  ])('refuses %s', (text) => {
    expect(refused(text)).toBe('must be valid JSON');
  });

  it.each([
    '{"a":1,"b":[true,null,"x"]}',
    '\ufeff{"a":1}',
    '{"text":"a constructor is a function","proto":"__proto__ in a value"}',
    '{"escaped":"\\u00e9\\ud83d\\ude80 and \\\\u0063"}',
    '{"constructor":1}',
    '"just a string"',
    '12.5e3',
  ])('parses %s as secure-json-parse does', (text) => {
    expect(parseJsonText(text, 8)).toEqual(secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' }));
  });

  it('what is not JSON is refused the same way on both paths', () => {
    expect(refused('{"a":')).toBe('must be valid JSON');
    expect(refused('{"a":"\\u00"}')).toBe('must be valid JSON');
    expect(refused('')).toBe('is required');
  });
});
