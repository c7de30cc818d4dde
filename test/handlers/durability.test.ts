/**
 * Relaxed durability (issue 38 item 2): a write that touches only fields declared
 * `durability: relaxed` (a soft or append field, itself or by its class's default) commits
 * with synchronous_commit off; every other write (a strict field, a versioned field, a claim,
 * a transaction with one strict write) waits for its WAL flush.
 *
 * Observed in the database, at commit: a deferred constraint trigger on history (every put,
 * append and transaction writes a history row in the write's own transaction) records
 * current_setting('synchronous_commit') when the transaction commits — the value PostgreSQL
 * decides the commit's WAL wait with.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseManifest } from '../../handlers/class-schema.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
let sql: pg.Client;
const roles = { crew: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } };

beforeAll(async () => {
  t = await startTestGateway([
    {
      name: 'board',
      namespace: 'team-a',
      spec: {
        fields: {
          status: { kind: 'versioned' },
          cursor: { kind: 'soft', durability: 'relaxed' },
          log: { kind: 'append', durability: 'relaxed' },
          memo: { kind: 'soft' },
          job: { kind: 'task', leaseSeconds: 60 },
        },
        roles,
      },
    },
    {
      // The class default: its soft and append fields are relaxed unless they say strict;
      // its versioned field stays strict.
      name: 'scratch',
      namespace: 'team-a',
      spec: {
        durability: 'relaxed',
        fields: { pos: { kind: 'soft' }, trail: { kind: 'append' }, pinned: { kind: 'soft', durability: 'strict' }, title: { kind: 'versioned' } },
        roles,
      },
    },
  ]);
  sql = new pg.Client({ connectionString: t.db.url });
  await sql.connect();
  await sql.query(`create table durability_probe (id bigserial primary key, class text, rid text, field text, op text, sc text)`);
  await sql.query(`create function durability_probe() returns trigger language plpgsql as $$
    begin
      insert into durability_probe (class, rid, field, op, sc) values (new.class, new.rid, new.field, new.op, current_setting('synchronous_commit'));
      return null;
    end $$`);
  // Deferred: runs when the write's transaction commits, after the write statement is done.
  await sql.query(`create constraint trigger durability_probe after insert on history
    deferrable initially deferred for each row execute function durability_probe()`);
}, 120_000);

afterAll(async () => {
  await sql?.end();
  await t?.close();
});

let n = 0;
const fresh = () => `d-${++n}`;

/** synchronous_commit at the commit of each history row of record cls/rid, oldest first. */
async function commits(cls: string, rid: string): Promise<{ field: string; op: string; sc: string }[]> {
  const { rows } = await sql.query(`select field, op, sc from durability_probe where class = $1 and rid = $2 order by id`, [cls, rid]);
  return rows;
}

async function ok(p: Promise<{ status: number; body: any }>): Promise<any> {
  const r = await p;
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  return r.body;
}

const put = (cls: string, rid: string, field: string, body: unknown) => ok(t.call('alice', 'PUT', `/v1/records/${cls}/${rid}/fields/${field}`, body));
const append = (cls: string, rid: string, field: string, entry: unknown) =>
  ok(t.call('alice', 'POST', `/v1/records/${cls}/${rid}/fields/${field}/entries`, { entry, evidence: 'seen' }));
const txn = (cls: string, rid: string, writes: unknown[]) => ok(t.call('alice', 'POST', `/v1/records/${cls}/${rid}/transactions`, { evidence: 'seen', writes }));

describe('a write of relaxed fields only commits with synchronous_commit off', () => {
  test('the session default is on (the probe sees what the commit decides with)', async () => {
    expect((await sql.query(`select current_setting('synchronous_commit') as sc`)).rows[0].sc).toBe('on');
  });

  test('put of a relaxed soft field: off; put of a strict soft field and of a versioned field: on', async () => {
    const id = fresh();
    await put('board', id, 'cursor', { value: 1 });
    await put('board', id, 'memo', { value: 'x' });
    await put('board', id, 'status', { value: 'open', expected_version: 0 });
    await put('board', id, 'cursor', { value: 2 });
    expect(await commits('board', id)).toEqual([
      { field: 'cursor', op: 'put', sc: 'off' },
      { field: 'memo', op: 'put', sc: 'on' },
      { field: 'status', op: 'put', sc: 'on' },
      { field: 'cursor', op: 'put', sc: 'off' },
    ]);
  });

  test('append to a relaxed append field: off; a claim (task fields are never relaxed): strict', async () => {
    const id = fresh();
    await append('board', id, 'log', 'one');
    await ok(t.call('alice', 'PUT', `/v1/records/board/${id}/fields/job/claim`, {}));
    expect(await commits('board', id)).toEqual([
      { field: 'log', op: 'append', sc: 'off' },
      { field: 'job', op: 'claim', sc: 'on' },
    ]);
  });

  test('a transaction of relaxed writes only: off; one strict write in it makes it strict', async () => {
    const relaxed = fresh();
    await txn('board', relaxed, [
      { op: 'put', field: 'cursor', value: 7 },
      { op: 'append', field: 'log', entry: 'a' },
    ]);
    expect((await commits('board', relaxed)).map((r) => r.sc)).toEqual(['off', 'off']);
    const mixed = fresh();
    await txn('board', mixed, [
      { op: 'put', field: 'cursor', value: 8 },
      { op: 'put', field: 'status', value: 'open', expected_version: 0 },
    ]);
    expect((await commits('board', mixed)).map((r) => r.sc)).toEqual(['on', 'on']);
    const softStrict = fresh();
    await txn('board', softStrict, [
      { op: 'put', field: 'cursor', value: 9 },
      { op: 'put', field: 'memo', value: 'y' },
    ]);
    expect((await commits('board', softStrict)).map((r) => r.sc)).toEqual(['on', 'on']);
  });

  test('the class default relaxes its soft and append fields, not a field that says strict nor a versioned one', async () => {
    const id = fresh();
    await put('scratch', id, 'pos', { value: 1 });
    await append('scratch', id, 'trail', 'x');
    await put('scratch', id, 'pinned', { value: true });
    await put('scratch', id, 'title', { value: 't', expected_version: 0 });
    expect(await commits('scratch', id)).toEqual([
      { field: 'pos', op: 'put', sc: 'off' },
      { field: 'trail', op: 'append', sc: 'off' },
      { field: 'pinned', op: 'put', sc: 'on' },
      { field: 'title', op: 'put', sc: 'on' },
    ]);
  });

  test('a relaxed write leaves the connection strict for the next write (SET LOCAL, not SET)', async () => {
    // The gateway's pool is small: a strict write right after many relaxed ones runs on a
    // connection that served them.
    const id = fresh();
    for (let i = 0; i < 12; i++) await put('board', id, 'cursor', { value: i });
    for (let i = 0; i < 12; i++) await put('board', id, 'memo', { value: i });
    const rows = await commits('board', id);
    expect(rows.filter((r) => r.field === 'cursor').every((r) => r.sc === 'off')).toBe(true);
    expect(rows.filter((r) => r.field === 'memo').every((r) => r.sc === 'on')).toBe(true);
  });
});

describe('durability in the class definition', () => {
  const manifest = (spec: Record<string, unknown>) => ({ apiVersion: 'kslate.dev/v1', kind: 'SharedContext', metadata: { name: 'c' }, spec });

  test('relaxed on a versioned or task field is refused with the reason', () => {
    const r = parseManifest(manifest({ fields: { a: { kind: 'versioned', durability: 'relaxed' }, b: { kind: 'task', durability: 'relaxed' } } }));
    expect(r.ok).toBe(false);
    const problems = (r as { problems: string[] }).problems;
    expect(problems).toEqual([
      expect.stringMatching(/^spec\.fields\.a\.durability: relaxed is not allowed on versioned fields: a versioned write is never relaxed/),
      expect.stringMatching(/^spec\.fields\.b\.durability: relaxed is not allowed on task fields/),
    ]);
  });

  test('only strict and relaxed are durabilities; the class default may be relaxed beside versioned fields', () => {
    const bad = parseManifest(manifest({ durability: 'fast', fields: { a: { kind: 'soft', durability: 'lazy' } } }));
    expect((bad as { problems: string[] }).problems).toEqual([
      'spec.durability: must be one of strict, relaxed',
      'spec.fields.a.durability: must be one of strict, relaxed',
    ]);
    const good = parseManifest(manifest({ durability: 'relaxed', fields: { a: { kind: 'versioned' }, b: { kind: 'soft', durability: 'strict' }, c: { kind: 'append', durability: 'relaxed' } } }));
    expect(good.ok).toBe(true);
  });

  test('GET /v1/classes/{name} shows the class durability (strict when absent) and each field\'s own', async () => {
    const s = await ok(t.call('alice', 'GET', '/v1/classes/scratch'));
    expect(s.durability).toBe('relaxed');
    expect(s.fields.pinned).toEqual({ kind: 'soft', durability: 'strict' });
    const b = await ok(t.call('alice', 'GET', '/v1/classes/board'));
    expect(b.durability).toBe('strict');
    expect(b.fields.cursor).toEqual({ kind: 'soft', durability: 'relaxed' });
  });

  test('the MCP class resource shows them too', async () => {
    const mcp = new Client({ name: 'kslate-test', version: '0.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${KEYS.alice}` } } }));
    try {
      const res: any = await mcp.readResource({ uri: 'kslate://classes/scratch' });
      const cls = JSON.parse(res.contents[0].text);
      expect(cls.durability).toBe('relaxed');
      expect(cls.fields.pinned).toEqual({ kind: 'soft', durability: 'strict' });
    } finally {
      await mcp.close();
    }
  });
});
