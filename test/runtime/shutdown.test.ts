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
import { outputMatches, settled } from '../setup/wait.js';
import { freePort } from '../setup/ports.js';
import { connect as http2Connect } from 'node:http2';
import { pb } from '../setup/protobuf.js';
import { describeFigures, grpcAttempt, httpAttempt, sigtermUnderLoad, type Attempt } from '../setup/sigterm-load.js';

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
    await settled(
      async () =>
        (await c.query<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
        )).rows[0].n,
      (waiting) => waiting >= n,
    );
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
      // Once the gateway has begun to stop (its first log line of the stop), a probe is answered
      // at once, without asking the database (whose pool the held requests fill).
      await outputMatches(gw.served, /shutting down/);
      const probeAt = Date.now();
      const ready = await getJson(`${gw.metrics}/readyz`);
      const readyAfterMs = Date.now() - t0;
      expect(Date.now() - probeAt).toBeLessThan(1_000);
      expect(ready.status).toBe(503);
      expect(ready.body).toMatchObject({ error: 'UNAVAILABLE' });
      expect(ready.body.message).toMatch(/shutting down/);
      expect((await getJson(`${gw.metrics}/healthz`)).status).toBe(200);
      // No new connections on the API port (refused), and a connection silent for the grace
      // (runtime/drain.ts DRAIN_GRACE_MS, 1 s) is closed.
      await expect(fetch(`${gw.base}/healthz`)).rejects.toThrow(expect.objectContaining({ cause: expect.objectContaining({ code: 'ECONNREFUSED' }) }));
      await within(idleClosed, 10_000, 'closing the idle keep-alive connection');

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

  it('a request half-sent at the signal is answered once complete, even with nothing else in flight; a silent connection is closed, not reset', async () => {
    const gw = await serve(['--drain-timeout', '20s']);
    const port = Number(new URL(gw.base).port);
    const open = (first: string) => {
      const socket = connect(port, '127.0.0.1');
      let text = '';
      let error: string | undefined;
      socket.on('data', (d) => (text += String(d)));
      socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code));
      const closed = new Promise<{ text: string; error?: string }>((r) => socket.once('close', () => r({ text, ...(error ? { error } : {}) })));
      const written = new Promise<void>((r) => socket.once('connect', () => (first ? socket.write(first, () => r()) : r())));
      return { socket, closed, written };
    };
    // Both connected before the signal; the half-sent one has sent the first lines of its head.
    const half = open(`PUT /v1/records/${CLASS}/half/fields/title HTTP/1.1\r\nHost: kslate\r\nAuthorization: Bearer ${KEY}\r\n`);
    const silent = open('');
    await Promise.all([half.written, silent.written]);

    gw.served.child.kill('SIGTERM');
    await outputMatches(gw.served, /shutting down/);
    // The silent connection is closed after the grace: an end without data, not a reset.
    expect(await within(silent.closed, 10_000, 'closing the silent connection')).toEqual({ text: '' });
    expect(gw.served.child.exitCode).toBeNull(); // the half-sent request holds the stop

    const body = JSON.stringify({ value: 'late', expected_version: 0 });
    half.socket.write(`Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    const answer = await within(half.closed, 10_000, 'the answer to the half-sent request');
    expect(answer.error).toBeUndefined();
    expect(answer.text).toMatch(/^HTTP\/1\.1 201 [\s\S]*\r\nconnection: close\r\n/i);
    expect(await within(gw.served.exited, 20_000, 'the exit')).toEqual({ code: 0, signal: null });
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
      await outputMatches(gw.served, /shutting down/);
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

/**
 * Issue 31: with 32 clients each opening a fresh connection per write and SIGTERM sent under
 * load, requests already written on an accepted connection were reset. Every request sent
 * before the signal must be answered; a connection made once the port is closed is refused.
 */
describe('kslate serve on SIGTERM under load', { timeout: 120_000 }, () => {
  const CLIENTS = 32;

  /**
   * Load `gw` with `attempt`, SIGTERM it mid-load, and check what both transports must show:
   * every request sent before the signal answered `okStatus`, none reset or left unanswered,
   * new connections refused once the port closed, every answered write committed, exit 0.
   * The figures are printed for the closing note.
   */
  async function expectNothingSentLost(gw: Gw, label: string, attempt: (c: number, n: number) => Promise<Attempt>, okStatus: number) {
    const f = await sigtermUnderLoad({ clients: CLIENTS, warmup: 200, attempt, signal: () => gw.served.child.kill('SIGTERM') });
    const exit = await within(gw.served.exited, 30_000, 'the exit');
    const figures = describeFigures(`SIGTERM under load, ${label}`, f);
    console.log(figures);
    // What a failure prints: the figures (failed answers' messages included) and what the gateway warned of.
    const why = `${figures}\ngateway warnings: ${JSON.stringify(
      logLines(gw.served.stdout())
        .filter((l) => l.level === 'warn' || l.level === 'error')
        .slice(0, 20),
    )}`;
    expect(exit, why).toEqual({ code: 0, signal: null });
    expect(f.before.sent).toBeGreaterThan(0);
    expect({ reset: f.before.reset, closed: f.before.closed, error: f.before.error }, why).toEqual({ reset: 0, closed: 0, error: 0 });
    expect(f.before.answered, why).toBe(f.before.sent);
    expect(Object.keys(f.before.statuses), why).toEqual([String(okStatus)]);
    // Once the gateway stopped listening, new connections were refused by the kernel.
    expect(f.after.refused).toBeGreaterThan(0);
    expect(f.after.error).toBe(0);
    const c = new pg.Client({ connectionString: gw.db.url });
    await c.connect();
    try {
      const { rows } = await c.query<{ n: number }>(`select count(*)::int as n from records where class = $1`, [CLASS]);
      expect(rows[0].n).toBeGreaterThanOrEqual(f.attempts.filter((a) => a.status === okStatus).length);
    } finally {
      await c.end();
    }
  }

  it(`HTTP: ${CLIENTS} clients, a fresh connection per PUT: every request sent before the signal is answered`, async () => {
    const gw = await serve(['--drain-timeout', '20s']);
    const port = Number(new URL(gw.base).port);
    await expectNothingSentLost(
      gw,
      'HTTP',
      (c, n) => {
        const body = JSON.stringify({ value: `c${c} n${n}`, expected_version: 0 });
        return httpAttempt(
          port,
          `PUT /v1/records/${CLASS}/c${c}-n${n}/fields/title HTTP/1.1\r\nHost: kslate\r\nAuthorization: Bearer ${KEY}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
      },
      201,
    );
  });

  it(`gRPC: ${CLIENTS} clients, a fresh HTTP/2 connection per Put: every call sent before the signal is answered`, async () => {
    const grpcPort = await freePort();
    const gw = await serve(['--drain-timeout', '20s', '--grpc-port', String(grpcPort)]);
    // PutRequest { record = 1, field = 2, value = 3 (google.protobuf.Value { string_value = 3 }) }, expected_version 0.
    const putRequest = (c: number, n: number) =>
      Buffer.concat([pb.string(1, `${CLASS}/g${c}-n${n}`), pb.string(2, 'title'), pb.bytes(3, pb.string(3, `c${c} n${n}`))]);
    await expectNothingSentLost(
      gw,
      'gRPC',
      (c, n) => grpcAttempt(grpcPort, '/svc.v1.SvcService/Put', putRequest(c, n), { authorization: `Bearer ${KEY}` }),
      0, // grpc-status OK
    );
    expect(logLines(gw.served.stdout()).map((l) => l.msg)).toContain('gRPC stopped');
  });

  it('streams open at the signal end with their last event, not a reset: SSE watch, MCP session stream, gRPC Watch', async () => {
    const grpcPort = await freePort();
    const gw = await serve(['--drain-timeout', '20s', '--grpc-port', String(grpcPort)]);
    expect((await put(gw, 'streamed', 'v1', 0)).status).toBe(201);
    const auth = { authorization: `Bearer ${KEY}` };

    // SSE: GET .../watch; its events as text, and how the body ended.
    const sse = await fetch(`${gw.base}/v1/records/${CLASS}/streamed/watch`, { headers: { ...auth, accept: 'text/event-stream' } });
    expect(sse.status).toBe(200);
    const sseRead = readAll(sse);

    // MCP: a session (initialize, initialized), then its GET stream.
    const mcpHeaders = { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await fetch(`${gw.base}/mcp/session`, {
      method: 'POST',
      headers: mcpHeaders,
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } }),
    });
    expect(init.status).toBe(200);
    await init.text();
    const session = { ...mcpHeaders, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-06-18' };
    const initialized = await fetch(`${gw.base}/mcp/session`, { method: 'POST', headers: session, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    expect(initialized.status).toBe(202);
    const mcp = await fetch(`${gw.base}/mcp/session`, { headers: { ...session, accept: 'text/event-stream' } });
    expect(mcp.status).toBe(200);
    const mcpRead = readAll(mcp);

    // gRPC Watch (WatchRequest { record = 1 }) on its own HTTP/2 connection.
    const grpcRead = grpcStream(grpcPort, '/svc.v1.SvcService/Watch', pb.string(1, `${CLASS}/streamed`), auth);
    await grpcRead.opened;

    await sseRead.opened;
    gw.served.child.kill('SIGTERM');
    const exit = await within(gw.served.exited, 30_000, 'the exit');
    expect(exit).toEqual({ code: 0, signal: null });

    const [sseEnd, mcpEnd, grpcEnd] = await Promise.all([sseRead.done, mcpRead.done, grpcRead.done]);
    // SSE: the documented last event (docs/watch.md), then a clean end of the body.
    expect(sseEnd.error).toBeUndefined();
    const lastEvent = sseEnd.text.trim().split('\n\n').at(-1)!;
    expect(lastEvent).toMatch(/^event: end\n/m);
    expect(JSON.parse(/^data: (.*)$/m.exec(lastEvent)![1])).toMatchObject({ reason: 'shutdown' });
    // MCP: the session's stream ends cleanly (docs/mcp.md: sessions end at shutdown).
    expect(mcpEnd.error).toBeUndefined();
    // gRPC: the `end` event with reason shutdown, then status OK, no reset.
    expect(grpcEnd.error).toBeUndefined();
    expect(grpcEnd.status).toBe(0);
    expect(grpcEnd.lastMessage.toString('latin1')).toContain('shutdown');
  });
});

/** Reads a response body to its end: the text, and the error if it did not end cleanly. */
function readAll(res: Response) {
  let opened!: () => void;
  const first = new Promise<void>((r) => (opened = r));
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const done = (async () => {
    let text = '';
    try {
      for (;;) {
        const { value, done: end } = await reader.read();
        if (end) return { text };
        text += decoder.decode(value, { stream: true });
        opened();
      }
    } catch (e) {
      return { text, error: e as Error };
    }
  })();
  return { opened: first, done };
}

/** A server-streaming gRPC call over node:http2: resolves `opened` at the first message, `done` with the status. */
function grpcStream(port: number, path: string, message: Buffer, metadata: Record<string, string>) {
  let opened!: () => void;
  const first = new Promise<void>((r) => (opened = r));
  const done = new Promise<{ status?: number; lastMessage: Buffer; error?: string }>((resolve) => {
    const session = http2Connect(`http://127.0.0.1:${port}`);
    let error: string | undefined;
    let status: number | undefined;
    let lastMessage = Buffer.alloc(0);
    let pending = Buffer.alloc(0);
    session.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
    const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...metadata });
    stream.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
    stream.on('trailers', (t) => (status = Number(t['grpc-status'])));
    stream.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
        const len = pending.readUInt32BE(1);
        lastMessage = pending.subarray(5, 5 + len);
        pending = pending.subarray(5 + len);
        opened();
      }
    });
    stream.on('close', () => {
      if (stream.rstCode !== 0 && stream.rstCode !== undefined) error ??= `RST_STREAM ${stream.rstCode}`;
      session.close();
      resolve({ status, lastMessage, ...(error ? { error } : {}) });
    });
    const frame = Buffer.alloc(5 + message.length);
    frame.writeUInt32BE(message.length, 1);
    message.copy(frame, 5);
    stream.end(frame);
  });
  return { opened: first, done };
}

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
