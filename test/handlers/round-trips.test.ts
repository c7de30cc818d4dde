/**
 * The write path's cost (issues 15, 32): a put or append is ONE round trip to PostgreSQL
 * (kslate_write, migration 0010, as a named prepared statement), applied or refused (STALE, a
 * moved premise, a lost fence, the resolve gate: decided under the lock, the rejection's
 * history row written by the same statement); a get is one statement. Counted at the driver:
 * every statement the handlers send through a pool whose client counts its queries (BEGIN
 * and COMMIT included).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PgDb, createPool } from '../../db/kysely/index.js';
import { invoke, operations, type Operation } from '../../handlers/index.js';
import type { Identity } from '../../handlers/types.js';
import { makeCtx } from '../../runtime/request.js';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';
import { CITUS } from '../setup/citus.js';

/** A class whose one role reads '*' (incident's roles list their fields). */
const ledger: ClassInput = {
  name: 'ledger',
  spec: {
    fields: { title: { kind: 'versioned' }, status: { kind: 'versioned' }, log: { kind: 'append' } },
    roles: { keeper: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
  },
};

/**
 * On Citus (vitest.citus.config.ts) the statement counts hold as they are, each write one
 * delegated call; the plan halves are plain PostgreSQL's and are not checked there: the named
 * statement prepared on this connection is the coordinator's (a call Citus routes to the
 * record's shard), and the plan that reads the rows is made on the worker, on Citus's own
 * connection to it, so neither pg_prepared_statements here nor an EXPLAIN of local tables
 * shows it; and the seeds (hundreds of thousands of rows, fields without their `rid`) are
 * shaped for one database. Each plan half says where it stops.
 */

let t: TestGateway;
let pool: pg.Pool;
let db: PgDb;
let sent: string[] = [];
/** The statements sent, with their parameters (for EXPLAIN). */
let sentWithValues: { text: string; values: unknown[] }[] = [];

beforeAll(async () => {
  t = await startTestGateway([incident, ledger]);
  // One connection, so the prepared statements seen below are the ones the writes made.
  pool = createPool({ connectionString: t.db.url, max: 1 });
  // Count at the client: wrap each new connection's query.
  pool.on('connect', (client) => {
    const q = client.query.bind(client) as (...a: unknown[]) => unknown;
    (client as unknown as { query: (...a: unknown[]) => unknown }).query = (...a: unknown[]) => {
      const first = a[0] as string | { text: string; name?: string };
      sent.push(typeof first === 'string' ? first : first.name ? `[${first.name}]` : first.text);
      sentWithValues.push(typeof first === 'string' ? { text: first, values: (a[1] as unknown[]) ?? [] } : { text: first.text, values: (first as { values?: unknown[] }).values ?? [] });
      return q(...a);
    };
  });
  db = new PgDb(pool);
});

afterAll(async () => {
  await pool?.end();
  await t?.close();
});

const alice: Identity = { author: 'apikey:alice', provider: 'apikey', name: 'alice', strength: 'shared-secret' };

async function run(op: Operation, input: Record<string, unknown>, who: Identity = alice) {
  const ctx = makeCtx({ ...t.gw.services, db }, who, undefined);
  sent = [];
  try {
    const out = await invoke(op, ctx, input as never);
    return { out, statements: [...sent] };
  } catch (e) {
    return { error: e as { code: string; extra?: Record<string, unknown> }, statements: [...sent] };
  }
}

const json = (value: unknown) => ({ kind: 'json' as const, value });
const putTitle = (id: string, body: Record<string, unknown>) => run(operations.put, { class: 'incident', id, field: 'title', body: json(body) });

describe('applied writes: one round trip', () => {
  test('put creating a record, put updating it, soft put, append: one named statement each', async () => {
    const create = await putTitle('rt-1', { value: 'a', expected_version: 0 });
    expect(create.out?.created).toBe(true);
    expect(create.statements).toEqual(['[kslate_write]']);

    const update = await putTitle('rt-1', { value: 'b', expected_version: 1 });
    expect(update.out?.body).toMatchObject({ version: 2, record_version: 2 });
    expect(update.statements).toEqual(['[kslate_write]']);

    const soft = await run(operations.put, { class: 'incident', id: 'rt-1', field: 'scratch', body: json({ value: { x: 1 } }) });
    expect(soft.out?.body).toMatchObject({ version: 1, record_version: 3 });
    expect(soft.statements).toEqual(['[kslate_write]']);

    const note = await run(operations.append, {
      class: 'incident',
      id: 'rt-1',
      field: 'notes',
      body: json({ entry: { text: 'seen' }, evidence: 'the log', based_on: [{ field: 'title', version: 2 }] }),
    });
    expect(note.out?.body).toMatchObject({ seq: 1, record_version: 4 });
    expect(note.statements).toEqual(['[kslate_write]']);

    const { rows } = await pool.query<{ name: string }>('select name from pg_prepared_statements order by name');
    expect(rows.map((r) => r.name)).toContain('kslate_write');
  });

  test('a get is one statement', async () => {
    await putTitle('rt-get', { value: 'x', expected_version: 0 });
    const got = await run(operations.get, { class: 'incident', id: 'rt-get', fields: 'title,status' });
    expect(got.out?.body).toMatchObject({ record_version: 1, fields: { title: { value: 'x', version: 1 } } });
    expect(got.statements).toEqual(['[kslate_read_record_some]']);
    const all = await run(operations.get, { class: 'incident', id: 'rt-get' });
    expect(all.statements).toHaveLength(1);
    const missing = await run(operations.get, { class: 'incident', id: 'rt-none' });
    expect(missing.error?.code).toBe('NOT_FOUND');
  });

  test('the get statement keeps its generic plan when the fields table is large and skewed', async () => {
    // What the bench's full run has: many records in another class, each with a few fields.
    // With `name = any($2)` PostgreSQL 18 then costs the generic plan above the custom one and
    // re-plans the named statement on every execution (0.27 against 0.12 ms of CPU per get).
    const seed = new pg.Client({ connectionString: t.db.url });
    await seed.connect();
    try {
      // On Citus: the gets' statement counts below, not the plan cache (CITUS above).
      if (!CITUS) await seed.query(`
        with r as (
          insert into records (class, rid, record_version)
          select 'bulk', 'b-' || g, 2 from generate_series(1, 60000) g returning id)
        insert into fields (record_id, class, name, kind, value, version, record_version, author, updated_at)
        select r.id, 'bulk', n, 'versioned', '"x"'::json, 1, 1, 'apikey:alice', now()
        from r cross join (values ('team'), ('status')) v(n)`);
      if (!CITUS) await seed.query('analyze records; analyze fields');
    } finally {
      await seed.end();
    }
    await putTitle('rt-plan', { value: 'x', expected_version: 0 });
    await run(operations.put, { class: 'ledger', id: 'rt-plan', field: 'title', body: json({ value: 'y', expected_version: 0 }) });
    for (let i = 0; i < 8; i++) {
      // alice's role in incident lists the fields it reads: the rows, rendered by the gateway.
      const got = await run(operations.get, { class: 'incident', id: 'rt-plan' });
      expect(got.statements).toEqual(['[kslate_read_record_some]']);
      // In ledger it reads '*': the same statement, the values as stored (handlers/get.ts).
      const some = await run(operations.get, { class: 'ledger', id: 'rt-plan', fields: 'title,status' });
      expect(some.statements).toEqual(['[kslate_read_record_some]']);
      expect(some.out?.body).toMatchObject({ record: 'ledger/rt-plan', record_version: 1, fields: { title: { value: 'y', version: 1 } } });
      // Every field, its append field among them: the rows.
      const all = await run(operations.get, { class: 'ledger', id: 'rt-plan' });
      expect(all.statements).toEqual(['[kslate_read_record_some]']);
    }
    // The pool has one connection: its prepared statements are the ones the gets used.
    for (const name of CITUS ? [] : ['kslate_read_record_some']) {
      const { rows } = await pool.query<{ generic_plans: string; custom_plans: string }>(
        `select generic_plans, custom_plans from pg_prepared_statements where name = $1`,
        [name],
      );
      expect(rows).toHaveLength(1);
      // The plan cache plans the first five custom, then keeps the generic plan if it costs no more.
      expect(Number(rows[0].generic_plans), name).toBeGreaterThanOrEqual(3);
    }
  });
});

describe('history reads use the record\'s index', () => {
  test('a page of an older record never scans the newer rows of other records', async () => {
    // The bench after its puts: one record with a long, older history, then many newer rows of
    // other records. With the purge check (an `id >` condition on a value unknown at planning)
    // inside the LIMIT, PostgreSQL walked the primary key backwards through every newer row.
    const seed = new pg.Client({ connectionString: t.db.url });
    await seed.connect();
    try {
      const row = (rid: string, n: string) => `
        insert into history (class, rid, field, op, version, record_version, value, author, outcome)
        select 'incident', ${rid}, 'title', 'put', g, g, to_json('v' || g), 'apikey:alice', 'applied' from generate_series(1, ${n}) g`;
      // On Citus the page itself (a smaller seed: every row routed through the coordinator),
      // not its plan (CITUS above).
      await seed.query(row(`'rt-hist'`, CITUS ? '1100' : '20000'));
      await seed.query('analyze history');
      if (!CITUS) await seed.query(row(`'rt-other-' || (g % 20000)`, '180000'));
      await seed.query('analyze history');
      sentWithValues = [];
      const page = await db.readHistory('incident', 'rt-hist', { fields: null, beforeSeq: null, limit: 1000, maxBytes: 4 << 20, mark: 'all' });
      expect(page.count).toBe(1000);
      const text = page.runs.join(',');
      expect(text.match(/\x1e/g)).toHaveLength(1000);
      expect(JSON.parse(`[${text.replace(/[\x1e\x1f]/g, '')}]`)).toHaveLength(1000);
      // The page comes in runs of about 32 KB (no string large enough to be a large object to
      // V8), each holding whole marked rows.
      expect(page.runs.length).toBeGreaterThan(2);
      for (const run of page.runs) {
        expect(run.length).toBeLessThan(64 * 1024);
        expect(run.startsWith('\x1e') && run.endsWith('\x1f')).toBe(true);
      }
      expect(page.more).toBe(true);
      if (CITUS) return;
      const stmt = sentWithValues.find((c) => /from history h/.test(c.text));
      expect(stmt).toBeDefined();
      const { rows } = await seed.query(`explain (analyze, format json) ${stmt!.text}`, stmt!.values);
      const plan = JSON.stringify(rows[0]['QUERY PLAN']);
      expect(plan).toContain('"Index Name":"history_record"');
      // The primary key appears only as the point lookup that renders a row written before
      // migration 0008; these rows were rendered when written, so it never runs.
      const nodes: Record<string, unknown>[] = [];
      const walk = (n: Record<string, unknown>) => {
        nodes.push(n);
        for (const c of (n.Plans as Record<string, unknown>[] | undefined) ?? []) walk(c);
      };
      walk(rows[0]['QUERY PLAN'][0].Plan);
      const pkey = nodes.filter((n) => n['Index Name'] === 'history_pkey');
      for (const n of pkey) expect(n['Actual Loops'], JSON.stringify(n)).toBe(0);
      // No node of the plan read more history rows than a page asks for.
      const removed = [...plan.matchAll(/"Rows Removed by Filter":(\d+)/g)].map((m) => Number(m[1]));
      expect(Math.max(0, ...removed)).toBeLessThan(1000);
    } finally {
      await seed.query(`delete from history where rid = 'rt-hist' or rid like 'rt-other-%'`);
      await seed.end();
    }
  });
});

describe('claims: one statement, HELD included', () => {
  test('take, HELD for another, renew, release: one named statement each; HELD leaves its history row', async () => {
    const sa: Identity = { ...alice, strength: 'sa-bound' };
    const carol: Identity = { author: 'apikey:carol', provider: 'apikey', name: 'carol', strength: 'sa-bound' };
    const claim = (who: Identity, body: Record<string, unknown>) =>
      run(operations.claim, { class: 'incident', id: 'rt-claim', field: 'triage', body: json(body) }, who);
    const take = await claim(sa, { lease_seconds: 60 });
    expect(take.out).toMatchObject({ created: true, body: { owner: 'apikey:alice', version: 1, record_version: 1 } });
    expect(take.statements).toEqual(['[kslate_claim]']);
    const held = await claim(carol, { lease_seconds: 60 });
    expect(held.error?.code).toBe('HELD');
    expect(held.error?.extra).toMatchObject({ owner: 'apikey:alice', version: 1, lease_expires_at: take.out!.body.lease_expires_at });
    expect(held.statements).toEqual(['[kslate_claim]']);
    const renew = await claim(sa, { lease_seconds: 120, renew: true });
    expect(renew.out?.body).toMatchObject({ owner: 'apikey:alice', version: 2, record_version: 2 });
    expect(renew.statements).toEqual(['[kslate_claim]']);
    const release = await claim(sa, { lease_seconds: 0 });
    expect(release.out?.body).toEqual({ record: 'incident/rt-claim', field: 'triage', version: 3, record_version: 3 });
    const h = await t.call('alice', 'GET', '/v1/records/incident/rt-claim/history?field=triage');
    expect(h.body.history.map((r: { op: string; outcome: string }) => `${r.op}/${r.outcome}`)).toEqual([
      'release/applied',
      'claim/applied',
      'claim/held',
      'claim/applied',
    ]);
  });
});

describe('rejections after the lock: the same one statement', () => {
  test('STALE: one statement answers with its diff and writes its history row', async () => {
    await putTitle('rt-stale', { value: 'one', expected_version: 0 });
    const stale = await putTitle('rt-stale', { value: 'two', expected_version: 0 });
    expect(stale.error?.code).toBe('STALE');
    expect(stale.error?.extra).toMatchObject({ current_version: 1, current_value: 'one' });
    expect(stale.statements).toEqual(['[kslate_write]']);
    const h = await t.call('alice', 'GET', '/v1/records/incident/rt-stale/history?field=title');
    expect(h.body.history.map((r: { outcome: string }) => r.outcome)).toEqual(['stale', 'applied']);
  });

  test('a moved premise: STALE_PREMISE in one statement; a premise that holds: applied in one statement', async () => {
    await putTitle('rt-prem', { value: 'one', expected_version: 0 });
    await run(operations.put, { class: 'incident', id: 'rt-prem', field: 'severity', body: json({ value: 2, expected_version: 0 }) });
    const moved = await putTitle('rt-prem', { value: 'two', expected_version: 1, based_on: [{ field: 'severity', version: 0 }] });
    expect(moved.error?.code).toBe('STALE_PREMISE');
    expect(moved.error?.extra).toMatchObject({ current_version: 1, moved: [{ field: 'severity', your_version: 0, current_version: 1 }] });
    expect(moved.statements).toEqual(['[kslate_write]']);
    const holds = await putTitle('rt-prem', { value: 'two', expected_version: 1, based_on: [{ field: 'severity', version: 1 }] });
    expect(holds.out?.body).toMatchObject({ version: 2 });
    expect(holds.statements).toEqual(['[kslate_write]']);
  });

  test('a fence: applied in one statement while the writer holds the lease; refused once another holds it', async () => {
    const sa: Identity = { author: 'apikey:alice', provider: 'apikey', name: 'alice', strength: 'sa-bound' };
    const claim = await run(operations.claim, { class: 'incident', id: 'rt-fence', field: 'triage', body: json({ lease_seconds: 60 }) }, sa);
    expect(claim.out?.body).toMatchObject({ owner: 'apikey:alice' });
    const v = claim.out!.body.version as number;
    const fenced = await putTitle('rt-fence', { value: 'mine', expected_version: 0, based_on: [{ field: 'triage', version: v, kind: 'fence' }] });
    expect(fenced.statements).toEqual(['[kslate_write]']);
    // Carol takes over after the lease is made to expire; alice's fence no longer holds.
    await pool.query(`update fields set lease_expires_at = now() - interval '1 second' where name = 'triage' and class = 'incident'`);
    const carol: Identity = { author: 'apikey:carol', provider: 'apikey', name: 'carol', strength: 'sa-bound' };
    const takeover = await run(operations.claim, { class: 'incident', id: 'rt-fence', field: 'triage', body: json({ lease_seconds: 60 }) }, carol);
    expect(takeover.out?.body).toMatchObject({ owner: 'apikey:carol', took_over_from: 'apikey:alice' });
    const lost = await putTitle('rt-fence', {
      value: 'late',
      expected_version: 1,
      based_on: [{ field: 'triage', version: takeover.out!.body.version as number, kind: 'fence' }],
    });
    expect(lost.error?.code).toBe('STALE_PREMISE');
    expect(lost.statements).toEqual(['[kslate_write]']);
  });

  test('missing evidence: one statement, its history row (it needs nothing of the record); the resolve gate: the write statement', async () => {
    const noEvidence = await run(operations.append, { class: 'incident', id: 'rt-ev', field: 'notes', body: json({ entry: { a: 1 } }) });
    expect(noEvidence.error?.code).toBe('EVIDENCE_REQUIRED');
    expect(noEvidence.statements).toHaveLength(1);
    expect(noEvidence.statements[0]).toMatch(/kslate_add_history/);
    await run(operations.put, { class: 'incident', id: 'rt-gate', field: 'status', body: json({ value: 'open', expected_version: 0 }) });
    const gate = await run(operations.put, { class: 'incident', id: 'rt-gate', field: 'status', body: json({ value: 'resolved', expected_version: 1 }) });
    expect(gate.error?.code).toBe('INVALID_CHECKPOINT');
    expect(gate.statements).toEqual(['[kslate_write]']);
    const h = await t.call('alice', 'GET', '/v1/records/incident/rt-gate/history?field=status');
    expect(h.body.history.map((r: { outcome: string }) => r.outcome)).toEqual(['applied']);
  });
});
