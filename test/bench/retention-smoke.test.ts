/**
 * The retention purge under load at a size CI affords (issue 37 item 5): bench/retention.mjs
 * with KSLATE_RETENTION_ROWS=20000 (the bench's default is 1,000,000: `npm run
 * bench:retention`) purges the history over budgeted sweeps while 64 clients put to the same
 * class and readers page through the purged records' histories. Judged here: every purgeable
 * row went, no reader saw a gap without `truncated_before`, no sweep overran its budget by more
 * than a generous bound (the machine may be loaded), and the batch that met the deadline was
 * small. Throughput and latency figures are the bench's, not judged here.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { ROOT } from '../setup/build.js';
import { cleanEnv, ensureBuilt, run } from '../setup/cli.js';

let db: TestDb | undefined;
let out: string | undefined;

beforeAll(async () => {
  await ensureBuilt();
  db = await freshDatabase();
  out = mkdtempSync(join(tmpdir(), 'kslate-bench-retention-'));
}, 150_000);

afterAll(async () => {
  await db?.drop().catch(() => undefined);
  if (out) rmSync(out, { recursive: true, force: true });
});

it('purges 20,000 history rows over budgeted sweeps while 64 clients write; no reader sees a gap without the marker', async () => {
  const args = ['--budget', '500', '--clients', '64', '--readers', '2', '--live', '256', '--duration', '2', '--soak', '0', '--out', out!];
  const r = await run(join(ROOT, 'bench/retention.mjs'), args, cleanEnv({ KSLATE_BENCH_DATABASE_URL: db!.url, KSLATE_RETENTION_ROWS: '20000' }), 240_000);
  expect(r.code, `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(0);
  expect(r.stdout).toContain('gap check PASS');
  const files = readdirSync(out!).filter((f) => f.endsWith('.json'));
  expect(files).toHaveLength(1);
  const result = JSON.parse(readFileSync(join(out!, files[0]), 'utf8'));
  expect(result).toMatchObject({ rows: 20_000, records: 200, clients: 64 });
  // Every row but the current value of each record.
  expect(result.purged).toBe(20_000 - 200);
  expect(result.left).toBe(200);
  expect(result.reads.full).toBeGreaterThan(0);
  expect(result.reads.gapsWithoutMarker).toBe(0);
  expect(result.put_during_purge.windows).toBeGreaterThan(0);
  // Generous (a loaded 2-core machine): within the budget plus what one small batch may take there.
  expect(result.sweep_ms.max, JSON.stringify(result.sweep_ms)).toBeLessThan(500 + 2000);
}, 300_000);
