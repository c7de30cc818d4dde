/**
 * @kslate/client runs unchanged on Node, browsers, Deno and Cloudflare Workers (issue 36):
 * its source imports only its own files and openapi-fetch, and touches no Node global.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';

const ALLOWED = [/^\.\//, /^openapi-fetch$/];
const NODE_GLOBALS = /\b(process\.|Buffer\b|require\(|__dirname|__filename|setImmediate\b)/;

test('clients/typescript/src imports nothing Node-only and uses no Node global', () => {
  const dir = join(import.meta.dirname, '../../clients/typescript/src');
  const offenders: string[] = [];
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.ts'))) {
    const src = readFileSync(join(dir, f), 'utf8');
    for (const m of src.matchAll(/^\s*(?:(?:import|export)\s[^'";]*?\sfrom\s+|import\s+)['"]([^'"]+)['"]/gm)) {
      if (!ALLOWED.some((re) => re.test(m[1]))) offenders.push(`${f}: imports ${m[1]}`);
    }
    for (const m of src.matchAll(/\bimport\(\s*['"]([^'"]+)['"]/g)) offenders.push(`${f}: import(${m[1]})`);
    const code = src.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, '');
    const g = NODE_GLOBALS.exec(code);
    if (g) offenders.push(`${f}: uses ${g[1]}`);
  }
  expect(offenders).toEqual([]);
});

test('the package declares no Node built-in and no dependency but openapi-fetch', () => {
  const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '../../clients/typescript/package.json'), 'utf8'));
  expect(Object.keys(pkg.dependencies ?? {})).toEqual(['openapi-fetch']);
  expect(pkg.type).toBe('module');
  expect(pkg.exports['.'].types).toBe('./dist/index.d.ts');
});
