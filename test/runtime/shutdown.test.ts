/**
 * Stopping (SIGTERM/SIGINT) as an orchestrator or a terminal does it, on real `kslate serve`
 * and `kslate dev` processes: /readyz answers 503 at once, requests in flight finish (with
 * Connection: close), the drain is bounded by --drain-timeout, a second signal exits at once,
 * one log line per phase, exit 0. Requests are held in flight by locking their record rows
 * from a test connection (the write path waits on that row lock).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { children, cleanEnv, ensureBuilt, getJson, logLines, start, stop, type Served } from '../setup/cli.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { manifestsYaml } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';

const KEY = 'alice-drain-key';
const CLASS = 'drain-demo';
const IN_FLIGHT = 16;

let work: string;
let classesDir: string;
let keysFile: string;
const dbs: TestDb[] = [];

beforeAll(async () => {
  await ensureBuilt();
  work = mkdtempSync(join(tmpdir(), 'kslate-drain-'));
  classesDir = join(work, 'classes');
  mkdirSync(classesDir);
  writeFileSync(
    join(classesDir, 'demo.yaml'),
    manifestsYaml([
      {
        name: CLASS,
        spec: {
          fields: { title: { kind: 'versioned', type: 'string' } },
          roles: { writer: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
        },
      },
    ]),
  );
  keysFile = join(work, 'apikeys.yaml');
  writeFileSync(keysFile, stringify({ keys: [{ name: 'alice', sha256: createHash('sha256').update(KEY).digest('hex') }] }));
}, 150_000);

afterAll(async () => {
  await Promise.all([...children].map((c) => stop(c).catch(() => undefined)));
  await Promise.all(dbs.map((d) => d.drop().catch(() => undefined)));
  if (work) rmSync(work, { recursive: true, force: true });
}, 30_000);

interface Gw {
  served: Served;
  base: string;
  metrics: string;
  db: TestDb;
}

async function serve(extra: string[]): Promise<Gw> {
  const db = await freshDatabase();
  dbs.push(db);
  const [port, metricsPort] = [await freePort(), await freePort()];
  const served = await start(
    [
      'serve',
      '--database-url', db.url,
      '--classes', classesDir,
      '--identity', 'apikey',
      '--apikeys', keysFile,
      '--listen', `127.0.0.1:${port}`,
      '--metrics-port', String(metricsPort),
      // One PostgreSQL, no standby: the test expects no warning at all (docs/ha.md).
      '--allow-async-replication', 'true',
      ...extra,
    ],
    cleanEnv(),
  );
  return { served, base: `http://127.0.0.1:${port}`, metrics: `http://127.0.0.1:${metricsPort}`, db };
}

const put = (gw: Gw, rid: string, value: string, expected: number) =>
  getJson(`${gw.base}/v1/records/${CLASS}/${rid}/fields/title`, { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, {
    method: 'PUT',
    body: JSON.stringify({ value, expected_version: expected }),
  });

/** A test connection holding the row locks of `rids` in an open transaction; `release()` commits. */
async function lockRecords(db: TestDb, rids: string[], cls = CLASS) {
  const c = new pg.Client({ connectionString: db.url });
  c.on('error', () => undefined); // a server going away is the test's finding, not a crash
  await c.connect();
  await c.query('begin');
  const { rowCount } = await c.query('select id from records where class = $1 and rid = any($2::text[]) for update', [cls, rids]);
  expect(rowCount).toBe(rids.length);
  return {
    client: c,
    async release() {
      await c.query('commit').catch(() => undefined);
      await c.end().catch(() => undefined);
    },
  };
}

/** Wait until `n` of the gateway's sessions wait on a lock: the requests are in flight. */
async function waitForLockWaiters(db: TestDb, n: number) {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    const end = Date.now() + 15_000;
    let last = -1;
    while (Date.now() < end) {
      const { rows } = await c.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
      );
      last = rows[0].n;
      if (last >= n) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`only ${last} of ${n} requests reached the lock`);
  } finally {
    await c.end();
  }
}

const within = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms))]);

describe('kslate serve on SIGTERM', { timeout: 90_000 }, () => {
  it(`answers /readyz 503 at once, finishes all ${IN_FLIGHT} requests in flight, then exits 0 with a line per phase`, async () => {
    // Every request reaches PostgreSQL's lock queue: a pool of at least IN_FLIGHT connections.
    const gw = await serve(['--db-timeout', '60s', '--drain-timeout', '20s', '--db-pool-size', String(IN_FLIGHT), '--grpc-port', String(await freePort())]);
    const rids = Array.from({ length: IN_FLIGHT }, (_, i) => `r${i}`);
    for (const rid of rids) expect((await put(gw, rid, 'v1', 0)).status).toBe(201);

    const lock = await lockRecords(gw.db, rids);
    let released = false;
    try {
      const inFlight = rids.map((rid) => put(gw, rid, 'v2', 1));
      await waitForLockWaiters(gw.db, IN_FLIGHT);
      // An idle keep-alive connection, opened and used before the signal.
      const idle = connect(Number(new URL(gw.base).port), '127.0.0.1');
      const idleClosed = new Promise<void>((r) => idle.once('close', () => r()));
      const firstAnswer = new Promise<string>((r) => idle.once('data', (d) => r(String(d))));
      idle.write('GET /healthz HTTP/1.1\r\nHost: kslate\r\n\r\n');
      expect(await firstAnswer).toMatch(/^HTTP\/1\.1 200[\s\S]*keep-alive/i);

      const t0 = Date.now();
      gw.served.child.kill('SIGTERM');
      // The metrics port answers /readyz 503 straight away (probes stop sending traffic) and
      // /healthz stays 200 (the process is alive, do not restart it).
      let ready = await getJson(`${gw.metrics}/readyz`);
      while (ready.status === 200 && Date.now() - t0 < 2_000) ready = await getJson(`${gw.metrics}/readyz`);
      const readyAfterMs = Date.now() - t0;
      expect(ready.status).toBe(503);
      expect(ready.body).toMatchObject({ error: 'UNAVAILABLE' });
      expect(ready.body.message).toMatch(/shutting down/);
      expect(readyAfterMs).toBeLessThan(1_000);
      expect((await getJson(`${gw.metrics}/healthz`)).status).toBe(200);
      // No new connections on the API port, and idle ones are closed.
      await expect(fetch(`${gw.base}/healthz`)).rejects.toThrow();
      await within(idleClosed, 1_000, 'closing the idle keep-alive connection');

      await new Promise((r) => setTimeout(r, 300));
      expect(gw.served.child.exitCode).toBeNull(); // still draining: the requests hold it open
      await lock.release();
      released = true;

      const results = await within(Promise.all(inFlight), 20_000, 'the requests in flight');
      expect(results.map((r) => r.status)).toEqual(rids.map(() => 200));
      // Their connections end after the answer instead of being kept alive.
      for (const r of results) expect(r.headers.get('connection')).toBe('close');

      const exit = await within(gw.served.exited, 20_000, 'the exit');
      const stoppedAfterMs = Date.now() - t0;
      expect(exit).toEqual({ code: 0, signal: null });
      const msgs = logLines(gw.served.stdout()).map((l) => l.msg);
      const phases = [
        `shutting down: draining ${IN_FLIGHT} in-flight requests`,
        'drained',
        'gRPC stopped',
        'database pool closed',
        'stopped',
      ];
      const at = phases.map((p) => msgs.findIndex((m) => m.startsWith(p)));
      expect(at.every((i) => i >= 0), msgs.join('\n')).toBe(true);
      expect([...at].sort((a, b) => a - b)).toEqual(at);
      expect(gw.served.stderr()).toBe('');
      expect(logLines(gw.served.stdout()).filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);

      // Every write was committed once.
      const c = new pg.Client({ connectionString: gw.db.url });
      await c.connect();
      try {
        const { rows } = await c.query('select rid, record_version::int as v from records where class = $1 order by rid', [CLASS]);
        expect(rows).toHaveLength(IN_FLIGHT);
        for (const row of rows) expect(row.v).toBe(2);
      } finally {
        await c.end();
      }
      console.log(
        `SIGTERM drain: ${IN_FLIGHT} in flight, ${results.filter((r) => r.status === 200).length} completed 200, ` +
          `/readyz 503 after ${readyAfterMs} ms, exit 0 ${stoppedAfterMs} ms after SIGTERM`,
      );
    } finally {
      if (!released) await lock.release();
    }
  });

  it('does not wait past --drain-timeout for a request that never finishes', async () => {
    const gw = await serve(['--db-timeout', '60s', '--drain-timeout', '2s']);
    expect((await put(gw, 'stuck', 'v1', 0)).status).toBe(201);
    const lock = await lockRecords(gw.db, ['stuck']);
    try {
      const hung = put(gw, 'stuck', 'v2', 1).catch((e: Error) => e);
      await waitForLockWaiters(gw.db, 1);
      const t0 = Date.now();
      gw.served.child.kill('SIGTERM');
      const exit = await within(gw.served.exited, 10_000, 'the exit');
      const tookMs = Date.now() - t0;
      expect(exit).toEqual({ code: 0, signal: null });
      expect(tookMs).toBeGreaterThanOrEqual(1_900);
      expect(tookMs).toBeLessThan(5_000);
      expect(await hung).toBeInstanceOf(Error); // cut off, not answered
      const msgs = logLines(gw.served.stdout()).map((l) => l.msg);
      expect(msgs.some((m) => m.startsWith('drain timeout: cutting off 1 request still in flight after 2s'))).toBe(true);
      // The write waits for the row lock in one autocommitted statement: it is cancelled, not left to commit later.
      expect(msgs).toContain('cancelled 1 database statement still running at shutdown; they are rolled back');
      expect(msgs.at(-1)).toBe('stopped');
      console.log(`drain timeout 2s: exited 0 after ${tookMs} ms with 1 request still blocked`);
    } finally {
      await lock.release();
    }
    // The cut-off write was rolled back with its connection.
    const c = new pg.Client({ connectionString: gw.db.url });
    await c.connect();
    try {
      const { rows } = await c.query('select record_version::int as v from records where class = $1 and rid = $2', [CLASS, 'stuck']);
      expect(rows).toEqual([{ v: 1 }]);
    } finally {
      await c.end();
    }
  });

  it('a second signal during the drain exits at once, saying so', async () => {
    const gw = await serve(['--db-timeout', '60s', '--drain-timeout', '30s']);
    expect((await put(gw, 'held', 'v1', 0)).status).toBe(201);
    const lock = await lockRecords(gw.db, ['held']);
    try {
      const hung = put(gw, 'held', 'v2', 1).catch((e: Error) => e);
      await waitForLockWaiters(gw.db, 1);
      gw.served.child.kill('SIGTERM');
      const t0 = Date.now();
      while (!/shutting down/.test(gw.served.stdout()) && Date.now() - t0 < 5_000) await new Promise((r) => setTimeout(r, 20));
      gw.served.child.kill('SIGINT');
      const t1 = Date.now();
      const exit = await within(gw.served.exited, 5_000, 'the exit after the second signal');
      expect(Date.now() - t1).toBeLessThan(2_000);
      expect(exit.code).toBe(1);
      const lines = logLines(gw.served.stdout()).filter((l) => /again/.test(l.msg));
      expect(lines.map((l) => l.msg)).toEqual(['SIGINT again: exiting now without waiting for requests in flight']);
      await hung;
    } finally {
      await lock.release();
    }
  });
});

describe('kslate dev on Ctrl-C', { timeout: 120_000 }, () => {
  it('stops the gateway, then its embedded PostgreSQL, without warnings, and exits 0', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'kslate-dev-stop-'));
    const [port, metricsPort, pgPort] = [await freePort(), await freePort(), await freePort()];
    try {
      // A process group of its own: the test signals the whole group, as a terminal's Ctrl-C
      // does, so the embedded PostgreSQL gets SIGINT too.
      const s = await start(
        ['dev', '--data-dir', dataDir, '--dev-pg-port', String(pgPort), '--listen', `127.0.0.1:${port}`, '--metrics-port', String(metricsPort)],
        cleanEnv(),
        { ready: /kslate dev is running/, timeoutMs: 90_000, detached: true },
      );
      // Open a few pooled connections first: those are what Ctrl-C used to turn into warnings.
      const calls = await Promise.all(
        Array.from({ length: 4 }, () => getJson(`http://127.0.0.1:${port}/v1/classes`, { authorization: 'Bearer alice-dev-key' })),
      );
      expect(calls.map((c) => c.status)).toEqual([200, 200, 200, 200]);

      // A write in flight at Ctrl-C: it can only finish if PostgreSQL outlives the gateway's drain.
      const devDb: TestDb = { url: `postgres://postgres:postgres@127.0.0.1:${pgPort}/kslate`, name: 'kslate', drop: async () => undefined };
      const auth = { authorization: 'Bearer alice-dev-key', 'content-type': 'application/json' };
      const title = (expected: number) =>
        getJson(`http://127.0.0.1:${port}/v1/records/incident/ctrl-c/fields/title`, auth, {
          method: 'PUT',
          body: JSON.stringify({ value: `v${expected + 1}`, expected_version: expected }),
        });
      expect((await title(0)).status).toBe(201);
      const lock = await lockRecords(devDb, ['ctrl-c'], 'incident');
      let inFlight: Promise<{ status: number }>;
      try {
        inFlight = title(1);
        await waitForLockWaiters(devDb, 1);
        process.kill(-s.child.pid!, 'SIGINT');
        await new Promise((r) => setTimeout(r, 500));
      } finally {
        await lock.release();
      }
      expect((await inFlight).status).toBe(200);
      const exit = await within(s.exited, 30_000, 'dev stopping');
      expect(exit, s.stdout() + s.stderr()).toEqual({ code: 0, signal: null });
      const out = s.stdout() + s.stderr();
      expect(out).not.toMatch(/database connection lost/);
      expect(logLines(s.stdout()).filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
      const msgs = logLines(s.stdout()).map((l) => l.msg);
      const pgStopped = msgs.indexOf('embedded PostgreSQL stopped');
      expect(msgs.indexOf('database pool closed')).toBeGreaterThanOrEqual(0);
      expect(pgStopped).toBeGreaterThan(msgs.indexOf('database pool closed'));
      expect(msgs.at(-1)).toBe('stopped');
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
