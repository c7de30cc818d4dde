/**
 * Idempotency keys and dry runs (issue 33, items 1, 3 and 4) on a real PostgreSQL, over the
 * three transports: HTTP (fetch), MCP (the SDK's Client) and gRPC (a grpc-js client).
 *
 * The lost acknowledgement is made real with a TCP proxy between the gateway and PostgreSQL
 * that, once armed, cuts the connection right after the server answered COMMIT (the write and
 * its key are committed; the gateway answers 503 outcome unknown), or right before COMMIT
 * reaches the server (nothing is committed: a 5xx is never stored).
 */
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { sweep } from '../../worker/sweep.js';
import { PARITY_ALL } from '../fixtures/parity-classes.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { quietLog, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { grpcErrorBody, grpcRequest, httpRequest, mcpToolCall, tokenOf, TRANSPORTS, type Args, type AnyOp as Op, type Transport } from './clients.js';

// ---- a proxy that loses the answer to COMMIT --------------------------------------------------

/** CommandComplete "COMMIT" as the server sends it: 'C', length 11, the tag and its NUL. */
const COMMIT_DONE = Buffer.from([0x43, 0, 0, 0, 11, ...Buffer.from('COMMIT\0')]);
/** The simple query "commit" as node-postgres sends it (PgDb.transaction). */
const COMMIT_SENT = Buffer.from('commit\0');

type Mode = 'off' | 'lose-answer' | 'lose-request';

function startProxy(target: { host: string; port: number }) {
  let mode: Mode = 'off';
  let fired: () => void = () => {};
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    const cut = () => {
      mode = 'off';
      client.destroy();
      upstream.destroy();
      fired();
    };
    client.on('data', (d: Buffer) => {
      if (mode === 'lose-request' && d.includes(COMMIT_SENT)) return cut();
      upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (mode === 'lose-answer' && d.includes(COMMIT_DONE)) return cut();
      client.write(d);
    });
    for (const s of [client, upstream]) {
      s.on('error', () => undefined);
      s.on('close', () => {
        client.destroy();
        upstream.destroy();
        sockets.delete(s);
      });
    }
  });
  return {
    listen: () => new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as net.AddressInfo).port))),
    /** Arm once; resolves when the connection was cut. */
    arm(m: Mode): Promise<void> {
      mode = m;
      return new Promise((r) => (fired = r));
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

// ---- the gateway, behind the proxy ------------------------------------------------------------

let db: TestDb;
let t: TestGateway;
let sql: pg.Client;
let proxy: ReturnType<typeof startProxy>;
let grpcClient: grpc.Client;
const mcpClients = new Map<string, Promise<Client>>();

beforeAll(async () => {
  db = await freshDatabase();
  const u = new URL(db.url);
  proxy = startProxy({ host: u.hostname, port: Number(u.port || 5432) });
  const port = await proxy.listen();
  const viaProxy = new URL(db.url);
  viaProxy.host = `127.0.0.1:${port}`;
  t = await startTestGateway(PARITY_ALL, {
    db: { ...db, url: viaProxy.toString() },
    extraArgs: ['--grpc-port', String(await freePort())],
  });
  sql = new pg.Client({ connectionString: db.url });
  await sql.connect();
  const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));
  const def = protoLoader.loadSync(['svc/v1/svc.proto', 'google/rpc/status.proto'], {
    includeDirs: [PROTO_DIR],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const Svc = (grpc.loadPackageDefinition(def) as any).svc.v1.SvcService;
  grpcClient = new Svc(`127.0.0.1:${t.gw.grpcPort}`, grpc.credentials.createInsecure());
});
afterAll(async () => {
  for (const c of mcpClients.values()) await (await c).close();
  grpcClient?.close();
  await sql?.end();
  await t?.close();
  await proxy?.close();
  await db?.drop();
});

// ---- one write over any transport -------------------------------------------------------------

interface Sent {
  /** OK or the error code. */
  code: string;
  body: any;
  replayed: boolean;
  /** HTTP only: the raw body text and headers. */
  text?: string;
  retryAfter?: string | null;
}

async function mcpClient(who: string): Promise<Client> {
  let c = mcpClients.get(who);
  if (!c) {
    c = (async () => {
      const client = new Client({ name: 'idem-test', version: '0.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${tokenOf(who)}` } } }),
      );
      return client;
    })();
    mcpClients.set(who, c);
  }
  return c;
}

async function send(tr: Transport, who: string, op: Op, args: Args, o: { key?: string; dry?: boolean } = {}): Promise<Sent> {
  if (tr === 'http') {
    const r = httpRequest(op, args);
    const headers: Record<string, string> = { authorization: `Bearer ${tokenOf(who)}`, 'content-type': 'application/json' };
    if (o.key !== undefined) headers['idempotency-key'] = o.key;
    const res = await fetch(`${t.url}${r.path}${o.dry ? '?dry_run=true' : ''}`, { method: r.method, headers, body: JSON.stringify(r.body) });
    const text = await res.text();
    const body = JSON.parse(text);
    return {
      code: res.status < 300 ? 'OK' : body.error,
      body,
      text,
      replayed: res.headers.get('idempotent-replayed') === 'true',
      retryAfter: res.headers.get('retry-after'),
    };
  }
  if (tr === 'mcp') {
    const call = mcpToolCall(op, args);
    const a: Args = { ...call.arguments };
    if (o.key !== undefined) a.idempotency_key = o.key;
    if (o.dry) a.dry_run = true;
    const r = await (await mcpClient(who)).callTool({ name: call.name, arguments: a });
    const body = r.structuredContent as any;
    return { code: r.isError ? body.error : 'OK', body, replayed: (r._meta as any)?.['kslate/idempotent-replayed'] === true };
  }
  const { method, req } = grpcRequest(op, args);
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${tokenOf(who)}`);
  if (o.key !== undefined) md.set('idempotency-key', o.key);
  const msg = o.dry ? { ...req, dry_run: true } : req;
  return new Promise((resolve) => {
    let replayed = false;
    const call = (grpcClient as any)[method](msg, md, (err: grpc.ServiceError | null, res: any) => {
      if (err) {
        const body = grpcErrorBody(err);
        resolve({ code: String(body.error), body, replayed: err.metadata.get('idempotent-replayed')[0] === 'true' });
      } else resolve({ code: 'OK', body: res, replayed });
    });
    call.on('metadata', (m: grpc.Metadata) => (replayed = m.get('idempotent-replayed')[0] === 'true'));
  });
}

/** History rows of a record by outcome, and its record version. */
async function state(rid: string): Promise<{ rows: string[]; version: number | null }> {
  const h = await sql.query(`select op || ':' || outcome as o from history where class = 'pcase' and rid = $1 order by id`, [rid]);
  const r = await sql.query(`select record_version from records where class = 'pcase' and rid = $1`, [rid]);
  return { rows: h.rows.map((x) => x.o), version: r.rows[0]?.record_version === undefined ? null : Number(r.rows[0].record_version) };
}

let seq = 0;
const fresh = (tr: Transport, what: string) => `${what}-${tr}-${++seq}`.toLowerCase();
const key = () => `key-${++seq}-${Math.random().toString(36).slice(2)}`;

/** Each write kind: its operation, and the arguments that apply it on record `rid`. */
const WRITES: { op: Op; args(rid: string): Args; setup?(rid: string): Promise<void> }[] = [
  { op: 'put', args: (rid) => ({ record: `pcase/${rid}`, field: 'title', value: 'hello', expected_version: 0 }) },
  { op: 'append', args: (rid) => ({ record: `pcase/${rid}`, field: 'notes', entry: { n: 1 }, evidence: 'seen' }) },
  { op: 'claim', args: (rid) => ({ record: `pcase/${rid}`, field: 'job', lease_seconds: 60 }) },
  {
    op: 'checkpointSave',
    args: (rid) => ({ record: `pcase/${rid}`, document: { summary: 's', next_steps: 'n' } }),
    // A checkpoint needs the record.
    setup: async (rid) => {
      const r = await send('http', 'alice', 'put', { record: `pcase/${rid}`, field: 'severity', value: 1, expected_version: 0 });
      expect(r.code).toBe('OK');
    },
  },
  {
    op: 'transaction',
    args: (rid) => ({
      record: `pcase/${rid}`,
      evidence: 'seen',
      writes: [
        { op: 'put', field: 'title', value: 'hello', expected_version: 0 },
        { op: 'append', field: 'notes', entry: { n: 1 } },
        { op: 'claim', field: 'job', lease_seconds: 60 },
      ],
    }),
  },
];

// ---- the tests --------------------------------------------------------------------------------

describe.each(TRANSPORTS)('over %s', (tr) => {
  test.each(WRITES.map((w) => [w.op, w] as const))('a retried %s after its acknowledgement was lost writes nothing new', async (_op, w) => {
    const rid = fresh(tr, `lost-${w.op}`);
    await w.setup?.(rid);
    const k = key();
    const cut = proxy.arm('lose-answer');
    const first = await send(tr, 'alice', w.op, w.args(rid), { key: k });
    await cut;
    expect(first.code).toBe('UNAVAILABLE');
    expect(first.body.outcome).toBe('unknown');
    expect(first.body.message).toContain('same Idempotency-Key');
    const after = await state(rid);
    const retry = await send(tr, 'alice', w.op, w.args(rid), { key: k });
    expect(retry.code).toBe('OK');
    expect(retry.replayed).toBe(true);
    expect(await state(rid)).toEqual(after);
    // And again: the same answer, byte for byte on HTTP.
    const again = await send(tr, 'alice', w.op, w.args(rid), { key: k });
    expect(again.body).toEqual(retry.body);
    if (tr === 'http') expect(again.text).toBe(retry.text);
    expect(await state(rid)).toEqual(after);
  });

  test('a 5xx is not stored: the write rolled back runs again on retry', async () => {
    const rid = fresh(tr, 'rollback');
    const k = key();
    const cut = proxy.arm('lose-request');
    const first = await send(tr, 'alice', 'append', WRITES[1].args(rid), { key: k });
    await cut;
    expect(first.code).toBe('UNAVAILABLE');
    expect(await state(rid)).toEqual({ rows: [], version: null });
    const retry = await send(tr, 'alice', 'append', WRITES[1].args(rid), { key: k });
    expect(retry.code).toBe('OK');
    expect(retry.replayed).toBe(false);
    expect((await state(rid)).rows).toEqual(['append:applied']);
  });

  test('a rejection is an answer: a retried STALE replays it, and the same key with another body is IDEMPOTENCY_KEY_REUSED', async () => {
    const rid = fresh(tr, 'stale');
    expect((await send(tr, 'alice', 'put', { record: `pcase/${rid}`, field: 'title', value: 'a', expected_version: 0 })).code).toBe('OK');
    const k = key();
    const stale = await send(tr, 'carol', 'put', { record: `pcase/${rid}`, field: 'title', value: 'b', expected_version: 0 }, { key: k });
    expect(stale.code).toBe('STALE');
    expect(stale.replayed).toBe(false);
    const before = await state(rid);
    const again = await send(tr, 'carol', 'put', { record: `pcase/${rid}`, field: 'title', value: 'b', expected_version: 0 }, { key: k });
    expect(again.code).toBe('STALE');
    expect(again.replayed).toBe(true);
    expect(again.body).toEqual(stale.body);
    expect(await state(rid)).toEqual(before);
    const other = await send(tr, 'carol', 'put', { record: `pcase/${rid}`, field: 'title', value: 'c', expected_version: 1 }, { key: k });
    expect(other.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(await state(rid)).toEqual(before);
  });

  test('keys of two identities never collide', async () => {
    const k = key();
    const a = await send(tr, 'alice', 'put', { record: `pcase/${fresh(tr, 'ida')}`, field: 'title', value: 'a', expected_version: 0 }, { key: k });
    const c = await send(tr, 'carol', 'put', { record: `pcase/${fresh(tr, 'idc')}`, field: 'title', value: 'c', expected_version: 0 }, { key: k });
    expect([a.code, a.replayed, c.code, c.replayed]).toEqual(['OK', false, 'OK', false]);
    const rows = await sql.query(`select author from idempotency_keys where key = $1 order by author`, [k]);
    expect(rows.rows.map((r) => r.author)).toEqual(['apikey:alice', 'apikey:carol']);
  });

  test('a malformed key is MALFORMED and writes nothing', async () => {
    const rid = fresh(tr, 'badkey');
    // gRPC metadata cannot even carry a non-ASCII text value.
    for (const k of tr === 'grpc' ? ['x'.repeat(256)] : ['x'.repeat(256), 'caf\u00e9']) {
      const r = await send(tr, 'alice', 'put', { record: `pcase/${rid}`, field: 'title', value: 'a', expected_version: 0 }, { key: k });
      expect(r.code).toBe('MALFORMED');
    }
    expect(await state(rid)).toEqual({ rows: [], version: null });
  });
});

test('32 concurrent repeats of one key apply once; the others are IN_USE (Retry-After) or the replay', async () => {
  const rid = fresh('http', 'race');
  const k = key();
  const args = { record: `pcase/${rid}`, field: 'notes', entry: { n: 1 }, evidence: 'seen' };
  const all = await Promise.all(Array.from({ length: 32 }, () => send('http', 'alice', 'append', args, { key: k })));
  const ok = all.filter((r) => r.code === 'OK');
  const busy = all.filter((r) => r.code === 'IDEMPOTENCY_KEY_IN_USE');
  expect(ok.length + busy.length).toBe(32);
  expect(ok.filter((r) => !r.replayed)).toHaveLength(1);
  for (const r of ok) expect(r.text).toBe(ok[0].text);
  for (const r of busy) expect(r.retryAfter).toBe('1');
  expect((await state(rid)).rows).toEqual(['append:applied']);
  const late = await send('http', 'alice', 'append', args, { key: k });
  expect([late.code, late.replayed, late.text]).toEqual(['OK', true, ok[0].text]);
  // 32 requests at once on a shared 2-core machine.
}, 60_000);

test('a repeat while the first still runs is 409 IDEMPOTENCY_KEY_IN_USE with Retry-After', async () => {
  const rid = fresh('http', 'inuse');
  expect((await send('http', 'alice', 'put', { record: `pcase/${rid}`, field: 'title', value: 'a', expected_version: 0 })).code).toBe('OK');
  const locker = new pg.Client({ connectionString: db.url });
  await locker.connect();
  try {
    // Hold the record's row lock so the first keyed write waits under its key.
    await locker.query('begin');
    await locker.query(`select 1 from records where class = 'pcase' and rid = $1 for update`, [rid]);
    const k = key();
    const args = { record: `pcase/${rid}`, field: 'title', value: 'b', expected_version: 1 };
    const first = send('http', 'alice', 'put', args, { key: k });
    // Wait until the first holds the key and waits for the record's lock. On Citus the locks
    // are taken on the nodes the write's statements reach (the key's advisory lock and the
    // record's row wait may be on different nodes, in different backends): there, any granted
    // advisory lock and any row wait in this test's database, on any node.
    const citus = (await sql.query(`select 1 from pg_extension where extname = 'citus'`)).rowCount! > 0;
    const onThisDb = `pid in (select pid from pg_stat_activity where datname = current_database())`;
    const onAllNodes = async (q: string) => {
      const here = Number((await sql.query(`select (${q}) as n`)).rows[0].n);
      if (!citus) return here;
      return here + Number((await sql.query(`select coalesce(sum(result::int), 0)::int as n from run_command_on_workers($q$${q}$q$)`)).rows[0].n);
    };
    for (;;) {
      const waiting = citus
        ? (await onAllNodes(`select count(*) from pg_locks where locktype = 'advisory' and granted and ${onThisDb}`)) > 0 &&
          (await onAllNodes(`select count(*) from pg_locks where locktype in ('tuple', 'transactionid') and not granted and ${onThisDb}`)) > 0
        : (await onAllNodes(`select count(*) from pg_locks where locktype = 'advisory' and granted
            and pid in (select pid from pg_locks where locktype in ('tuple', 'transactionid') and not granted)`)) > 0;
      if (waiting) break;
      await new Promise((r) => setImmediate(r));
    }
    const second = await send('http', 'alice', 'put', args, { key: k });
    expect(second.code).toBe('IDEMPOTENCY_KEY_IN_USE');
    expect(second.retryAfter).toBe('1');
    expect(second.body.retry_after).toBe(1);
    await locker.query('commit');
    const r1 = await first;
    expect(r1.code).toBe('OK');
    const third = await send('http', 'alice', 'put', args, { key: k });
    expect([third.code, third.replayed, third.text]).toEqual(['OK', true, r1.text]);
  } finally {
    await locker.end();
  }
});

test('the sweep purges expired keys in batches; an expired key no longer replays', async () => {
  const rid = fresh('http', 'sweep');
  const k = key();
  const args = { record: `pcase/${rid}`, field: 'notes', entry: { n: 1 }, evidence: 'seen' };
  expect((await send('http', 'alice', 'append', args, { key: k })).code).toBe('OK');
  await sql.query(`update idempotency_keys set expires_at = now() - interval '1 second' where key = $1`, [k]);
  const live = Number((await sql.query(`select count(*) from idempotency_keys where expires_at > now()`)).rows[0].count);
  const pool = createPool({ connectionString: db.url, max: 2 });
  try {
    const report = await sweep({ db: new PgDb(pool), log: quietLog, holder: 'idem-test' }, { steps: ['idempotency keys', 'gauges'] });
    expect(report.idempotencyKeys?.purged).toBeGreaterThanOrEqual(1);
    expect(report.gauges?.idempotencyKeys).toBe(live);
  } finally {
    await pool.end();
  }
  expect((await sql.query(`select count(*)::int as n from idempotency_keys where key = $1`, [k])).rows[0].n).toBe(0);
  // Past its TTL the key is new again: the append runs once more.
  const again = await send('http', 'alice', 'append', args, { key: k });
  expect([again.code, again.replayed]).toEqual(['OK', false]);
  expect((await state(rid)).rows).toEqual(['append:applied', 'append:applied']);
});

// ---- dry runs --------------------------------------------------------------------------------

/** A digest of every row of every table of the schema. */
async function digestAll(): Promise<Record<string, string>> {
  const tables = await sql.query(`select tablename from pg_tables where schemaname = current_schema() order by 1`);
  const out: Record<string, string> = {};
  for (const { tablename } of tables.rows) {
    const r = await sql.query(`select md5(coalesce(string_agg(t::text, '|' order by t::text), '')) as d from ${pg.escapeIdentifier(tablename)} t`);
    out[tablename] = r.rows[0].d;
  }
  return out;
}

describe.each(TRANSPORTS)('dry runs over %s', (tr) => {
  test('every write and rejection answers with dry_run and changes no row of any table', async () => {
    const rid = fresh(tr, 'dry');
    await WRITES[3].setup!(rid);
    await send('http', 'alice', 'claim', { record: `pcase/${rid}`, field: 'chore', lease_seconds: 60 });
    const before = await digestAll();
    const k = key();
    const cases: [string, Op, Args, string][] = [
      ['alice', 'put', { record: `pcase/${rid}`, field: 'severity', value: 2, expected_version: 1 }, 'OK'],
      ['alice', 'put', { record: `pcase/${fresh(tr, 'drynew')}`, field: 'title', value: 'x', expected_version: 0 }, 'OK'],
      ['alice', 'put', { record: `pcase/${rid}`, field: 'severity', value: 2, expected_version: 0 }, 'STALE'],
      ['alice', 'append', WRITES[1].args(rid), 'OK'],
      ['alice', 'claim', WRITES[2].args(rid), 'OK'],
      ['carol', 'claim', { record: `pcase/${rid}`, field: 'chore', lease_seconds: 60 }, 'HELD'],
      ['alice', 'checkpointSave', WRITES[3].args(rid), 'OK'],
      ['bob', 'put', { record: `pcase/${rid}`, field: 'title', value: 'x', expected_version: 0 }, 'SCOPE_DENIED'],
    ];
    for (const [who, op, args, code] of cases) {
      const r = await send(tr, who, op, args, { dry: true, key: k + op + who });
      expect([op, r.code]).toEqual([op, code]);
      expect(r.body.dry_run).toBe(true);
      expect(r.replayed).toBe(false);
    }
    expect(await digestAll()).toEqual(before);
    // What the dry run promised is what the write then does.
    const dry = await send(tr, 'alice', 'put', cases[0][2], { dry: true });
    const real = await send(tr, 'alice', 'put', cases[0][2]);
    expect({ ...dry.body, dry_run: undefined }).toEqual({ ...real.body, dry_run: undefined });
  });
});

test('a transaction takes an Idempotency-Key and dry_run like every write (HTTP)', async () => {
  const rid = fresh('http', 'txn');
  const url = `${t.url}/v1/records/pcase/${rid}/transactions`;
  const body = JSON.stringify({ writes: [{ op: 'put', field: 'title', value: 't', expected_version: 0 }, { op: 'put', field: 'severity', value: 2, expected_version: 0 }] });
  const h = { authorization: `Bearer ${tokenOf('alice')}`, 'content-type': 'application/json' };
  const before = await digestAll();
  const dry = await fetch(`${url}?dry_run=true`, { method: 'POST', headers: h, body });
  expect(dry.status).toBeLessThan(300);
  expect((await dry.json()).dry_run).toBe(true);
  expect(await digestAll()).toEqual(before);
  const k = key();
  const first = await fetch(url, { method: 'POST', headers: { ...h, 'idempotency-key': k }, body });
  const firstText = await first.text();
  expect(first.status).toBeLessThan(300);
  const after = await state(rid);
  const again = await fetch(url, { method: 'POST', headers: { ...h, 'idempotency-key': k }, body });
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(await again.text()).toBe(firstText);
  expect(await state(rid)).toEqual(after);
});
