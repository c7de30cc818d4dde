/**
 * The failover bench still runs (issue 34, part 6): `node bench/failover.mjs --rounds 1 --kind
 * switchover` starts its own cluster and gateways, fails over once, prints a row per round and
 * writes its JSON. The figures are not checked here; `npm run bench:failover` is where they count.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ROOT } from '../setup/build.js';
import { cleanEnv, ensureBuilt, run } from '../setup/cli.js';

let out: string | undefined;

beforeAll(async () => {
  await ensureBuilt();
  out = mkdtempSync(join(tmpdir(), 'kslate-bench-failover-'));
}, 150_000);

afterAll(() => {
  if (out) rmSync(out, { recursive: true, force: true });
});

it('bench/failover.mjs --rounds 1 fails over once, measures both gateways and writes the JSON', async () => {
  const r = await run(join(ROOT, 'bench/failover.mjs'), ['--rounds', '1', '--kind', 'switchover', '--out', out!], cleanEnv(), 600_000);
  expect(r.code, `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(0);
  const files = readdirSync(out!).filter((f) => f.endsWith('.json'));
  expect(files).toHaveLength(1);
  const result = JSON.parse(readFileSync(join(out!, files[0]), 'utf8')) as { summary: Record<string, unknown>; rounds: Record<string, unknown>[] };
  expect(result.rounds).toHaveLength(1);
  expect(result.summary).toMatchObject({ kind: 'switchover', rounds: 1 });
  for (const g of [0, 1]) expect(typeof result.rounds[0][`gw${g} unavailable (s)`]).toBe('number');
});
