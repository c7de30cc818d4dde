/**
 * The watch fan-out bench still runs (issue 16 item 7): `node bench/watch.mjs --smoke`
 * against a database of this test run starts `kslate serve`, opens 20 SSE class watches,
 * writes for 3 s from 4 writers, checks every subscriber got every change, prints the
 * latency and RSS lines and writes its JSON. The figures are not judged here;
 * `npm run bench:watch` is where they count (docs/performance.md).
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
  out = mkdtempSync(join(tmpdir(), 'kslate-bench-watch-'));
}, 150_000);

afterAll(async () => {
  await db?.drop().catch(() => undefined);
  if (out) rmSync(out, { recursive: true, force: true });
});

it('bench/watch.mjs --smoke delivers every change to every subscriber and reports latency and RSS', async () => {
  const r = await run(join(ROOT, 'bench/watch.mjs'), ['--smoke', '--out', out!], cleanEnv({ KSLATE_BENCH_DATABASE_URL: db!.url }), 90_000);
  expect(r.code, `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(0);
  expect(r.stdout).toMatch(/write acknowledged -> event received: p50 [\d.]+ ms, p90 [\d.]+ ms, p99 [\d.]+ ms/);
  expect(r.stdout).toMatch(/gateway RSS: \d+ MB before, \d+ MB with 20 streams/);
  const files = readdirSync(out!).filter((f) => f.endsWith('.json'));
  expect(files).toHaveLength(1);
  const result = JSON.parse(readFileSync(join(out!, files[0]), 'utf8'));
  expect(result).toMatchObject({ subscribers: 20, writers: 4 });
  expect(result.writes).toBeGreaterThan(0);
  expect(result.events_received).toBe(result.writes * 20);
  expect(result.latency_ms.p99).toBeGreaterThanOrEqual(result.latency_ms.p50);
  expect(result.rss_mb.streams_open).toBeGreaterThan(0);
}, 120_000);
