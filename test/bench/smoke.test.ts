/**
 * The benchmark harness still starts (issue #5): `node bench/run.mjs --smoke` against a
 * database of this test run seeds a few hundred rows, starts `kslate serve` as a child,
 * drives every scenario for a fraction of a second, prints the table and writes its JSON.
 * The figures themselves are not checked here; `npm run bench` is where they count.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { ROOT } from '../setup/build.js';
import { cleanEnv, ensureBuilt, run, runProgram } from '../setup/cli.js';

const SCENARIOS = ['floor', 'put', 'get', 'etcd', 'hot', 'claim', 'query', 'history', 'mcp', 'grpc'];

let db: TestDb | undefined;
let out: string | undefined;

beforeAll(async () => {
  // The harness runs the compiled gateway (bin/kslate.js -> dist/): build it unless fresh.
  await ensureBuilt();
  db = await freshDatabase();
  out = mkdtempSync(join(tmpdir(), 'kslate-bench-smoke-'));
}, 150_000);

afterAll(async () => {
  await db?.drop().catch(() => undefined);
  if (out) rmSync(out, { recursive: true, force: true });
});

it('bench/run.mjs --smoke drives every scenario, prints the table and writes the JSON', async () => {
  const r = await run(join(ROOT, 'bench/run.mjs'), ['--smoke', '--out', out!], cleanEnv({ KSLATE_BENCH_DATABASE_URL: db!.url }), 90_000);
  expect(r.code, `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(0);
  for (const name of SCENARIOS) expect(r.stdout).toContain(`scenario ${name}`);
  expect(r.stdout).toContain('| scenario | via | clients |');
  expect(r.stdout).toContain('no lost update PASS');
  const files = readdirSync(out!).filter((f) => f.endsWith('.json'));
  expect(files).toHaveLength(1);
  const result = JSON.parse(readFileSync(join(out!, files[0]), 'utf8')) as {
    rows: {
      scenario: string;
      transport: string;
      rps: number;
      ratio?: number;
      ratio_ref?: number;
      ratio_ref_pairs?: { http: number; reference: number; ratio: number }[];
      p99?: number;
      p99_pairs?: { http: number; raw: number }[];
      same_page?: boolean;
      clients?: number;
      ratio_etcd?: number;
      unavailable?: boolean;
      reason?: string;
      etcd_runs?: number[];
    }[];
    targets: { id: string; value: unknown }[];
  };
  expect(result.rows.map((x) => x.scenario)).toEqual(expect.arrayContaining(['put', 'get', 'hot', 'claim', 'query', 'history']));
  // MCP and gRPC puts are driven by their own clients and by wire clients (issue 15); applied
  // puts count in both, and the transport targets are read on the wire rows.
  for (const t of ['mcp', 'mcp wire', 'grpc', 'grpc wire']) {
    const row = result.rows.find((x) => x.scenario === 'put' && x.transport === t);
    // On a miss, say which rows the run made and what it printed (a run beside the whole suite once lacked them).
    expect(row?.rps, `put via ${t}: ${JSON.stringify(result.rows.filter((x) => x.scenario === 'put'))}\nstdout:\n${r.stdout.slice(-4000)}`).toBeGreaterThan(0);
  }
  for (const id of ['mcp_ratio', 'grpc_ratio']) {
    const wire = result.rows.find((x) => x.scenario === 'put' && x.transport === `${id.split('_')[0]} wire`);
    expect(result.targets.find((x) => x.id === id)?.value, id).toBe(wire?.ratio);
  }
  // Each transport against the better of the HTTP puts right before and after it (a stalled
  // HTTP row must not flatter a transport): three such rows, MCP between the first two, gRPC
  // between the last two.
  const refs = result.rows.filter((x) => x.scenario === 'put (HTTP reference for MCP/gRPC)');
  expect(refs).toHaveLength(3);
  const bracketed = (t: string, a: number, b: number) => {
    const row = result.rows.find((x) => x.scenario === 'put' && x.transport === t)!;
    expect(row.ratio, t).toBe(Math.round((row.rps / Math.max(refs[a].rps, refs[b].rps)) * 100) / 100);
  };
  for (const t of ['mcp', 'mcp wire']) bracketed(t, 0, 1);
  for (const t of ['grpc', 'grpc wire']) bracketed(t, 1, 2);
  // put and get against the reference at the top level: three adjacent pairs, the median
  // pair's rows shown and its ratio taken (one stalled row must not decide a verdict).
  for (const scenario of ['put', 'get']) {
    const http = result.rows.filter((x) => x.scenario === scenario && x.transport === 'http').at(-1)!;
    const pairs = http.ratio_ref_pairs!;
    expect(pairs, `${scenario} pairs`).toHaveLength(3);
    for (const p of pairs) expect(p.ratio).toBe(Math.round((p.http / p.reference) * 100) / 100);
    expect(http.ratio_ref).toBe([...pairs].map((p) => p.ratio).sort((a, b) => a - b)[1]);
    // The row shown is a pair with the median ratio (two pairs may share it).
    expect(pairs.some((p) => p.ratio === http.ratio_ref && p.http === http.rps), JSON.stringify({ rps: http.rps, pairs })).toBe(true);
    expect(result.targets.find((x) => x.id === `${scenario}_ref_ratio`)?.value).toBe(http.ratio_ref);
  }
  // The half-peak tail is three adjacent gateway / raw SQL windows too; the pair with the
  // median gateway p99 is shown and decides the target.
  const half = result.rows.filter((x) => x.scenario === 'put p99 at 50% of peak');
  expect(half.map((x) => x.transport)).toEqual(['http open loop', 'raw open loop']);
  const p99s = half[0].p99_pairs!;
  expect(p99s, 'half-peak pairs').toHaveLength(3);
  expect(half[0].p99).toBe([...p99s].map((p) => p.http).sort((a, b) => a - b)[1]);
  expect(p99s.some((p) => p.http === half[0].p99 && p.raw === half[1].p99), JSON.stringify({ half, p99s })).toBe(true);
  expect(result.targets.find((x) => x.id === 'put_p99_half_peak')?.value).toBe(half[0].p99);
  // History has its design bar too: the reference answers the same page, rendered at read
  // time and from rows stored rendered, and the gateway's row carries its ratio to it.
  for (const t of ['reference', 'reference pre-rendered']) {
    const row = result.rows.find((x) => x.scenario === 'history' && x.transport === t);
    expect(row?.rps, `history via ${t}`).toBeGreaterThan(0);
    expect(row?.same_page, `history via ${t}: the same page as the gateway`).toBe(true);
  }
  expect(result.rows.find((x) => x.scenario === 'history' && x.transport === 'http')?.ratio_ref).toBeGreaterThan(0);
  // The peer (issue 38): etcd's CAS and get at the top concurrency, with kslate's and the
  // reference's ratios to them; or, where etcd cannot be installed (scripts/etcd.sh), the
  // reason printed and both rows marked not available.
  const top = Math.max(...result.rows.filter((x) => x.scenario === 'put' && x.transport === 'http').map((x) => x.clients ?? 0));
  const etcdRows = ['put', 'get'].map((s) => result.rows.find((x) => x.scenario === s && x.transport === 'etcd'));
  const etcdTarget = result.targets.find((x) => x.id === 'put_etcd_ratio') as { value: unknown; note?: string } | undefined;
  if (etcdRows.every((x) => x?.unavailable)) {
    expect(r.stdout).toMatch(/etcd: not available \(.+\); its rows are skipped/);
    for (const x of etcdRows) expect(x?.reason, JSON.stringify(x)).toBeTruthy();
    expect(etcdTarget?.note).toContain('etcd not available');
  } else {
    for (const [i, s] of ['put', 'get'].entries()) {
      const peer = etcdRows[i]!;
      expect(peer.rps, `etcd ${s}: ${JSON.stringify(peer)}`).toBeGreaterThan(0);
      expect(peer.etcd_runs, `etcd ${s} windows`).toHaveLength(3);
      for (const t of ['http', 'reference']) {
        const mine = result.rows.filter((x) => x.scenario === s && x.transport === t && x.clients === top).at(-1)!;
        expect(mine.ratio_etcd, `${s} ${t} ratio to etcd`).toBe(Math.round((mine.rps / peer.rps) * 100) / 100);
      }
    }
    expect(etcdTarget?.value).toBe(result.rows.find((x) => x.scenario === 'put' && x.transport === 'http' && x.clients === top)?.ratio_etcd);
    expect(r.stdout).toMatch(/etcd CAS@\d+: [\d.]+ ops\/s/);
  }
  expect(r.stdout).toContain('| ratio to etcd |');
  expect(result.targets.length).toBeGreaterThan(0);
}, 120_000);

/**
 * The raw-SQL baseline (bench/lib/raw.mjs) must send the gateway's own statements, or its
 * ratio compares with another design. The full run checks it with auto_explain, which only
 * an embedded database has; here, on the smoke run's seeded database, against the gateway's
 * own code: the put is db/kysely/writes.ts's WRITE, the get the text PostgreSQL holds for
 * the named statement readRecord prepared (on a record the baseline's put wrote). Before the
 * fix, detectLock asked to_regproc() for kslate_write, which answers null for an overloaded
 * name, and the baseline had silently gone back to migration 0001's five-statement put.
 */
it('the raw baseline sends the statements the gateway sends (put and get)', async () => {
  const script = `
    import pg from 'pg';
    import { detectLock, rawStatements, rawGet, rawPut } from './bench/lib/raw.mjs';
    import { CLASS, FIELDS } from './bench/lib/db.mjs';
    import { WRITE } from './dist/db/kysely/writes.js';
    import { createPool, PgDb } from './dist/db/kysely/index.js';
    const url = process.env.DB;
    const norm = (s) => s.replace(/\\s+/g, ' ').trim();
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const lock = await detectLock(c);
    // Record bench/r-999999, field f1, written by the baseline's own put.
    const applied = await rawPut(c, 999999, { 999999: 0 }, 'apikey:bench', { n: 1 });
    const pool = createPool({ connectionString: url, max: 1, timeoutMs: 30000 });
    const db = new PgDb(pool);
    await db.readRecord(CLASS, 'r-999999', { fields: FIELDS, entriesLimit: null, entriesBeforeSeq: null, maxBytes: 16 * 1024 * 1024 });
    const { rows } = await pool.query("select statement from pg_prepared_statements where name = 'kslate_read_record_some'");
    const fields = await rawGet(c, 'r-999999', FIELDS);
    console.log(JSON.stringify({
      lock,
      applied,
      put: norm(rawStatements.put().join(';')) === norm(WRITE.text),
      get: rows.length === 1 && norm(rawStatements.get().join(';')) === norm(rows[0].statement),
      fields,
    }));
    await c.end();
    await db.kysely.destroy();`;
  const r = await runProgram(process.execPath, ['--input-type=module', '-e', script], cleanEnv({ DB: db!.url }));
  expect(r.code, r.stderr).toBe(0);
  expect(JSON.parse(r.stdout)).toEqual({ lock: 'kslate_write() (1 autocommitted statement, named)', applied: true, put: true, get: true, fields: 1 });
}, 60_000);
