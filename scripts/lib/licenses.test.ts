import { describe, expect, it } from 'vitest';
import { licenseAllowed } from './licenses.js';

describe('licenseAllowed', () => {
  it('takes permissive licenses and expressions made of them', () => {
    for (const license of ['MIT', 'Apache-2.0', 'BSD-3-Clause', 'ISC', '(MIT OR Apache-2.0)', 'MIT AND ISC', 'MIT OR GPL-3.0-only']) {
      expect(licenseAllowed(license), license).toBe(true);
    }
  });

  it('refuses copyleft, unknown and guessed licenses', () => {
    for (const license of [
      'GPL-3.0-only',
      'LGPL-2.1-or-later',
      'AGPL-3.0',
      'MPL-2.0',
      'SSPL-1.0',
      'MIT AND GPL-2.0',
      'UNKNOWN',
      'UNLICENSED',
      'MIT*',
      '',
    ]) {
      expect(licenseAllowed(license), license).toBe(false);
    }
  });
});
