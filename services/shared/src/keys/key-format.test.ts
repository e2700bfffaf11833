import { describe, expect, it } from 'vitest';
import { generateKey, hashKey, parseKey } from './key-format.js';

describe('key format', () => {
  it('generates otm_<env>_<43 url-safe characters> (256 bits) that parse back', () => {
    const key = generateKey('preview');
    expect(key).toMatch(/^otm_preview_[A-Za-z0-9_-]{43}$/);
    expect(parseKey(key)).toBe('preview');
    expect(generateKey('preview')).not.toBe(key);
  });
  it('refuses other shapes before any look-up', () => {
    for (const bad of [
      '',
      'otm_prod_',
      'otm_prod_short',
      `otm_live_${'a'.repeat(43)}`,
      `OTM_prod_${'a'.repeat(43)}`,
      `otm_prod_${'a'.repeat(129)}`,
      `otm_prod_${'a'.repeat(42)}=`,
    ]) {
      expect(parseKey(bad), bad).toBeUndefined();
    }
  });
  it('hashes with SHA-256', () => {
    expect(hashKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
