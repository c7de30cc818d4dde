/**
 * The benchmark harness still starts (issue #5): `node bench/run.mjs --smoke` against a
 * database of this test run seeds a few hundred rows, starts `kslate serve` as a child,
 * drives every scenario for a fraction of a second, prints the table and writes its JSON.
 * The figures themselves are not checked here; `npm run bench` is where they count.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { distIsFresh } from '../setup/build.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const SCENARIOS = ['floor', 'put', 'get', 'hot', 'claim', 'query', 'history', 'mcp', 'grpc'];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${args.join(' ')} did not exit within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr });
    });
  });
}

/** The environment without KSLATE_* variables, so only what this test sets counts. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('KSLATE_')) env[k] = v;
  return { ...env, ...extra };
}


let db: TestDb | undefined;
let out: string | undefined;

beforeAll(async () => {
  // The harness runs the compiled gateway (bin/kslate.js -> dist/): build it unless fresh.
  if (!distIsFresh()) {
    const build = await run([TSC, '-p', join(ROOT, 'tsconfig.build.json')], cleanEnv({}), 120_000);
    expect(build.code, `build failed:\n${build.stdout}\n${build.stderr}`).toBe(0);
  }
  db = await freshDatabase();
  out = mkdtempSync(join(tmpdir(), 'kslate-bench-smoke-'));
}, 150_000);

afterAll(async () => {
  await db?.drop().catch(() => undefined);
  if (out) rmSync(out, { recursive: true, force: true });
});

it('bench/run.mjs --smoke drives every scenario, prints the table and writes the JSON', async () => {
  const r = await run(['bench/run.mjs', '--smoke', '--out', out!], cleanEnv({ KSLATE_BENCH_DATABASE_URL: db!.url }), 90_000);
  expect(r.code, `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(0);
  for (const name of SCENARIOS) expect(r.stdout).toContain(`scenario ${name}`);
  expect(r.stdout).toContain('| scenario | via | clients |');
  expect(r.stdout).toContain('no lost update PASS');
  const files = readdirSync(out!).filter((f) => f.endsWith('.json'));
  expect(files).toHaveLength(1);
  const result = JSON.parse(readFileSync(join(out!, files[0]), 'utf8')) as { rows: { scenario: string }[]; targets: unknown[] };
  expect(result.rows.map((x) => x.scenario)).toEqual(expect.arrayContaining(['put', 'get', 'hot', 'claim', 'query', 'history']));
  expect(result.targets.length).toBeGreaterThan(0);
}, 120_000);
