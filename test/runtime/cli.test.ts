/**
 * The `kslate` command line as a user runs it (decisions §6 "Running it"): real child
 * processes of the compiled CLI (bin/kslate.js -> dist/), real sockets, real PostgreSQL.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { manifestsYaml, type ClassInput } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { distIsFresh } from '../setup/build.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = join(ROOT, 'bin', 'kslate.js');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

const KEY = 'alice-cli-key';

const demo: ClassInput = {
  name: 'cli-demo',
  spec: {
    fields: { title: { kind: 'versioned', type: 'string' } },
    roles: { writer: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
  },
};
const other: ClassInput = {
  name: 'cli-other',
  spec: {
    fields: { note: { kind: 'soft' } },
    roles: { writer: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
  },
};

/** The environment without any KSLATE_* variable, so only what a test sets counts. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('KSLATE_')) env[k] = v;
  return { ...env, ...extra };
}

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

const children = new Set<ChildProcess>();

function run(file: string, args: string[], env: NodeJS.ProcessEnv = cleanEnv(), timeoutMs = 30_000): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [file, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${args.join(' ')} did not exit within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.once('error', reject);
    // 'close' comes after 'exit' once the pipes are drained, so the output is complete.
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      resolvePromise({ code, signal, stdout, stderr });
    });
  });
}

const kslate = (args: string[], env?: NodeJS.ProcessEnv, timeoutMs?: number) => run(BIN, args, env, timeoutMs);

interface Served {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
}

/** Start `kslate serve` and wait for its log line saying it listens. */
function serve(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 40_000): Promise<Served> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, 'serve', ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    const served: Served = { child, stdout: () => stdout, stderr: () => stderr };
    const timer = setTimeout(
      () => reject(new Error(`serve did not log "listening" within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`)),
      timeoutMs,
    );
    child.stdout!.on('data', (d) => {
      stdout += d;
      if (/listening/.test(stdout)) {
        clearTimeout(timer);
        resolvePromise(served);
      }
    });
    child.stderr!.on('data', (d) => (stderr += d));
    child.once('error', reject);
    child.once('exit', (code) => {
      children.delete(child);
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code} before listening\nstdout: ${stdout}\nstderr: ${stderr}`));
    });
  });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(t);
  children.delete(child);
}

async function getJson(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* keep text */
  }
  return { status: res.status, body };
}


let work: string;
let classesDir: string;
let keysFile: string;
const dbs: TestDb[] = [];

async function db(): Promise<TestDb> {
  const d = await freshDatabase();
  dbs.push(d);
  return d;
}

beforeAll(async () => {
  // The CLI runs the compiled code: build it once (unless dist/ is already newer than every source).
  if (!distIsFresh()) {
    const build = await run(TSC, ['-p', join(ROOT, 'tsconfig.build.json')], cleanEnv(), 120_000);
    expect(build.code, `build failed:\n${build.stdout}\n${build.stderr}`).toBe(0);
  }

  work = mkdtempSync(join(tmpdir(), 'kslate-cli-'));
  classesDir = join(work, 'classes');
  mkdirSync(classesDir);
  writeFileSync(join(classesDir, 'demo.yaml'), manifestsYaml([demo]));
  keysFile = join(work, 'apikeys.yaml');
  writeFileSync(keysFile, stringify({ keys: [{ name: 'alice', sha256: createHash('sha256').update(KEY).digest('hex') }] }));
}, 150_000);

afterAll(async () => {
  await Promise.all([...children].map((c) => stop(c).catch(() => undefined)));
  await Promise.all(dbs.map((d) => d.drop().catch(() => undefined)));
  if (work) rmSync(work, { recursive: true, force: true });
}, 30_000);

// Every test is its own child process(es): run them side by side to keep the file short.
describe.concurrent('kslate serve', { timeout: 60_000 }, () => {
  it('refuses to start without --database-url or KSLATE_DATABASE_URL, naming both', async ({ expect }) => {
    const r = await kslate(['serve', '--identity', 'apikey', '--apikeys', keysFile]);
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBeNull();
    expect(r.stderr).toContain('--database-url');
    expect(r.stderr).toContain('KSLATE_DATABASE_URL');
  });

  it('serves with flags: logs "listening" as a JSON line, then answers with a key from the file', async ({ expect }) => {
    const d = await db();
    const port = await freePort();
    const metricsPort = await freePort();
    const s = await serve(
      [
        '--database-url', d.url,
        '--classes', classesDir,
        '--identity', 'apikey',
        '--apikeys', keysFile,
        '--listen', `127.0.0.1:${port}`,
        '--metrics-port', String(metricsPort),
      ],
      cleanEnv(),
    );
    try {
      const line = s.stdout().split('\n').find((l) => l.includes('listening'))!;
      expect(line).toBeTruthy();
      // Not a TTY: the log is JSON lines.
      expect(() => JSON.parse(line)).not.toThrow();

      const base = `http://127.0.0.1:${port}`;
      const classes = await getJson(`${base}/v1/classes`, { authorization: `Bearer ${KEY}` });
      expect(classes.status).toBe(200);
      expect(classes.body.classes).toEqual([{ name: 'cli-demo' }]);
      expect((await getJson(`${base}/v1/classes`)).status).toBe(401);
      expect((await getJson(`${base}/readyz`)).status).toBe(200);
      expect((await getJson(`http://127.0.0.1:${metricsPort}/readyz`)).status).toBe(200);
      const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      expect(metrics.status).toBe(200);
    } finally {
      await stop(s.child);
    }
  });

  it('takes every setting from KSLATE_* variables instead of flags', async ({ expect }) => {
    const d = await db();
    const port = await freePort();
    const metricsPort = await freePort();
    const s = await serve(
      [],
      cleanEnv({
        KSLATE_DATABASE_URL: d.url,
        KSLATE_LISTEN: `127.0.0.1:${port}`,
        KSLATE_METRICS_PORT: String(metricsPort),
        KSLATE_CLASSES: classesDir,
        KSLATE_IDENTITY: 'apikey',
        KSLATE_APIKEYS: keysFile,
      }),
    );
    try {
      const classes = await getJson(`http://127.0.0.1:${port}/v1/classes`, { authorization: `Bearer ${KEY}` });
      expect(classes.status).toBe(200);
      expect(classes.body.classes).toEqual([{ name: 'cli-demo' }]);
      expect((await getJson(`http://127.0.0.1:${metricsPort}/readyz`)).status).toBe(200);
    } finally {
      await stop(s.child);
    }
  });

  it('a flag wins over its variable', async ({ expect }) => {
    const d = await db();
    const port = await freePort();
    const metricsPort = await freePort();
    const s = await serve(
      ['--listen', `127.0.0.1:${port}`],
      cleanEnv({
        KSLATE_DATABASE_URL: d.url,
        KSLATE_LISTEN: '127.0.0.1:1', // privileged port: would fail if used
        KSLATE_METRICS_PORT: String(metricsPort),
        KSLATE_IDENTITY: 'apikey',
        KSLATE_APIKEYS: keysFile,
      }),
    );
    try {
      expect((await getJson(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    } finally {
      await stop(s.child);
    }
  });

  it('a bad flag value exits non-zero naming the flag and its variable', async ({ expect }) => {
    const d = await db();
    const r = await kslate(['serve', '--database-url', d.url, '--identity', 'apikey', '--apikeys', keysFile, '--grpc-port', 'abc']);
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBeNull();
    expect(r.stderr).toContain('--grpc-port');
    expect(r.stderr).toContain('KSLATE_GRPC_PORT');
  });

  it('--identity apikey without --apikeys exits non-zero naming --apikeys', async ({ expect }) => {
    const d = await db();
    const r = await kslate(['serve', '--database-url', d.url, '--identity', 'apikey']);
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBeNull();
    expect(r.stderr).toContain('--apikeys');
  });
});

describe.concurrent('kslate classes check', { timeout: 60_000 }, () => {
  it('exits 0 and prints ok on examples/classes', async ({ expect }) => {
    const r = await kslate(['classes', 'check', join(ROOT, 'examples', 'classes')]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/\bok\b/);
  });

  it('exits 1 with one line per problem on a bad manifest', async ({ expect }) => {
    const bad = join(work, 'bad-classes');
    mkdirSync(bad, { recursive: true });
    writeFileSync(
      join(bad, 'bad.yaml'),
      'apiVersion: kslate.dev/v1\nkind: SharedContext\nmetadata:\n  name: broken\nspec:\n  fields:\n' +
        '    title: { kind: versioned, typ: string }\n' + // problem 1: unknown key
        '    n: { kind: soft, leaseSeconds: 5 }\n', // problem 2: lease on a non-task field
    );
    const r = await kslate(['classes', 'check', bad]);
    expect(r.code).toBe(1);
    const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
    expect(lines).toHaveLength(2);
    expect(lines.some((l) => l.includes('typ'))).toBe(true);
    expect(lines.some((l) => l.includes('leaseSeconds'))).toBe(true);
    expect(r.stdout).not.toMatch(/\bok\b/);
  });
});

describe.concurrent('kslate sweep', { timeout: 60_000 }, () => {
  it('reconciles the classes directory into the class table, and marks a removed manifest gone', async ({ expect }) => {
    const d = await db();
    const dir = join(work, 'sweep-classes');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'demo.yaml'), manifestsYaml([demo]));
    writeFileSync(join(dir, 'other.yaml'), manifestsYaml([other]));

    const classTable = async () => {
      const c = new pg.Client({ connectionString: d.url });
      await c.connect();
      try {
        const { rows } = await c.query<{ name: string; gone: boolean }>('select name, gone from classes order by name');
        return rows;
      } finally {
        await c.end();
      }
    };

    const r1 = await kslate(['sweep', '--database-url', d.url, '--classes', dir]);
    expect(r1.code, r1.stderr).toBe(0);
    expect(await classTable()).toEqual([
      { name: 'cli-demo', gone: false },
      { name: 'cli-other', gone: false },
    ]);

    unlinkSync(join(dir, 'other.yaml'));
    const r2 = await kslate(['sweep', '--database-url', d.url, '--classes', dir]);
    expect(r2.code, r2.stderr).toBe(0);
    expect(await classTable()).toEqual([
      { name: 'cli-demo', gone: false },
      { name: 'cli-other', gone: true },
    ]);
  });

  it('also reads KSLATE_DATABASE_URL and KSLATE_CLASSES', async ({ expect }) => {
    const d = await db();
    const r = await kslate(['sweep'], cleanEnv({ KSLATE_DATABASE_URL: d.url, KSLATE_CLASSES: classesDir }));
    expect(r.code, r.stderr).toBe(0);
    const c = new pg.Client({ connectionString: d.url });
    await c.connect();
    try {
      const { rows } = await c.query('select name, gone from classes');
      expect(rows).toEqual([{ name: 'cli-demo', gone: false }]);
    } finally {
      await c.end();
    }
  });

  it('without a database URL exits non-zero naming --database-url', async ({ expect }) => {
    const r = await kslate(['sweep', '--classes', classesDir]);
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBeNull();
    expect(r.stderr).toContain('--database-url');
  });
});

describe.concurrent('kslate help', { timeout: 60_000 }, () => {
  it('exits 0 and lists the flags with their variables', async ({ expect }) => {
    const r = await kslate(['help']);
    expect(r.code).toBe(0);
    for (const flag of [
      '--database-url',
      '--listen',
      '--grpc-port',
      '--metrics-port',
      '--max-conns',
      '--tls-cert',
      '--tls-key',
      '--classes',
      '--sweep-interval',
      '--identity',
      '--apikeys',
    ]) {
      expect(r.stdout).toContain(flag);
    }
    for (const v of ['KSLATE_DATABASE_URL', 'KSLATE_LISTEN']) expect(r.stdout).toContain(v);
    for (const cmd of ['serve', 'sweep', 'dev']) expect(r.stdout).toContain(cmd);
  });
});
