/**
 * The handover story, end to end over real sockets and PostgreSQL: agent A (alice) works a
 * case and stops; its lease lapses; agent B (carol, same role) takes over, picks up A's
 * checkpoint, continues under a fence, meets the resolve gate, and resolves once every
 * required role has checkpointed. The history tells the whole story.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { caseflow } from '../fixtures/flow-classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([caseflow]);
});
afterAll(() => t?.close());

type Res = { status: number; body: any };

const ID = 'outage-42';
const REC = `caseflow/${ID}`;
const P = `/v1/records/caseflow/${ID}`;

const put = (who: string, field: string, body: unknown): Promise<Res> => t.call(who, 'PUT', `${P}/fields/${field}`, body);
const append = (who: string, field: string, body: unknown): Promise<Res> => t.call(who, 'POST', `${P}/fields/${field}/entries`, body);
const claim = (who: string, body: unknown): Promise<Res> => t.call(who, 'PUT', `${P}/fields/task/claim`, body);
const save = (who: string, document: unknown): Promise<Res> => t.call(who, 'PUT', `${P}/checkpoint`, { document });
const load = (who: string): Promise<Res> => t.call(who, 'GET', `${P}/checkpoint`);
const get = (who: string): Promise<Res> => t.call(who, 'GET', P);

function expectStatus(res: Res, status: number): void {
  expect(res.status, JSON.stringify(res.body)?.slice(0, 600)).toBe(status);
}

test('agent A works and stops, agent B takes over from the checkpoint and resolves', async () => {
  // ---- agent A: alice --------------------------------------------------------------
  const c1 = await claim('alice', { lease_seconds: 30 });
  expectStatus(c1, 201);
  expect(c1.body).toMatchObject({ record: REC, field: 'task', owner: 'apikey:alice', version: 1, record_version: 1 });
  expect(c1.body).not.toHaveProperty('took_over_from');

  expectStatus(await put('alice', 'title', { value: 'API outage', expected_version: 0, evidence: 'pager' }), 200);
  expectStatus(await put('alice', 'status', { value: 'investigating', expected_version: 0, evidence: 'ack' }), 200);
  const n1 = await append('alice', 'notes', { entry: { text: 'db connections exhausted' }, evidence: 'pg_stat_activity' });
  expectStatus(n1, 200);
  expect(n1.body).toMatchObject({ seq: 1, record_version: 4 });

  const doc = { summary: 'connection pool exhausted', next_steps: ['raise pool size', 'find the leak'], tried: ['restart'] };
  const s1 = await save('alice', doc);
  expectStatus(s1, 200);
  expect(s1.body).toMatchObject({ record: REC, role: 'responder', record_version: 4 });

  // A keeps working a little after its checkpoint, then stops (and stops renewing).
  expectStatus(await append('alice', 'notes', { entry: { text: 'pool size raised to 50' }, evidence: 'config diff' }), 200);
  expectStatus(await put('alice', 'severity', { value: 2, expected_version: 0, evidence: 'customer impact' }), 200);

  // ---- the lease lapses ------------------------------------------------------------------
  // While A's lease is live, B is refused.
  const held = await claim('carol', { lease_seconds: 300 });
  expectStatus(held, 409);
  expect(held.body).toMatchObject({ error: 'HELD', owner: 'apikey:alice' });
  const c = new pg.Client({ connectionString: t.db.url });
  await c.connect();
  try {
    await c.query(
      `update fields set lease_expires_at = now() - interval '1 second'
       where name = 'task' and record_id = (select id from records where class = 'caseflow' and rid = $1)`,
      [ID],
    );
  } finally {
    await c.end();
  }

  // ---- agent B: carol, same role ------------------------------------------------------
  const c2 = await claim('carol', { lease_seconds: 300 });
  expectStatus(c2, 200);
  expect(c2.body).toMatchObject({ record: REC, field: 'task', owner: 'apikey:carol', took_over_from: 'apikey:alice' });
  const taskVersion: number = c2.body.version;

  const l = await load('carol');
  expectStatus(l, 200);
  expect(l.body).toMatchObject({ record: REC, role: 'responder', document: doc, record_version: 4 });
  // what changed since A's checkpoint: the second note and severity (never the task)
  const changed = [...l.body.changed_fields].sort((a: any, b: any) => a.field.localeCompare(b.field));
  expect(changed).toEqual([
    { field: 'notes', version: 2, author: 'apikey:alice', evidence: 'config diff' },
    { field: 'severity', version: 1, author: 'apikey:alice', evidence: 'customer impact' },
  ]);

  // B continues: a fresh get, then writes with the version read and a fence on the task.
  const g = await get('carol');
  expectStatus(g, 200);
  expect(g.body.fields.task).toMatchObject({ owner: 'apikey:carol', version: taskVersion });
  const fence = { field: 'task', version: g.body.fields.task.version, kind: 'fence' };
  const w = await put('carol', 'title', {
    value: 'API outage: connection leak',
    expected_version: g.body.fields.title.version,
    evidence: 'heap dump',
    based_on: [fence],
  });
  expectStatus(w, 200);
  expect(w.body).toMatchObject({ field: 'title', version: 2 });

  // A wakes up and tries to write under its old claim: its fence no longer holds.
  const zombie = await put('alice', 'severity', {
    value: 1,
    expected_version: 1,
    based_on: [{ field: 'task', version: 1, kind: 'fence' }],
  });
  expectStatus(zombie, 409);
  expect(zombie.body.error).toBe('STALE_PREMISE');

  // B tries to resolve before the reviewer has checkpointed.
  const g2 = await get('carol');
  const statusVersion: number = g2.body.fields.status.version;
  const resolve = { value: 'resolved', expected_version: statusVersion, evidence: 'leak fixed', based_on: [fence] };
  const gated = await put('carol', 'status', resolve);
  expectStatus(gated, 422);
  expect(gated.body).toMatchObject({ error: 'INVALID_CHECKPOINT', field: 'status', record: REC });
  expect(gated.body.message).toContain('reviewer');
  expect((await get('carol')).body.fields.status).toMatchObject({ value: 'investigating', version: statusVersion });

  // B checkpoints too (a newer responder checkpoint), the reviewer checkpoints, B resolves.
  const s2 = await save('carol', { summary: 'leak found in the retry path', next_steps: ['resolve'] });
  expectStatus(s2, 200);
  expect(s2.body.checkpoint_id).toBeGreaterThan(s1.body.checkpoint_id);
  const rv = await save('bob', { summary: 'reviewed the fix', next_steps: [] });
  expectStatus(rv, 200);
  expect(rv.body.role).toBe('reviewer');

  const done = await put('carol', 'status', resolve);
  expectStatus(done, 200);
  expect(done.body).toMatchObject({ record: REC, field: 'status', version: statusVersion + 1 });

  const final = await get('carol');
  expect(final.body.fields.status).toMatchObject({ value: 'resolved', author: 'apikey:carol', based_on: [fence] });
  expect(final.body.record_version).toBe(done.body.record_version);

  // ---- the history tells the story, oldest first ---------------------------------------
  const h = await t.call('carol', 'GET', `${P}/history`);
  expectStatus(h, 200);
  const story = [...h.body.history].reverse().map((r: any) => [r.op, r.field, r.author, r.outcome]);
  expect(story).toEqual([
    ['claim', 'task', 'apikey:alice', 'applied'],
    ['put', 'title', 'apikey:alice', 'applied'],
    ['put', 'status', 'apikey:alice', 'applied'],
    ['append', 'notes', 'apikey:alice', 'applied'],
    ['append', 'notes', 'apikey:alice', 'applied'],
    ['put', 'severity', 'apikey:alice', 'applied'],
    ['claim', 'task', 'apikey:carol', 'held'],
    ['takeover', 'task', 'apikey:carol', 'applied'],
    ['put', 'title', 'apikey:carol', 'applied'],
    ['put', 'severity', 'apikey:alice', 'stale_premise'],
    ['put', 'status', 'apikey:carol', 'applied'],
  ]);
  const rows = [...h.body.history].reverse();
  // applied rows carry rising versions of the record
  const applied = rows.filter((r: any) => r.outcome === 'applied');
  expect(applied.map((r: any) => r.record_version)).toEqual(applied.map((_: any, i: number) => i + 1));
  expect(rows[rows.length - 1]).toMatchObject({ value: 'resolved', expected_version: statusVersion, based_on: [fence] });
  expect(rows[8]).toMatchObject({ value: 'API outage: connection leak', based_on: [fence], evidence: 'heap dump' });
});
