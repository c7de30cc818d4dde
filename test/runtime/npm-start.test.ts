/**
 * `npm start` builds only when a source changed (issue 31, item 8): it runs `tsc -b`, whose
 * tsbuildinfo in dist/ makes an up-to-date build a check of timestamps instead of a 24 s
 * compile, so `npm start -- --help` answers at once. `npm install` (prepare: npm run build)
 * writes the same tsbuildinfo, so the first start after it does not build again.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, expect, test } from 'vitest';
import { ROOT } from '../setup/build.js';
import { cleanEnv, ensureBuilt, run, runProgram, TSC } from '../setup/cli.js';

const MAIN = join(ROOT, 'dist', 'runtime', 'main.js');

beforeAll(async () => {
  await ensureBuilt();
  // As `npm install` leaves it: built by `npm run build` (a no-op when already up to date).
  const b = await run(TSC, ['-b', join(ROOT, 'tsconfig.build.json')], cleanEnv(), 240_000);
  expect(b.code, b.stdout + b.stderr).toBe(0);
}, 300_000);

test('npm start -- --help with the sources unchanged compiles nothing and prints the dev usage', async () => {
  const before = statSync(MAIN).mtimeMs;
  const r = await runProgram('npm', ['start', '--silent', '--', '--help']);
  expect(r.code, r.stdout + r.stderr).toBe(0);
  expect(r.stdout).toMatch(/^Usage: kslate dev/m);
  // Nothing was emitted: the compiled CLI is the file it was.
  expect(statSync(MAIN).mtimeMs).toBe(before);
}, 120_000);

test('npm start and npm run build use the same incremental build (tsc -b and its tsbuildinfo in dist/)', async () => {
  const pkg = (await import('../../package.json', { with: { type: 'json' } })).default as { scripts: Record<string, string> };
  // The gateway's incremental build first; then the workspaces (@kslate/client, @kslate/langgraph).
  expect(pkg.scripts.build).toMatch(/^tsc -b tsconfig\.build\.json( && npm run build --silent -w \S+( -w \S+)*)?$/);
  expect(pkg.scripts.start).toMatch(/^tsc -b tsconfig\.build\.json && node bin\/kslate\.js dev$/);
  expect(pkg.scripts.prepare).toBe('npm run build');
  expect(statSync(join(ROOT, 'dist', 'tsconfig.build.tsbuildinfo')).isFile()).toBe(true);
});
