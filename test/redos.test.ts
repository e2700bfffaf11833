// No regular expression of the services or the schemas backtracks super-linearly: every
// one is handed to recheck (automaton analysis, fuzzing where that cannot decide), which
// finds both exponential and polynomial backtracking. Collected from the sources
// themselves (regular-expression literals and `new RegExp('…')` with a literal, through
// the TypeScript parser), the JSON Schemas' `pattern` keywords, and the redactor's
// detectors as built at run time (some are joined from parts).
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { checkSync } from 'recheck';
import { describe, expect, it } from 'vitest';
import { builtInDetectors } from '../services/gateway/src/redact.js';
import { fileURLToPath } from 'node:url';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

interface Found {
  where: string;
  source: string;
  flags: string;
}

function sourceFiles(folder: string): string[] {
  const files: string[] = [];
  for (const entry of fs.readdirSync(folder, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist') continue;
    const full = path.join(folder, entry.name);
    if (entry.isDirectory()) files.push(...sourceFiles(full));
    else if (/\.(ts|json)$/.test(entry.name) && !/\.test\.ts$/.test(entry.name)) files.push(full);
  }
  return files;
}

function regexesOfTypeScript(file: string): Found[] {
  const text = fs.readFileSync(file, 'utf8');
  const unit = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: Found[] = [];
  const where = (node: ts.Node) => `${path.relative(projectRoot, file)}:${unit.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
  const visit = (node: ts.Node) => {
    if (ts.isRegularExpressionLiteral(node)) {
      const literal = node.text;
      const end = literal.lastIndexOf('/');
      found.push({ where: where(node), source: literal.slice(1, end), flags: literal.slice(end + 1) });
    } else if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'RegExp') {
      const [pattern, flags] = node.arguments ?? [];
      if (pattern && (ts.isStringLiteral(pattern) || ts.isNoSubstitutionTemplateLiteral(pattern))) {
        found.push({ where: where(node), source: pattern.text, flags: flags && ts.isStringLiteral(flags) ? flags.text : '' });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(unit);
  return found;
}

function patternsOfJson(file: string): Found[] {
  const found: Found[] = [];
  const visit = (value: unknown, pointer: string) => {
    if (Array.isArray(value)) value.forEach((item, index) => visit(item, `${pointer}/${index}`));
    else if (value !== null && typeof value === 'object') {
      for (const [key, inner] of Object.entries(value)) {
        // JSON Schema patterns are Unicode-aware (AJV compiles them with the u flag).
        if (key === 'pattern' && typeof inner === 'string')
          found.push({ where: `${path.relative(projectRoot, file)}#${pointer}`, source: inner, flags: 'u' });
        else visit(inner, `${pointer}/${key}`);
      }
    }
  };
  visit(JSON.parse(fs.readFileSync(file, 'utf8')), '');
  return found;
}

function everyRegex(): Found[] {
  const files = [...sourceFiles(path.join(projectRoot, 'services')), ...sourceFiles(path.join(projectRoot, 'schemas'))];
  const found = files.flatMap((file) => (file.endsWith('.json') ? patternsOfJson(file) : regexesOfTypeScript(file)));
  for (const detector of builtInDetectors('US')) {
    found.push({ where: `redact.ts detector ${detector.type}`, source: detector.pattern.source, flags: detector.pattern.flags });
  }
  const seen = new Set<string>();
  return found.filter((each) => {
    const key = `${each.flags}/${each.source}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

describe('ReDoS', () => {
  const regexes = everyRegex();

  it('finds the regular expressions it is meant to check', () => {
    // The redactor's detectors and the schemas' patterns are among them.
    expect(regexes.some((each) => each.where.startsWith('services/gateway/src/redact.ts') && each.source.includes('eyJ'))).toBe(true);
    expect(regexes.some((each) => each.where.startsWith('schemas/') && each.where.includes('.json#'))).toBe(true);
    expect(regexes.length).toBeGreaterThan(30);
  });

  it('recheck calls a known-vulnerable pattern vulnerable (the checker works)', () => {
    expect(checkSync('\\beyJ[A-Za-z0-9_-]{8,4096}\\.eyJ[A-Za-z0-9_-]{8,8192}\\.[A-Za-z0-9_-]{8,1024}', 'g').status).toBe('vulnerable');
    expect(checkSync('^(a+)+$', '').status).toBe('vulnerable');
  });

  it('every regular expression in services/ and schemas/ is safe', () => {
    const unsafe: string[] = [];
    for (const each of regexes) {
      const result = checkSync(each.source, each.flags, { timeout: 20_000 });
      if (result.status !== 'safe') {
        const detail =
          result.status === 'vulnerable' ? `${result.complexity.type}, attack ${JSON.stringify(result.attack.pattern)}` : result.status;
        unsafe.push(`${each.where} /${each.source}/${each.flags}: ${detail}`);
      }
    }
    expect(unsafe).toEqual([]);
  }, 600_000);
});
