/**
 * The read-your-writes token (issue 34, docs/ha.md "Reads from standbys") on every transport
 * of one gateway without standbys: each write's answer carries the WAL position at or after
 * its commit (HTTP X-Kslate-Lsn, MCP _meta["kslate.dev/lsn"], gRPC trailing metadata
 * x-kslate-lsn); a read's token (X-Kslate-Min-Lsn, MCP min_lsn, gRPC x-kslate-min-lsn) must
 * be an LSN, else 400 MALFORMED saying what to send. What standbys do with it: test/ha/replicas.test.ts.
 */
import * as grpc from '@grpc/grpc-js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { formatLsn, minLsnProblem, parseLsn } from '../../db/lsn.js';
import { incident } from '../fixtures/classes.js';
import { freshDatabase } from '../setup/db.js';
import { KEYS, quietLog, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { proto } from '../transports/clients.js';

describe('LSN text', () => {
  it('parses and formats as PostgreSQL writes it, and orders as a 64-bit position', () => {
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) | 0xb374d848n);
    expect(parseLsn('0/0')).toBe(0n);
    expect(formatLsn(parseLsn('ffffffff/ffffffff')!)).toBe('FFFFFFFF/FFFFFFFF');
    expect(formatLsn(parseLsn('00000001/0000000a')!)).toBe('1/A');
    expect(parseLsn('1/0')! > parseLsn('0/FFFFFFFF')!).toBe(true);
    for (const bad of ['', '16', '16/', '/1', '1/2/3', '123456789/0', '0/123456789', 'g/1', ' 1/1x', '-1/1', '1 /1']) {
      expect(parseLsn(bad), bad).toBeNull();
      expect(minLsnProblem(bad), bad).toMatch(/X-Kslate-Min-Lsn .*must be a WAL position/);
    }
    expect(minLsnProblem(' 1/A ')).toBeNull();
    expect(minLsnProblem('x'.repeat(500))!.length).toBeLessThan(400);
  });
});

describe('on a gateway', () => {
  let t: TestGateway;
  let pool: pg.Pool;
  beforeAll(async () => {
    t = await startTestGateway([incident], { extraArgs: ['--grpc-port', String(await freePort()), '--write-lsn', 'on'] });
    pool = new pg.Pool({ connectionString: t.db.url, max: 1 });
  });
  afterAll(async () => {
    await pool?.end();
    await t?.close();
  });

  const walInsert = async () => parseLsn((await pool.query<{ l: string }>('select pg_current_wal_insert_lsn()::text as l')).rows[0].l)!;

  it('HTTP: a write answers X-Kslate-Lsn at or after its commit; a bad X-Kslate-Min-Lsn is 400 MALFORMED', async () => {
    const before = await walInsert();
    const res = await fetch(`${t.url}/v1/records/incident/lsn1/fields/title`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ value: 'a', expected_version: 0 }),
    });
    expect(res.status).toBe(201);
    const lsn = res.headers.get('x-kslate-lsn');
    expect(lsn).toMatch(/^[0-9A-F]{1,8}\/[0-9A-F]{1,8}$/);
    // After the position before the write, at most where the WAL is now.
    expect(parseLsn(lsn!)! > before).toBe(true);
    expect(parseLsn(lsn!)! <= (await walInsert())).toBe(true);
    // The commit is at or before the token: a session that reads from the token sees the write.
    const committed = await pool.query<{ ok: boolean }>(
      `select pg_current_wal_insert_lsn() >= $1::pg_lsn as ok`,
      [lsn],
    );
    expect(committed.rows[0].ok).toBe(true);

    // Appends carry it too, further on; a STALE answer (its history row written) as well.
    const append = await fetch(`${t.url}/v1/records/incident/lsn1/fields/notes/entries`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ entry: { n: 1 }, evidence: 'test' }),
    });
    expect(append.status).toBeLessThan(300);
    expect(parseLsn(append.headers.get('x-kslate-lsn') ?? '')! > parseLsn(lsn!)!).toBe(true);
    const stale = await fetch(`${t.url}/v1/records/incident/lsn1/fields/title`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ value: 'b', expected_version: 0 }),
    });
    expect(stale.status).toBe(409);
    expect(stale.headers.get('x-kslate-lsn')).toMatch(/\//);

    // A read with the token is served; a read never carries X-Kslate-Lsn.
    const get = await fetch(`${t.url}/v1/records/incident/lsn1`, { headers: { authorization: `Bearer ${KEYS.alice}`, 'x-kslate-min-lsn': lsn! } });
    expect(get.status).toBe(200);
    expect(get.headers.get('x-kslate-lsn')).toBeNull();
    expect(((await get.json()) as any).fields.title.value).toBe('a');

    for (const bad of ['nonsense', '', '1/2/3', '123456789/0']) {
      const r = await t.call('alice', 'GET', '/v1/records/incident/lsn1', undefined, { 'x-kslate-min-lsn': bad });
      expect(r.status, bad).toBe(400);
      expect(r.body.error).toBe('MALFORMED');
      expect(r.body.message).toMatch(/X-Kslate-Min-Lsn .*must be a WAL position as a write's X-Kslate-Lsn gives it/);
    }
    // The credential is checked first: an anonymous caller learns nothing from the header.
    expect((await t.call(null, 'GET', '/v1/records/incident/lsn1', undefined, { 'x-kslate-min-lsn': 'bad' })).status).toBe(401);
  });

  it('MCP: a write tool result carries _meta["kslate.dev/lsn"]; read tools take min_lsn and refuse a bad one', async () => {
    const client = new Client({ name: 'lsn-test', version: '0.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${KEYS.alice}` } } }));
    try {
      const tools = await client.listTools();
      const get = tools.tools.find((x) => x.name === 'svc_get')!;
      expect(Object.keys(get.inputSchema.properties ?? {})).toContain('min_lsn');
      expect(get.inputSchema.required).not.toContain('min_lsn');
      expect(Object.keys(tools.tools.find((x) => x.name === 'svc_put')!.inputSchema.properties ?? {})).not.toContain('min_lsn');

      const put: any = await client.callTool({ name: 'svc_put', arguments: { record: 'incident/lsn2', field: 'title', value: 'm', expected_version: 0 } });
      expect(put.isError).toBeFalsy();
      const lsn = put._meta?.['kslate.dev/lsn'];
      expect(lsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
      expect(put.structuredContent).not.toHaveProperty('lsn');

      const read: any = await client.callTool({ name: 'svc_get', arguments: { record: 'incident/lsn2', min_lsn: lsn } });
      expect(read.isError).toBeFalsy();
      expect(read.structuredContent.fields.title.value).toBe('m');
      expect(read._meta?.['kslate.dev/lsn']).toBeUndefined();

      for (const bad of ['zz', 42]) {
        const r: any = await client.callTool({ name: 'svc_get', arguments: { record: 'incident/lsn2', min_lsn: bad } });
        expect(r.isError).toBe(true);
        expect(r.structuredContent.error).toBe('MALFORMED');
        expect(r.structuredContent.message).toMatch(/min_lsn/i);
      }
    } finally {
      await client.close();
    }
  });

  it('gRPC: a write answers x-kslate-lsn in its trailing metadata; a bad x-kslate-min-lsn is INVALID_ARGUMENT', async () => {
    const client = new proto.svc.v1.SvcService(`127.0.0.1:${t.gw.grpcPort}`, grpc.credentials.createInsecure());
    const md = (extra: Record<string, string> = {}) => {
      const m = new grpc.Metadata();
      m.set('authorization', `Bearer ${KEYS.alice}`);
      for (const [k, v] of Object.entries(extra)) m.set(k, v);
      return m;
    };
    try {
      const trailer = await new Promise<grpc.Metadata>((resolve, reject) => {
        const call = client.Put(
          { record: 'incident/lsn3', field: 'title', value: { stringValue: 'g' }, expectedVersion: 0 } as never,
          md(),
          (e) => (e ? reject(e) : undefined),
        );
        call.on('status', (st) => resolve(st.metadata));
      });
      const lsn = String(trailer.get('x-kslate-lsn')[0] ?? '');
      expect(lsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);

      const ok = await new Promise<unknown>((resolve, reject) =>
        client.Get({ record: 'incident/lsn3' } as never, md({ 'x-kslate-min-lsn': lsn }), (e, r) => (e ? reject(e) : resolve(r))),
      );
      expect(ok).toBeTruthy();
      const err = await new Promise<grpc.ServiceError>((resolve) =>
        client.Get({ record: 'incident/lsn3' } as never, md({ 'x-kslate-min-lsn': 'nope' }), (e) => resolve(e!)),
      );
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toMatch(/X-Kslate-Min-Lsn/);
    } finally {
      client.close();
    }
  });
});

describe('--write-lsn', () => {
  it('auto (the default) without standbys: writes answer without X-Kslate-Lsn and take no extra round trip', async () => {
    const t = await startTestGateway([incident]);
    try {
      const res = await fetch(`${t.url}/v1/records/incident/nolsn-auto/fields/scratch`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' },
        body: JSON.stringify({ value: 1 }),
      });
      expect(res.status).toBe(201);
      expect(res.headers.get('x-kslate-lsn')).toBeNull();
    } finally {
      await t.close();
    }
  });
});

describe('on a server that refuses pg_current_wal_insert_lsn() (some managed services)', () => {
  it('writes still succeed, without X-Kslate-Lsn, on connections that stay in use; the gateway says why once', async () => {
    const db = await freshDatabase();
    const warnings: string[] = [];
    const log = { ...quietLog, warn: (m: string) => void warnings.push(m) };
    const t = await startTestGateway([incident], { db, log, extraArgs: ['--write-lsn', 'on'] });
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      // A function of the same name found before pg_catalog's, refusing as such a server does.
      await admin.query(`create function public.pg_current_wal_insert_lsn() returns pg_lsn language plpgsql as
        $$ begin raise exception 'Function pg_current_wal_insert_lsn() is not supported' using errcode = 'feature_not_supported'; end $$`);
      await admin.query(`alter database ${db.name} set search_path = public, pg_catalog`);
      await admin.query(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, [db.name]);
      const pids = new Set<number>();
      for (let i = 0; i < 5; i++) {
        // The first request after the terminations may meet a dead pooled connection (503): retry it.
        let res: Response;
        for (;;) {
          res = await fetch(`${t.url}/v1/records/incident/nolsn/fields/scratch`, {
            method: 'PUT',
            headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' },
            body: JSON.stringify({ value: i }),
          });
          if (res.status !== 503) break;
        }
        expect(res.status).toBeLessThan(300);
        expect(res.headers.get('x-kslate-lsn')).toBeNull();
        const { rows } = await admin.query<{ pid: number }>(`select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid() and application_name like 'kslate %'`, [db.name]);
        for (const r of rows) pids.add(r.pid);
      }
      // The refusal did not cost the connection: no new session per write.
      expect(pids.size).toBeLessThanOrEqual(2);
      expect(warnings.filter((w) => /pg_current_wal_insert_lsn/.test(w))).toHaveLength(1);
    } finally {
      await admin.end();
      await t.close();
      await db.drop();
    }
  });
});

describe('a session (db/kysely PgDb.session)', () => {
  it('remembers the highest WAL position of its writes; rememberCurrentLsn (an idempotent replay) gives one at or after every earlier commit', async () => {
    const db = await freshDatabase({ migrated: true });
    const pool = createPool({ connectionString: db.url, max: 2 });
    const pg0 = new PgDb(pool);
    try {
      const a = pg0.session(null);
      expect(a.lsn).toBeNull();
      const b = pg0.session(null);
      await b.claimScope('s', 'apikey:x', 60); // a write that is not one of the answer's
      expect(b.lsn).toBeNull();
      await b.saveCheckpoint('none', 'none', 'r', {}, 'apikey:x'); // no record: saves nothing, still a position
      const first = parseLsn(b.lsn!)!;
      const c = pg0.session(null);
      await c.rememberCurrentLsn();
      expect(parseLsn(c.lsn!)! >= first).toBe(true);
      // Sessions are separate; the base database has none.
      expect(a.lsn).toBeNull();
      expect((pg0 as unknown as { lsn: string | null }).lsn).toBeNull();
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
