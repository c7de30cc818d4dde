/**
 * The failover and standby-read benches still run (issue 34, part 6): `node bench/failover.mjs --rounds 1 --kind
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
  const files = readdirSync(out!).filter((f) => f.startsWith('failover') && f.endsWith('.json'));
  expect(files).toHaveLength(1);
  const result = JSON.parse(readFileSync(join(out!, files[0]), 'utf8')) as { summary: Record<string, unknown>; rounds: Record<string, unknown>[] };
  expect(result.rounds).toHaveLength(1);
  expect(result.summary).toMatchObject({ kind: 'switchover', rounds: 1 });
  for (const g of [0, 1]) expect(typeof result.rounds[0][`gw${g} unavailable (s)`]).toBe('number');
});

it('bench/replicas.mjs --rounds 1 reads with 0, 1 and 2 standbys, the standbys serving, and writes the JSON', async () => {
  const r = await run(
    join(ROOT, 'bench/replicas.mjs'),
    ['--rounds', '1', '--duration', '2', '--warmup', '1', '--connections', '8', '--records', '100', '--out', out!],
    cleanEnv(),
    600_000,
  );
  expect(r.code, `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(0);
  const file = readdirSync(out!).find((f) => f.startsWith('replicas-') && f.endsWith('.json'));
  const result = JSON.parse(readFileSync(join(out!, file!), 'utf8')) as { summary: Record<string, any>; rows: Record<string, any>[] };
  expect(result.rows.map((x) => x.standbys)).toEqual([0, 1, 2]);
  for (const row of result.rows) {
    expect(row.rps).toBeGreaterThan(0);
    expect(row.non_2xx).toBe(0);
  }
  expect(result.rows[1].reads_by_target['0']).toBeGreaterThan(0);
  expect(result.rows[2].reads_by_target['1']).toBeGreaterThan(0);
  expect(result.summary['2 standbys'].ratio_to_0).toBeGreaterThan(0);
});
