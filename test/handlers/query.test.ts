/**
 * query: GET /v1/records/{class}?<field>=<value>&limit=N&after=<cursor> (interface.md
 * "query"; decisions §4), against a real gateway and PostgreSQL, plus the plan PostgreSQL
 * picks for a one-filter query on a class of ~50,000 records.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { bulk, ticket } from '../fixtures/flow-classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { queryRecordsStatement } from '../../db/kysely/index.js';

let t: TestGateway;
const BULK_RECORDS = 50_000;
const BULK_KINDS = 400; // kind = 'k' || (g % 400): 125 records per kind

async function sqlQuery(text: string, params: unknown[] = []): Promise<any[]> {
  const c = new pg.Client({ connectionString: t.db.url });
  await c.connect();
  try {
    return (await c.query(text, params)).rows;
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  t = await startTestGateway([ticket, bulk]);
  const c = new pg.Client({ connectionString: t.db.url });
  await c.connect();
  try {
    // Created a millisecond apart, in rid order: on Citus a record's id is made from its
    // creation time (migration 0017), so rows of one statement need their own times.
    await c.query(
      `insert into records (class, rid, record_version, created_at)
       select 'bulk', 'b' || lpad(g::text, 5, '0'), 2, now() - ($1::int - g) * interval '1 millisecond'
       from generate_series(1, $1::int) g order by g`,
      [BULK_RECORDS],
    );
    await c.query(
      `insert into fields (rid, record_id, class, name, kind, value, version, record_version, author, updated_at)
       select r.rid, r.id, 'bulk', 'kind', 'versioned', to_json('k' || (substr(r.rid, 2)::int % $1::int)), 1, 1, 'apikey:alice', now()
       from records r where r.class = 'bulk'`,
      [BULK_KINDS],
    );
    await c.query(
      `insert into fields (rid, record_id, class, name, kind, value, version, record_version, author, updated_at)
       select r.rid, r.id, 'bulk', 'n', 'versioned', to_json(substr(r.rid, 2)::int), 1, 2, 'apikey:alice', now()
       from records r where r.class = 'bulk'`,
    );
    await c.query('analyze records');
    await c.query('analyze fields');
  } finally {
    await c.end();
  }
}, 120_000);
afterAll(() => t?.close());

type Res = { status: number; body: any };

let seq = 0;
const fresh = (prefix = 'q') => `${prefix}-${++seq}`;
/** A tag value no other test uses, so each test queries only its own records. */
const freshTag = () => `tag-${++seq}-${Math.random().toString(36).slice(2, 8)}`;

const put = (who: string, id: string, field: string, body: unknown): Promise<Res> =>
  t.call(who, 'PUT', `/v1/records/ticket/${id}/fields/${field}`, body);
const query = (who: string, qs: string, cls = 'ticket'): Promise<Res> =>
  t.call(who, 'GET', `/v1/records/${cls}${qs ? `?${qs}` : ''}`);

async function ok(res: Promise<Res>): Promise<any> {
  const r = await res;
  if (r.status !== 200 && r.status !== 201) throw new Error(`seed failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

function expectError(res: Res, status: number, code: string): void {
  expect(res.body, JSON.stringify(res.body)?.slice(0, 500)).toMatchObject({ error: code });
  expect(res.status).toBe(status);
  expect(typeof res.body.message).toBe('string');
}

/** Create a ticket with the given tag and field values (versioned fields at version 1). */
async function ticketWith(tag: string, values: Record<string, unknown> = {}, id = fresh()): Promise<string> {
  await ok(put('alice', id, 'tag', { value: tag }));
  for (const [field, value] of Object.entries(values)) {
    await ok(put('alice', id, field, { value, expected_version: 0 }));
  }
  return id;
}

const rids = (res: Res) => res.body.records.map((r: any) => r.record.slice('ticket/'.length));
const tagQs = (tag: string, more = '') => `tag=${encodeURIComponent(tag)}${more}`;

// ---------------------------------------------------------------------------------------
describe('filters', () => {
  test("filters on a field's current value", async () => {
    const tag = freshTag();
    const a = await ticketWith(tag, { title: 'alpha' });
    const b = await ticketWith(tag, { title: 'beta' });
    expect(rids(await query('alice', tagQs(tag, '&title=alpha')))).toEqual([a]);
    // b's title moves to alpha: it matches now; a moves away: it no longer matches
    await ok(put('alice', b, 'title', { value: 'alpha', expected_version: 1 }));
    await ok(put('alice', a, 'title', { value: 'gamma', expected_version: 1 }));
    expect(rids(await query('alice', tagQs(tag, '&title=alpha')))).toEqual([b]);
    expect(rids(await query('alice', tagQs(tag, '&title=gamma')))).toEqual([a]);
  });

  test('string filter: ?status=open', async () => {
    const tag = freshTag();
    const a = await ticketWith(tag, { status: 'open' });
    await ticketWith(tag, { status: 'closed' });
    const c = await ticketWith(tag, { status: 'open' });
    await ticketWith(tag); // no status at all
    const r = await query('alice', tagQs(tag, '&status=open'));
    expect(r.status).toBe(200);
    expect(rids(r)).toEqual([a, c]);
  });

  test('number filter matches a number field: ?severity=2, ?ratio=0.5', async () => {
    const tag = freshTag();
    const a = await ticketWith(tag, { severity: 2, ratio: 0.5 });
    await ticketWith(tag, { severity: 3, ratio: 1.5 });
    expect(rids(await query('alice', tagQs(tag, '&severity=2')))).toEqual([a]);
    expect(rids(await query('alice', tagQs(tag, '&ratio=0.5')))).toEqual([a]);
  });

  test('`true` matches a boolean', async () => {
    const tag = freshTag();
    const a = await ticketWith(tag, { urgent: true });
    const b = await ticketWith(tag, { urgent: false });
    expect(rids(await query('alice', tagQs(tag, '&urgent=true')))).toEqual([a]);
    expect(rids(await query('alice', tagQs(tag, '&urgent=false')))).toEqual([b]);
  });

  test('a value is compared as a JSON string and, when it parses, as that JSON value too', async () => {
    const tag = freshTag();
    // `label` is a soft field of any type
    const str2 = fresh();
    await ticketWith(tag, {}, str2);
    await ok(put('alice', str2, 'label', { value: '2' }));
    const num2 = fresh();
    await ticketWith(tag, {}, num2);
    await ok(put('alice', num2, 'label', { value: 2 }));
    const strTrue = fresh();
    await ticketWith(tag, {}, strTrue);
    await ok(put('alice', strTrue, 'label', { value: 'true' }));
    const other = fresh();
    await ticketWith(tag, {}, other);
    await ok(put('alice', other, 'label', { value: 'x' }));
    const nul = fresh();
    await ticketWith(tag, {}, nul);
    await ok(put('alice', nul, 'label', { value: null }));
    const obj = fresh();
    await ticketWith(tag, {}, obj);
    await ok(put('alice', obj, 'label', { value: { b: 2, a: 1 } }));
    expect(rids(await query('alice', tagQs(tag, '&label=2')))).toEqual([str2, num2]);
    expect(rids(await query('alice', tagQs(tag, '&label=true')))).toEqual([strTrue]);
    expect(rids(await query('alice', tagQs(tag, '&label=x')))).toEqual([other]);
    expect(rids(await query('alice', tagQs(tag, '&label=null')))).toEqual([nul]);
    // compared as that JSON value: key order does not matter
    expect(rids(await query('alice', tagQs(tag, `&label=${encodeURIComponent('{"a":1,"b":2}')}`)))).toEqual([obj]);
  });

  test('JSON string form: ?title=%22x%22 matches title "x"', async () => {
    const tag = freshTag();
    const a = await ticketWith(tag, { title: 'x' });
    await ticketWith(tag, { title: 'y' });
    expect(rids(await query('alice', tagQs(tag, '&title=%22x%22')))).toEqual([a]);
    expect(rids(await query('alice', tagQs(tag, '&title=x')))).toEqual([a]);
  });

  test('several filters: all must match', async () => {
    const tag = freshTag();
    const a = await ticketWith(tag, { status: 'open', severity: 1 });
    await ticketWith(tag, { status: 'open', severity: 2 });
    await ticketWith(tag, { status: 'closed', severity: 1 });
    expect(rids(await query('alice', tagQs(tag, '&status=open&severity=1')))).toEqual([a]);
    expect(rids(await query('alice', tagQs(tag, '&status=closed&severity=2')))).toEqual([]);
  });

  test('a task field filter compares the owner, only while the lease is held', async () => {
    const tag = freshTag();
    const a = await ticketWith(tag);
    const b = await ticketWith(tag);
    await ok(t.call('alice', 'PUT', `/v1/records/ticket/${a}/fields/task/claim`, { lease_seconds: 60 }));
    await ok(t.call('carol', 'PUT', `/v1/records/ticket/${b}/fields/task/claim`, { lease_seconds: 60 }));
    expect(rids(await query('alice', tagQs(tag, '&task=apikey:alice')))).toEqual([a]);
    expect(rids(await query('alice', tagQs(tag, '&task=apikey%3Acarol')))).toEqual([b]);
    // alice's lease expires: the record no longer matches her
    await sqlQuery(
      `update fields set lease_expires_at = now() - interval '1 second'
       where name = 'task' and rid = $1 and record_id = (select id from records where class = 'ticket' and rid = $1)`,
      [a],
    );
    expect(rids(await query('alice', tagQs(tag, '&task=apikey:alice')))).toEqual([]);
    expect(rids(await query('alice', tagQs(tag, '&task=apikey:carol')))).toEqual([b]);
    // released: no match either
    await ok(t.call('carol', 'PUT', `/v1/records/ticket/${b}/fields/task/claim`, { lease_seconds: 0 }));
    expect(rids(await query('alice', tagQs(tag, '&task=apikey:carol')))).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------
describe('rejections', () => {
  test('append field filter: MALFORMED', async () => {
    expectError(await query('alice', 'log=1'), 400, 'MALFORMED');
  });

  test('unknown field: UNKNOWN_FIELD', async () => {
    const r = await query('alice', 'nosuch=1');
    expectError(r, 422, 'UNKNOWN_FIELD');
  });

  test('a field the role may not read: SCOPE_DENIED', async () => {
    expectError(await query('bob', 'secret=x'), 403, 'SCOPE_DENIED');
    expect((await query('alice', 'secret=x')).status).toBe(200);
  });

  test('no role in the class: NO_ROLE', async () => {
    expectError(await query('dave', ''), 403, 'NO_ROLE');
    expectError(await query('dave', 'status=open'), 403, 'NO_ROLE');
  });

  test('unknown class: NOT_FOUND', async () => {
    expectError(await query('alice', '', 'nosuchclass'), 404, 'NOT_FOUND');
  });

  test('limit above 1000: MALFORMED', async () => {
    expectError(await query('alice', 'limit=1001'), 400, 'MALFORMED');
    expectError(await query('alice', 'limit=abc'), 400, 'MALFORMED');
  });
});

// ---------------------------------------------------------------------------------------
describe('response and paging', () => {
  test('response {class, records: [{record, record_version, fields}]}; only readable fields; append: count and latest entry', async () => {
    const tag = freshTag();
    const id = await ticketWith(tag, { title: 'shape', secret: 's3cret' });
    for (let i = 1; i <= 3; i++) {
      await ok(t.call('alice', 'POST', `/v1/records/ticket/${id}/fields/log/entries`, { entry: { n: i }, evidence: `ev${i}` }));
    }
    const r = await query('alice', tagQs(tag));
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(['class', 'records']);
    expect(r.body.class).toBe('ticket');
    expect(r.body.records).toHaveLength(1);
    const row = r.body.records[0];
    expect(Object.keys(row).sort()).toEqual(['fields', 'record', 'record_version']);
    expect(row.record).toBe(`ticket/${id}`);
    expect(row.record_version).toBe(6);
    expect(Object.keys(row.fields).sort()).toEqual(['log', 'secret', 'tag', 'title']);
    expect(row.fields.title).toMatchObject({ value: 'shape', version: 1, author: 'apikey:alice' });
    expect(row.fields.log.version).toBe(3);
    expect(row.fields.log.entries).toHaveLength(1);
    expect(row.fields.log.entries[0]).toMatchObject({ seq: 3, value: { n: 3 }, author: 'apikey:alice', evidence: 'ev3' });

    // same record through get, for comparison: a get returns every entry
    const g = await t.call('alice', 'GET', `/v1/records/ticket/${id}`);
    expect(g.body.fields.log.entries).toHaveLength(3);
    expect(row.fields.title).toEqual(g.body.fields.title);

    // bob's role may not read `secret`: it is not shown
    const rb = await query('bob', tagQs(tag));
    expect(rb.status).toBe(200);
    expect(Object.keys(rb.body.records[0].fields).sort()).toEqual(['log', 'tag', 'title']);
  });

  test('oldest first by creation, whatever the id or the last write', async () => {
    const tag = freshTag();
    const ids = [`zz-${seq}`, `aa-${seq}`, `mm-${seq}`];
    for (const id of ids) await ticketWith(tag, { title: 'o' }, id);
    // a later write to the first-created record does not move it
    await ok(put('alice', ids[0], 'title', { value: 'o2', expected_version: 1 }));
    expect(rids(await query('alice', tagQs(tag)))).toEqual(ids);
  });

  test('next_after only when more remain; paging with after covers every match once', async () => {
    const tag = freshTag();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await ticketWith(tag));

    const exact = await query('alice', tagQs(tag, '&limit=7'));
    expect(rids(exact)).toEqual(ids);
    expect(exact.body).not.toHaveProperty('next_after');
    const more = await query('alice', tagQs(tag, '&limit=8'));
    expect(more.body).not.toHaveProperty('next_after');

    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    for (;;) {
      const r = await query('alice', tagQs(tag, `&limit=3${after ? `&after=${encodeURIComponent(after)}` : ''}`));
      expect(r.status).toBe(200);
      pages++;
      seen.push(...rids(r));
      if (!('next_after' in r.body)) break;
      expect(typeof r.body.next_after).toBe('string');
      after = r.body.next_after;
      expect(pages).toBeLessThan(10);
    }
    expect(pages).toBe(3);
    expect(seen).toEqual(ids);
    expect(new Set(seen).size).toBe(ids.length);
  });

  test('an `after` the gateway did not issue, or issued for another filter set: MALFORMED', async () => {
    const tag = freshTag();
    for (let i = 0; i < 3; i++) await ticketWith(tag, { status: 'open' });
    const first = await query('alice', tagQs(tag, '&limit=1'));
    const cursor: string = first.body.next_after;
    expect(typeof cursor).toBe('string');
    // the genuine cursor works
    expect((await query('alice', tagQs(tag, `&limit=1&after=${encodeURIComponent(cursor)}`))).status).toBe(200);

    const bad = async (after: string, qs = tagQs(tag, '&limit=1')) =>
      expectError(await query('alice', `${qs}&after=${encodeURIComponent(after)}`), 400, 'MALFORMED');
    // garbage
    await bad('garbage');
    await bad('');
    await bad('not.a-cursor');
    // tampered: one character of the cursor changed
    const i = Math.floor(cursor.length / 3);
    await bad(cursor.slice(0, i) + (cursor[i] === 'A' ? 'B' : 'A') + cursor.slice(i + 1));
    const j = cursor.length - 2;
    await bad(cursor.slice(0, j) + (cursor[j] === 'A' ? 'B' : 'A') + cursor.slice(j + 1));
    // forged: a payload of our own making with a made-up signature
    const forged = Buffer.from(JSON.stringify({ t: 'after', b: `ticket?{"tag":"${tag}"}`, p: 0 })).toString('base64url');
    await bad(`${forged}.${Buffer.from('x'.repeat(32)).toString('base64url')}`);
    await bad(forged);
    // genuine, but issued for another filter set or another class
    await bad(cursor, tagQs(tag, '&limit=1&status=open'));
    await bad(cursor, tagQs(freshTag(), '&limit=1'));
    expectError(await query('alice', `limit=1&after=${encodeURIComponent(cursor)}`, 'bulk'), 400, 'MALFORMED');
  });
});

// ---------------------------------------------------------------------------------------
/**
 * On Citus (docs/scale-out.md) the same statement runs on every shard of `fields`: each
 * shard's part must walk its fields_value in order and stop at the page (no seq scan, no
 * sort of more than a page), and the coordinator merges at most a page from each shard.
 */
async function citusPlanWalksTheIndex(statement: string, params: unknown[]) {
  const c = new pg.Client({ connectionString: t.db.url });
  await c.connect();
  let plan: any;
  let shards: number;
  try {
    await c.query('set citus.explain_all_tasks = on');
    plan = (await c.query(`explain (analyze, format json) ${statement}`, params)).rows[0]['QUERY PLAN'];
    shards = Number((await c.query(`select count(*) as n from pg_dist_shard where logicalrelid = 'fields'::regclass`)).rows[0].n);
  } finally {
    await c.end();
  }
  const coordinator: any[] = [];
  const remote: any[] = [];
  const walk = (v: any, inRemote: boolean) => {
    if (Array.isArray(v)) return v.forEach((x) => walk(x, inRemote));
    if (v === null || typeof v !== 'object') return;
    if (typeof v['Node Type'] === 'string') (inRemote ? remote : coordinator).push(v);
    for (const [k, x] of Object.entries(v)) walk(x, inRemote || k === 'Remote Plan');
  };
  walk(plan, false);
  const text = JSON.stringify(remote.map((n) => ({ type: n['Node Type'], rel: n['Relation Name'], index: n['Index Name'], rows: n['Actual Rows'] })));
  expect(remote.filter((n) => n['Node Type'] === 'Seq Scan' && /^(records|fields)_\d+$/.test(n['Relation Name'] ?? '')), text).toEqual([]);
  // A shard sorts at most a page (the page's records joined back), never its matches.
  for (const n of remote.filter((x) => x['Node Type'] === 'Sort')) expect(n['Actual Rows'], text).toBeLessThanOrEqual(101);
  const valueScans = remote.filter((n) => String(n['Index Name'] ?? '').startsWith('fields_value_'));
  expect(valueScans.length, text).toBeGreaterThan(0);
  for (const n of valueScans) expect(n['Actual Rows'], text).toBeLessThanOrEqual(101);
  for (const n of coordinator.filter((x) => x['Node Type'] === 'Sort')) expect(n['Actual Rows'], text).toBeLessThanOrEqual(101 * shards);
}

describe('a class of 50,000 records', () => {
  /** rids of bulk records whose kind is k<m>, in creation order. */
  const expected = (m: number) => {
    const out: string[] = [];
    for (let g = 1; g <= BULK_RECORDS; g++) if (g % BULK_KINDS === m) out.push(`b${String(g).padStart(5, '0')}`);
    return out;
  };
  const bulkRids = (res: Res) => res.body.records.map((r: any) => r.record.slice('bulk/'.length));

  test('limit: default 100, maximum 1000', async () => {
    const d = await query('alice', '', 'bulk');
    expect(d.status).toBe(200);
    expect(d.body.records).toHaveLength(100);
    expect(typeof d.body.next_after).toBe('string');
    expect(bulkRids(d)[0]).toBe('b00001');
    const max = await query('alice', 'limit=1000', 'bulk');
    expect(max.status).toBe(200);
    expect(max.body.records).toHaveLength(1000);
    expect(bulkRids(max)[999]).toBe('b01000');
    expectError(await query('alice', 'limit=1001', 'bulk'), 400, 'MALFORMED');
  });

  test('one filter: correct records in creation order, paged without gaps or duplicates', async () => {
    const want = expected(7); // 125 records
    expect(want).toHaveLength(125);
    const first = await query('alice', 'kind=k7', 'bulk');
    expect(first.status).toBe(200);
    expect(bulkRids(first)).toEqual(want.slice(0, 100));
    expect(first.body.records[0].fields).toEqual({
      kind: expect.objectContaining({ value: 'k7', version: 1, author: 'apikey:alice' }),
      n: expect.objectContaining({ value: 7, version: 1 }),
    });
    const second = await query('alice', `kind=k7&after=${encodeURIComponent(first.body.next_after)}`, 'bulk');
    expect(bulkRids(second)).toEqual(want.slice(100));
    expect(second.body).not.toHaveProperty('next_after');
    // a number filter on the same class, and two filters together
    expect(bulkRids(await query('alice', 'n=40007', 'bulk'))).toEqual(['b40007']);
    expect(bulkRids(await query('alice', 'kind=k7&n=40007', 'bulk'))).toEqual(['b40007']);
    expect(bulkRids(await query('alice', 'kind=k8&n=40007', 'bulk'))).toEqual([]);
  });

  test('the one-filter query walks fields_value in order and stops at the page, never scanning the class', async () => {
    // The very statement db/kysely/index.ts runs for `?kind=k7` (limit 100 + 1, no cursor),
    // compiled by Kysely, with EXPLAIN ANALYZE: the index must deliver matches in creation
    // order so the scan stops after the page instead of sorting every match.
    const compiled = queryRecordsStatement('bulk', [{ field: 'kind', values: ['k7'] }], { afterId: 0, limit: 101 }).compile(
      t.gw.services.db.kysely,
    );
    const statement = compiled.sql;
    const params = [...compiled.parameters];
    const citus = (await sqlQuery(`select exists (select 1 from pg_extension where extname = 'citus') as c`))[0].c === true;
    if (citus) {
      await citusPlanWalksTheIndex(statement, params);
      const rows = await sqlQuery(statement, params);
      expect(rows.map((r) => r.rid)).toEqual(expected(7).slice(0, 101));
      return;
    }
    const plan = await sqlQuery(`explain (analyze, format json) ${statement}`, params);
    const root = plan[0]['QUERY PLAN'][0].Plan;
    const nodes: any[] = [];
    const walk = (n: any) => {
      nodes.push(n);
      for (const c of n.Plans ?? []) walk(c);
    };
    walk(root);
    const text = JSON.stringify(nodes.map((n) => ({ type: n['Node Type'], rel: n['Relation Name'], index: n['Index Name'], rows: n['Actual Rows'] })));
    const seqScans = nodes.filter((n) => n['Node Type'] === 'Seq Scan' && ['records', 'fields'].includes(n['Relation Name']));
    expect(seqScans, text).toEqual([]);
    expect(nodes.some((n) => n['Node Type'] === 'Sort'), text).toBe(false);
    const valueScan = nodes.find((n) => n['Index Name'] === 'fields_value');
    expect(valueScan, text).toBeDefined();
    expect(valueScan['Actual Rows'], text).toBeLessThanOrEqual(101);
    // and the statement returns what the endpoint returned
    const rows = await sqlQuery(statement, params);
    expect(rows.map((r) => r.rid)).toEqual(expected(7).slice(0, 101));
  });
});
