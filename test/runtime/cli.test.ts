/**
 * The `kslate` command line as a user runs it (decisions §6 "Running it"): real child
 * processes of the compiled CLI (bin/kslate.js -> dist/), real sockets, real PostgreSQL.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { manifestsYaml, type ClassInput } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { ROOT } from '../setup/build.js';
import { children, cleanEnv, ensureBuilt, getJson, kslate, logLines, start, stop } from '../setup/cli.js';

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

const serve = (args: string[], env: NodeJS.ProcessEnv) => start(['serve', ...args], env);

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
  await ensureBuilt();

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

/** Every transport the gateway serves, and where: `kslate help` and `kslate serve --help` name them all. */
function expectTransports(stdout: string) {
  for (const where of ['HTTP/JSON', '/v1/openapi.json', 'watch (SSE)', '/v1/classes/CLASS/watch', '/mcp', '/mcp/session', 'gRPC', 'svc.v1.SvcService', '--grpc-port', '/ui', '--metrics-port']) {
    expect(stdout, `names ${where}`).toContain(where);
  }
}

/** The flag's line of a usage text. */
const flagUsage = (text: string, flag: string) => text.split('\n').find((l) => l.startsWith(`  --${flag} `)) ?? '';

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
    for (const cmd of ['serve', 'sweep', 'dev', 'worker']) expect(r.stdout).toContain(cmd);
    expectTransports(r.stdout);
  });
});

describe.concurrent('kslate COMMAND --help, --version, --log-level', { timeout: 60_000 }, () => {
  for (const cmd of ['serve', 'dev', 'worker', 'sweep', 'migrate', 'classes', 'version']) {
    for (const flag of ['--help', '-h']) {
      it(`kslate ${cmd} ${flag} prints that command's usage and exits 0`, async ({ expect }) => {
        const r = await kslate([cmd, flag], cleanEnv(), 15_000);
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        expect(r.stdout).toMatch(new RegExp(`^Usage: kslate ${cmd}`));
        if (cmd === 'serve' || cmd === 'dev') {
          for (const f of ['--database-url', '--listen', '--drain-timeout', '--db-timeout', '--log-level']) expect(r.stdout).toContain(f);
          expect(r.stdout).toContain('KSLATE_DRAIN_TIMEOUT');
        }
        if (cmd === 'dev') for (const f of ['--dev-pg-port', 'KSLATE_DEV_PG_PORT', '--data-dir']) expect(r.stdout).toContain(f);
        if (cmd === 'serve') expect(r.stdout).not.toContain('--dev-pg-port');
        if (cmd === 'worker') for (const f of ['--sweep-interval', '--health-port', '--metrics-port', '--watch-namespace', 'KSLATE_HEALTH_PORT']) expect(r.stdout).toContain(f);
        // The defaults shown are the ones the command uses: the worker's metrics are on 9090, dev runs with API keys.
        if (cmd === 'worker') {
          expect(flagUsage(r.stdout, 'metrics-port')).toMatch(/\(default 9090\)$/);
          expect(flagUsage(r.stdout, 'sweep-interval')).toMatch(/\(default 60s\)$/);
          expect(flagUsage(r.stdout, 'health-port')).toMatch(/\(default 8081\)$/);
        }
        if (cmd === 'serve') {
          expect(flagUsage(r.stdout, 'metrics-port')).toMatch(/\(default 9100\)$/);
          expect(flagUsage(r.stdout, 'identity')).toMatch(/\(default k8s-sa\)$/);
          expectTransports(r.stdout);
        }
        if (cmd === 'dev') {
          expect(flagUsage(r.stdout, 'identity')).toMatch(/\(default apikey\)$/);
          expect(flagUsage(r.stdout, 'sweep-interval')).toMatch(/\(default 10s\)$/);
        }
      });
    }
  }

  it('npm start -- --help (kslate dev --help) is the dev usage, not an error', async ({ expect }) => {
    const r = await kslate(['dev', '--help', '--listen', '0.0.0.0:1'], cleanEnv(), 15_000);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: kslate dev/);
  });

  for (const args of [['--version'], ['-v'], ['version']]) {
    it(`kslate ${args.join(' ')} prints the version and exits 0`, async ({ expect }) => {
      const r = await kslate(args, cleanEnv(), 15_000);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`kslate ${JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version}\n`);
    });
  }

  it('an unknown --log-level is refused before anything starts, naming the allowed levels', async ({ expect }) => {
    const d = await db();
    const r = await kslate(
      ['serve', '--database-url', d.url, '--identity', 'apikey', '--apikeys', keysFile, '--listen', '127.0.0.1:0', '--metrics-port', '0', '--log-level', 'verbose'],
      cleanEnv(),
      15_000,
    );
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('--log-level (KSLATE_LOG_LEVEL)');
    expect(r.stderr).toContain('debug, info, warn, error');
    expect(r.stderr).toContain('"verbose"');
  });

  it('kslate dev honours --log-level: at warn it logs no info lines', async ({ expect }) => {
    const d = await db();
    const [port, metricsPort] = [await freePort(), await freePort()];
    const s = await start(
      ['dev', '--database-url', d.url, '--listen', `127.0.0.1:${port}`, '--metrics-port', String(metricsPort), '--log-level', 'warn'],
      cleanEnv(),
      { ready: /kslate dev is running/ },
    );
    try {
      expect((await getJson(`http://127.0.0.1:${port}/v1/classes`, { authorization: 'Bearer alice-dev-key' })).status).toBe(200);
      expect(logLines(s.stdout()).filter((l) => l.level === 'info' || l.level === 'debug')).toEqual([]);
    } finally {
      await stop(s.child);
    }
  });
});

/** A TCP listener on a free loopback port, standing in for whatever else took it. */
async function holdPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const addr = server.address();
  return { port: typeof addr === 'object' && addr ? addr.port : 0, server };
}

function holdPortNumber(port: number): Promise<Server> {
  return new Promise((resolvePromise, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolvePromise(server));
  });
}

describe.concurrent('a port already in use', { timeout: 60_000 }, () => {
  /** One line naming the port and the setting that changes it, exit 1, no stack trace. */
  function expectOneLine(r: Awaited<ReturnType<typeof kslate>>, port: number, flag: string, env: string) {
    expect(r.code, r.stderr).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toContain(`port ${port} is already in use`);
    expect(lines[0]).toContain(flag);
    expect(lines[0]).toContain(env);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }

  const serveArgs = async () => {
    const d = await db();
    return ['serve', '--database-url', d.url, '--identity', 'apikey', '--apikeys', keysFile];
  };

  it('the API port (--listen)', async () => {
    const held = await holdPort();
    try {
      const r = await kslate([...(await serveArgs()), '--listen', `127.0.0.1:${held.port}`, '--metrics-port', '0'], cleanEnv(), 20_000);
      expectOneLine(r, held.port, '--listen', 'KSLATE_LISTEN');
    } finally {
      held.server.close();
    }
  });

  it('the metrics port (--metrics-port)', async () => {
    const held = await holdPort();
    try {
      const r = await kslate([...(await serveArgs()), '--listen', '127.0.0.1:0', '--metrics-port', String(held.port)], cleanEnv(), 20_000);
      expectOneLine(r, held.port, '--metrics-port', 'KSLATE_METRICS_PORT');
    } finally {
      held.server.close();
    }
  });

  it('the gRPC port (--grpc-port)', async () => {
    const held = await holdPort();
    try {
      const r = await kslate(
        [...(await serveArgs()), '--listen', '127.0.0.1:0', '--metrics-port', '0', '--grpc-port', String(held.port)],
        cleanEnv(),
        20_000,
      );
      expectOneLine(r, held.port, '--grpc-port', 'KSLATE_GRPC_PORT');
    } finally {
      held.server.close();
    }
  });

  it('kslate dev: the API port, after its embedded PostgreSQL started (which it stops again)', async () => {
    const held = await holdPort();
    const dataDir = mkdtempSync(join(tmpdir(), 'kslate-devapi-'));
    const pgPort = await freePort();
    try {
      const r = await kslate(
        ['dev', '--data-dir', dataDir, '--dev-pg-port', String(pgPort), '--listen', `127.0.0.1:${held.port}`, '--metrics-port', '0'],
        cleanEnv(),
        60_000,
      );
      expectOneLine(r, held.port, '--listen', 'KSLATE_LISTEN');
      // Its PostgreSQL is not left running: the port is free again.
      const again = await holdPortNumber(pgPort);
      again.close();
    } finally {
      held.server.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("kslate dev's embedded PostgreSQL port (--dev-pg-port, also KSLATE_DEV_PG_PORT)", async () => {
    const held = await holdPort();
    const dataDir = mkdtempSync(join(tmpdir(), 'kslate-devport-'));
    try {
      const base = ['dev', '--data-dir', dataDir, '--listen', '127.0.0.1:0', '--metrics-port', '0'];
      expectOneLine(await kslate([...base, '--dev-pg-port', String(held.port)], cleanEnv(), 20_000), held.port, '--dev-pg-port', 'KSLATE_DEV_PG_PORT');
      expectOneLine(await kslate(base, cleanEnv({ KSLATE_DEV_PG_PORT: String(held.port) }), 20_000), held.port, '--dev-pg-port', 'KSLATE_DEV_PG_PORT');
    } finally {
      held.server.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
