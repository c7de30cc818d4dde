/**
 * TTL per record (issue 37, migration 0013): `ttl_seconds` on put and append sets or extends
 * the record's expiry inside the write statement, bounded by the class's maxTtl; get shows
 * `expires_at`; the sweep expires the record when it passes. On HTTP, MCP and gRPC with
 * real clients.
 */
import * as grpc from '@grpc/grpc-js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { loadSvcProto } from '../../runtime/grpc/proto.js';
import type { ProtoGrpcType } from '../../runtime/grpc/generated/svc.js';
import type { SvcServiceClient } from '../../runtime/grpc/generated/svc/v1/SvcService.js';
import type { WriteResult__Output } from '../../runtime/grpc/generated/svc/v1/WriteResult.js';
import type { Record__Output } from '../../runtime/grpc/generated/svc/v1/Record.js';
import { sweep } from '../../worker/sweep.js';
import { KEYS, quietLog, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';

const proto = grpc.loadPackageDefinition(loadSvcProto()) as unknown as ProtoGrpcType;
let t: TestGateway;
let sql: pg.Client;
let db: PgDb;
let grpcClient: SvcServiceClient;
let mcp: Client;
const roles = { crew: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } };

beforeAll(async () => {
  t = await startTestGateway(
    [
      { name: 'runs', namespace: 'team-a', spec: { maxTtl: '1h', fields: { title: { kind: 'versioned' }, log: { kind: 'append' } }, roles } },
      { name: 'daily', namespace: 'team-a', spec: { ttl: '24h', fields: { title: { kind: 'soft' } }, roles } },
    ],
    { extraArgs: ['--grpc-port', String(await freePort())] },
  );
  sql = new pg.Client({ connectionString: t.db.url });
  await sql.connect();
  db = new PgDb(createPool({ connectionString: t.db.url, max: 2, timeoutMs: 60_000 }));
  grpcClient = new proto.svc.v1.SvcService(`127.0.0.1:${t.gw.grpcPort}`, grpc.credentials.createInsecure());
  mcp = new Client({ name: 'kslate-test', version: '0.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${KEYS.alice}` } } }));
}, 120_000);
afterAll(async () => {
  await mcp?.close();
  grpcClient?.close();
  await sql?.end();
  await db?.kysely.destroy();
  await t?.close();
});

const md = () => {
  const m = new grpc.Metadata();
  m.set('authorization', `Bearer ${KEYS.alice}`);
  return m;
};
const expiresMs = async (cls: string, id: string) =>
  Number((await sql.query(`select floor(extract(epoch from expires_at) * 1000) as e from records where class = $1 and rid = $2`, [cls, id])).rows[0].e);

test('ttl_seconds sets the expiry, a longer one extends it, a shorter one never brings it forward; get shows expires_at', async () => {
  const t0 = Date.now();
  const first = await t.call('alice', 'PUT', '/v1/records/runs/r1/fields/title', { value: 'a', expected_version: 0, ttl_seconds: 600 });
  expect(first.status).toBe(201);
  const e1 = Date.parse(first.body.expires_at);
  expect(e1).toBe(await expiresMs('runs', 'r1'));
  expect(e1).toBeGreaterThanOrEqual(t0 + 590_000);
  expect(e1).toBeLessThanOrEqual(Date.now() + 600_000 + 1000);
  // Shorter: the expiry stays.
  const shorter = await t.call('alice', 'PUT', '/v1/records/runs/r1/fields/title', { value: 'b', expected_version: 1, ttl_seconds: 60 });
  expect(Date.parse(shorter.body.expires_at)).toBe(e1);
  // Longer, by an append: extended.
  const longer = await t.call('alice', 'POST', '/v1/records/runs/r1/fields/log/entries', { entry: 1, evidence: 'test', ttl_seconds: 1200 });
  expect(longer.status).toBe(200);
  expect(Date.parse(longer.body.expires_at)).toBeGreaterThan(e1);
  // A write without ttl_seconds leaves it, and says nothing of it.
  const plain = await t.call('alice', 'PUT', '/v1/records/runs/r1/fields/title', { value: 'c', expected_version: 2 });
  expect(plain.body).not.toHaveProperty('expires_at');
  const got = await t.call('alice', 'GET', '/v1/records/runs/r1');
  expect(got.body.expires_at).toBe(longer.body.expires_at);
  const gotSome = await t.call('alice', 'GET', '/v1/records/runs/r1?fields=title');
  expect(gotSome.body.expires_at).toBe(longer.body.expires_at);
  // A rejected write changes nothing.
  const stale = await t.call('alice', 'PUT', '/v1/records/runs/r1/fields/title', { value: 'x', expected_version: 0, ttl_seconds: 3000 });
  expect(stale.status).toBe(409);
  expect(await expiresMs('runs', 'r1')).toBe(Date.parse(longer.body.expires_at));
});

test('the class ttl stays the default: get shows last write + ttl; a record without either shows none', async () => {
  await t.call('alice', 'PUT', '/v1/records/daily/d1/fields/title', { value: 'a' });
  const got = await t.call('alice', 'GET', '/v1/records/daily/d1');
  const last = Number((await sql.query(`select floor(extract(epoch from last_write_at) * 1000) as e from records where rid = 'd1'`)).rows[0].e);
  expect(Date.parse(got.body.expires_at)).toBe(last + 24 * 3_600_000);
  await t.call('alice', 'PUT', '/v1/records/runs/none/fields/title', { value: 'a', expected_version: 0 });
  expect((await t.call('alice', 'GET', '/v1/records/runs/none')).body).not.toHaveProperty('expires_at');
});

test('ttl_seconds is bounded by maxTtl and must be a whole number of seconds', async () => {
  const over = await t.call('alice', 'PUT', '/v1/records/runs/r2/fields/title', { value: 'a', expected_version: 0, ttl_seconds: 3601 });
  expect(over.status).toBe(400);
  expect(over.body).toMatchObject({ error: 'MALFORMED' });
  expect(over.body.message).toMatch(/ttl_seconds 3601 is longer than class "runs" allows \(maxTtl 1h = 3600 seconds\)/);
  for (const bad of [0, -5, 1.5, '60']) {
    const r = await t.call('alice', 'PUT', '/v1/records/runs/r2/fields/title', { value: 'a', expected_version: 0, ttl_seconds: bad });
    expect(r.status, JSON.stringify(bad)).toBe(400);
    expect(r.body.message).toMatch(/ttl_seconds: must be a whole number of seconds from 1 to/);
  }
  expect((await t.call('alice', 'GET', '/v1/records/runs/r2')).status).toBe(404);
});

test('MCP arguments and gRPC fields carry ttl_seconds and expires_at', async () => {
  const res: any = await mcp.callTool({ name: 'svc_put', arguments: { record: 'runs/m1', field: 'title', value: 'a', expected_version: 0, ttl_seconds: 120 } });
  expect(res.isError ?? false).toBe(false);
  expect(Date.parse(res.structuredContent.expires_at)).toBe(await expiresMs('runs', 'm1'));

  const put = await new Promise<WriteResult__Output>((resolve, reject) =>
    grpcClient.Put({ record: 'runs/g1', field: 'title', value: { stringValue: 'a' }, expected_version: 0, ttl_seconds: 300 }, md(), (e, r) => (e ? reject(e) : resolve(r!))),
  );
  expect(Date.parse(put.expires_at!)).toBe(await expiresMs('runs', 'g1'));
  const got = await new Promise<Record__Output>((resolve, reject) => grpcClient.Get({ record: 'runs/g1' }, md(), (e, r) => (e ? reject(e) : resolve(r!))));
  expect(got.expires_at).toBe(put.expires_at);
  const over = await new Promise<grpc.ServiceError | null>((resolve) =>
    grpcClient.Put({ record: 'runs/g2', field: 'title', value: { stringValue: 'a' }, expected_version: 0, ttl_seconds: 999_999 }, md(), (e) => resolve(e)),
  );
  expect(over?.code).toBe(grpc.status.INVALID_ARGUMENT);
});

test('the sweep expires a record whose own expiry passed, whatever its class', async () => {
  await t.call('alice', 'PUT', '/v1/records/runs/gone/fields/title', { value: 'a', expected_version: 0, ttl_seconds: 60 });
  await t.call('alice', 'PUT', '/v1/records/runs/stays/fields/title', { value: 'a', expected_version: 0, ttl_seconds: 60 });
  await sql.query(`update records set expires_at = now() - interval '1 second' where class = 'runs' and rid = 'gone'`);
  const report = await sweep({ db, log: quietLog, holder: 'test/record-ttl' });
  expect(report.ok, JSON.stringify(report.errors)).toBe(true);
  expect(report.expired!.records).toBe(1);
  expect((await t.call('alice', 'GET', '/v1/records/runs/gone')).status).toBe(404);
  expect((await t.call('alice', 'GET', '/v1/records/runs/stays')).status).toBe(200);
  // Written again: a new record, with no expiry of its own.
  const again = await t.call('alice', 'PUT', '/v1/records/runs/gone/fields/title', { value: 'b', expected_version: 0 });
  expect(again.status).toBe(201);
  expect((await t.call('alice', 'GET', '/v1/records/runs/gone')).body).not.toHaveProperty('expires_at');
});

test('transactions take ttl_seconds (top level or on a put/append): the longest one applies once, when every write applies; HTTP, MCP and gRPC', async () => {
  const path = '/v1/records/runs/tx1/transactions';
  const t0 = Date.now();
  const first = await t.call('alice', 'POST', path, {
    ttl_seconds: 300,
    writes: [
      { op: 'put', field: 'title', value: 'a', expected_version: 0 },
      { op: 'append', field: 'log', entry: 1, evidence: 'test', ttl_seconds: 600 },
    ],
  });
  expect(first.status, JSON.stringify(first.body)).toBe(201);
  const e1 = Date.parse(first.body.expires_at);
  expect(e1).toBe(await expiresMs('runs', 'tx1'));
  expect(e1).toBeGreaterThanOrEqual(t0 + 590_000); // the append's 600 s, the longer
  expect(e1).toBeLessThanOrEqual(Date.now() + 600_000 + 1000);
  expect((await t.call('alice', 'GET', '/v1/records/runs/tx1')).body.expires_at).toBe(first.body.expires_at);
  // A shorter one never brings it forward; a transaction without one says nothing of it.
  const shorter = await t.call('alice', 'POST', path, { ttl_seconds: 10, writes: [{ op: 'put', field: 'title', value: 'b', expected_version: 1 }] });
  expect(Date.parse(shorter.body.expires_at)).toBe(e1);
  const plain = await t.call('alice', 'POST', path, { writes: [{ op: 'put', field: 'title', value: 'c', expected_version: 2 }] });
  expect(plain.status).toBe(200);
  expect(plain.body).not.toHaveProperty('expires_at');
  // A refused transaction (its second write is stale) leaves the expiry alone.
  const refused = await t.call('alice', 'POST', path, {
    ttl_seconds: 3600,
    writes: [
      { op: 'append', field: 'log', entry: 2, evidence: 'test' },
      { op: 'put', field: 'title', value: 'x', expected_version: 0 },
    ],
  });
  expect(refused.status).toBe(409);
  expect(refused.body).toMatchObject({ error: 'STALE', index: 1 });
  expect(await expiresMs('runs', 'tx1')).toBe(e1);
  // Bounded by maxTtl like a single write, at the top level and on a write.
  const over = await t.call('alice', 'POST', path, { ttl_seconds: 3601, writes: [{ op: 'put', field: 'title', value: 'y', expected_version: 3 }] });
  expect(over.status).toBe(400);
  expect(over.body.message).toMatch(/ttl_seconds 3601 is longer than class "runs" allows/);
  const overWrite = await t.call('alice', 'POST', path, { writes: [{ op: 'put', field: 'title', value: 'y', expected_version: 3, ttl_seconds: 3601 }] });
  expect(overWrite.status).toBe(400);
  expect(overWrite.body).toMatchObject({ error: 'MALFORMED', index: 0 });

  const res: any = await mcp.callTool({
    name: 'svc_transaction',
    arguments: { record: 'runs/txm', ttl_seconds: 120, writes: [{ op: 'put', field: 'title', value: 'a', expected_version: 0 }] },
  });
  expect(res.isError ?? false, JSON.stringify(res)).toBe(false);
  expect(Date.parse(res.structuredContent.expires_at)).toBe(await expiresMs('runs', 'txm'));

  const tx = await new Promise<any>((resolve, reject) =>
    grpcClient.Transact(
      { record: 'runs/txg', ttl_seconds: 300, writes: [{ op: 'put', field: 'title', value: { stringValue: 'a' }, expected_version: 0 }] },
      md(),
      (e: grpc.ServiceError | null, r: unknown) => (e ? reject(e) : resolve(r)),
    ),
  );
  expect(Date.parse(tx.expires_at)).toBe(await expiresMs('runs', 'txg'));
  const own = await new Promise<any>((resolve, reject) =>
    grpcClient.Transact(
      { record: 'runs/txg', writes: [{ op: 'append', field: 'log', entry: { numberValue: 1 }, evidence: 'test', ttl_seconds: 900 }] },
      md(),
      (e: grpc.ServiceError | null, r: unknown) => (e ? reject(e) : resolve(r)),
    ),
  );
  expect(Date.parse(own.expires_at)).toBeGreaterThan(Date.parse(tx.expires_at));
  expect(Date.parse(own.expires_at)).toBe(await expiresMs('runs', 'txg'));
});
