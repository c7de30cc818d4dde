/**
 * The per-class watch (issue 16): GET /v1/classes/{class}/watch, resumable by an opaque
 * cursor, in the change log's order (migration 0007), never past a transaction still open.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { apiDocument } from '../../runtime/http/openapi.js';
import { eventDataValidator } from '../openapi/check.js';
import { openWatch, type Watch } from './sse.js';
import { CITUS, nodePort as citusNodePort, onNodeOf as citusOnNodeOf } from '../setup/citus.js';

let t: TestGateway;
const open: Watch[] = [];
const clients: pg.Client[] = [];

beforeAll(async () => {
  t = await startTestGateway([incident], { extraArgs: ['--watch-poll-interval', '20ms'] });
});
afterAll(async () => {
  for (const w of open) w.close();
  for (const c of clients) await c.end().catch(() => undefined);
  await t?.close();
});

async function watch(who: string, path: string, headers: Record<string, string> = {}, url = t.url): Promise<Watch> {
  const w = await openWatch(url, who, path, headers);
  if (CITUS) {
    // Each poll asks every node for its oldest running transaction and reads each node's log
    // through the coordinator: on a loaded 2-core machine running three nodes, 10 s was not
    // always enough for an event.
    const until = w.until;
    w.until = (n, ms = 60_000) => until(n, ms);
  }
  open.push(w);
  return w;
}

const soft = async (id: string, value: unknown) => {
  const r = await t.call('alice', 'PUT', `/v1/records/incident/${id}/fields/scratch`, { value });
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
};

async function pgClient(url = t.db.url): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  clients.push(c);
  return c;
}


/**
 * A client for writing `rid`'s history rows behind the gateway's back, on the node kslate
 * writes them on. On Citus that is the worker holding the record's shard (kslate_add_history
 * runs there, delegated): an insert through the coordinator would draw its id from the
 * coordinator's range (group 0) and its transaction id from the coordinator, a row kslate
 * never writes, and the watch reads each node group's range below that node's oldest running
 * transaction (db/kysely/change-log.ts). On the worker, `history` routes to the local shard.
 */
async function historyWriter(rid: string): Promise<pg.Client> {
  if (!CITUS) return pgClient();
  const url = new URL(t.db.url);
  url.port = String(await nodePort(rid));
  return pgClient(url.toString());
}

const nodePort = (rid: string) => citusNodePort(t.db.url, rid);
const onNodeOf = (rid: string, base: string) => citusOnNodeOf(t.db.url, rid, base);

describe('per-class watch', () => {
  test('without `from` it starts now; every change of every record follows, each with a cursor id', async () => {
    await soft('c0', { before: true });
    const w = await watch('alice', '/v1/classes/incident/watch');
    expect(w.status).toBe(200);
    const opened = await w.next();
    expect(opened).toMatchObject({ event: 'open', data: { class: 'incident' } });
    expect(opened.id).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    // On Citus c2 on c1's node: one node group's log is one order (test/setup/citus.ts onNodeOf).
    const c2 = await onNodeOf('c1', 'c2');
    await soft('c1', 1);
    await soft(c2, 2);
    await soft('c1', 3);
    // "Now" is the log's frontier, just under the oldest transaction running (docs/watch.md):
    // the change committed right before the open may lead the stream when some older
    // transaction was still running at that moment (on Citus, another file's on the shared
    // cluster's worker). Only it may, only first, and everything after the open follows.
    const lead = (await w.until(2))[1].data.record === 'incident/c0' ? 1 : 0;
    const events = (await w.until(4 + lead)).slice(0, 4 + lead);
    if (lead) expect(events[1].data.value).toEqual({ before: true });
    expect(events.slice(1 + lead).map((e) => [e.data.record, e.data.value])).toEqual([
      ['incident/c1', 1],
      [`incident/${c2}`, 2],
      ['incident/c1', 3],
    ]);
    expect(new Set(events.map((e) => e.id)).size).toBe(4 + lead);
  });

  test('resumes from every cursor (from= and Last-Event-ID) with exactly the changes after it', async () => {
    const w = await watch('alice', '/v1/classes/incident/watch');
    await w.next();
    // On Citus both records on one node, so the live stream and each resume see one order.
    const ids = ['r0', await onNodeOf('r0', 'r1')];
    for (let i = 0; i < 5; i++) await soft(ids[i % 2], { i });
    const events = await w.until(6);
    for (let k = 0; k < events.length; k++) {
      const rest = events.slice(k + 1).map((e) => e.data.value.i);
      const q = await watch('alice', `/v1/classes/incident/watch?from=${encodeURIComponent(events[k].id!)}`);
      const h = await watch('alice', '/v1/classes/incident/watch', { 'last-event-id': events[k].id! });
      for (const r of [q, h]) {
        const got = await r.until(1 + rest.length);
        expect(got[0]).toMatchObject({ event: 'open', id: events[k].id });
        expect(got.slice(1).map((e) => e.data.value.i)).toEqual(rest);
        // One log position on plain PostgreSQL: the same change has the same id on every
        // stream. On Citus an id is the stream's position in every node group's log, which a
        // catch-up read and a poll-by-poll stream write differently for the same change
        // (docs/scale-out.md "Class watch ids"); there each id's own resume is what must hold,
        // and the loop over k checks it for the first stream's ids.
        if (!CITUS) expect(got.slice(1).map((e) => e.id)).toEqual(events.slice(k + 1).map((e) => e.id));
        r.close();
      }
    }
  });

  test('never delivers past a transaction still open; delivers both in order once it commits', async () => {
    const w = await watch('alice', '/v1/classes/incident/watch');
    await w.next();
    const held = await historyWriter('held');
    await held.query('begin');
    // An applied change whose transaction stays open (it takes its transaction id now).
    await held.query(
      `insert into history (class, rid, field, op, version, record_version, value, author, outcome)
       values ('incident', 'held', 'scratch', 'put', 1, 1, '"held"', 'apikey:alice', 'applied')`,
    );
    // A later transaction commits first (on Citus, on the same node).
    const laterId = await onNodeOf('held', 'later');
    await soft(laterId, 'later');
    const later = await t.call('alice', 'GET', `/v1/records/incident/${laterId}/history`);
    expect(later.body.history).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 500));
    expect(w.events).toHaveLength(1);
    await held.query('commit');
    const events = await w.until(3);
    expect(events.slice(1).map((e) => e.data.value)).toEqual(['held', 'later']);
  });

  test("another database's open transaction on the same server does not hold the log back", async () => {
    // The frontier is this database's oldest running transaction, not the server's
    // (db/kysely/change-log.ts DB_XMIN_SQL). On Citus the other transaction runs on the
    // record's worker, whose log group it would hold back.
    const w = await watch('alice', '/v1/classes/incident/watch');
    await w.next();
    const url = new URL(t.db.url);
    if (CITUS) url.port = String(await nodePort('elsewhere'));
    url.pathname = '/postgres';
    const other = await pgClient(url.toString());
    await other.query('begin');
    const { rows } = await other.query(`select pg_current_xact_id()::text as x`);
    expect(Number(rows[0].x)).toBeGreaterThan(0);
    try {
      await soft('elsewhere', 'not held');
      // Without the per-database frontier this waits until the other transaction ends.
      const events = await w.until(2);
      expect(events[1].data).toMatchObject({ record: 'incident/elsewhere', value: 'not held' });
    } finally {
      await other.query('rollback');
    }
  });

  test('a rolled-back transaction never appears and does not hold the log back', async () => {
    const w = await watch('alice', '/v1/classes/incident/watch');
    await w.next();
    const c = await historyWriter('ghost');
    await c.query('begin');
    await c.query(
      `insert into history (class, rid, field, op, version, record_version, value, author, outcome)
       values ('incident', 'ghost', 'scratch', 'put', 1, 1, '"ghost"', 'apikey:alice', 'applied')`,
    );
    await soft('after-ghost', 'real');
    await c.query('rollback');
    const events = await w.until(2);
    expect(events[1].data).toMatchObject({ record: 'incident/after-ghost', value: 'real' });
    await new Promise((r) => setTimeout(r, 200));
    expect(w.events).toHaveLength(2);
  });

  test('a role sees only the changes of fields it may read', async () => {
    const w = await watch('bob', '/v1/classes/incident/watch');
    await w.next();
    await t.call('alice', 'PUT', '/v1/records/incident/sc1/fields/severity', { value: 1, expected_version: 0 });
    await t.call('alice', 'PUT', '/v1/records/incident/sc1/fields/title', { value: 'seen', expected_version: 0 });
    const events = await w.until(2);
    await new Promise((r) => setTimeout(r, 200));
    expect(w.events.slice(1).map((e) => e.data.field)).toEqual(['title']);
    expect(events[1].data).toMatchObject({ record: 'incident/sc1', value: 'seen', record_version: 2 });
  });

  test('refusals are JSON errors: unknown class, NO_ROLE, a forged or foreign cursor, unknown parameters', async () => {
    const w = await watch('alice', '/v1/classes/incident/watch');
    const { id } = await w.next();
    const cases: [string, string, Record<string, string>, number, string][] = [
      ['alice', '/v1/classes/nope/watch', {}, 404, 'NOT_FOUND'],
      ['dave', '/v1/classes/incident/watch', {}, 403, 'NO_ROLE'],
      ['nobody-key', '/v1/classes/incident/watch', {}, 401, 'UNAUTHENTICATED'],
      ['alice', '/v1/classes/incident/watch?from=abc', {}, 400, 'MALFORMED'],
      ['alice', `/v1/classes/incident/watch?from=${id!.slice(0, -2)}xx`, {}, 400, 'MALFORMED'],
      ['alice', '/v1/classes/incident/watch', { 'last-event-id': '7' }, 400, 'MALFORMED'],
      ['alice', '/v1/classes/incident/watch?limit=3', {}, 400, 'MALFORMED'],
    ];
    for (const [who, path, headers, status, code] of cases) {
      const r = await watch(who, path, headers);
      expect(r.status, path).toBe(status);
      expect(r.body).toMatchObject({ error: code });
    }
    // A history cursor is not a watch cursor.
    await soft('hc', 1);
    await soft('hc', 2);
    const page = await t.call('alice', 'GET', '/v1/records/incident/hc/history?limit=1');
    const foreign = await watch('alice', `/v1/classes/incident/watch?from=${page.body.next_before}`);
    expect(foreign.body).toMatchObject({ error: 'MALFORMED' });
  });
});

describe('roles change while a stream is open', () => {
  test('a caller removed from every role of the class gets a last `end` (revoked) at its next event', async () => {
    await soft('rv', 1);
    const w = await watch('bob', '/v1/classes/incident/watch');
    await w.next();
    const without = { ...incident, spec: { ...incident.spec, roles: { responder: incident.spec.roles.responder } } };
    t.writeClasses([without]);
    try {
      await t.gw.services.reconcileOnce();
      await new Promise((r) => setTimeout(r, 1_100)); // the role re-check runs at most once a second
      await t.call('alice', 'PUT', '/v1/records/incident/rv/fields/title', { value: 'hidden now', expected_version: 0 });
      await w.ended();
      expect(w.events.map((e) => e.event)).toEqual(['open', 'end']);
      expect(w.events[1].data).toMatchObject({ reason: 'revoked' });
    } finally {
      t.writeClasses([incident]);
      await t.gw.services.reconcileOnce();
    }
  });
});

describe('the retained window', () => {
  test('a cursor older than --watch-retention answers 410 EXPIRED with the oldest cursor still available', async () => {
    // The window must hold the write below, the 410 and the resume: 1 s did not on a loaded
    // Citus run (load average 28; a put and the 410's per-node reads took ~0.2-0.3 s each at
    // load 7). The old cursor's expiry is waited for, not guessed: it is asked until it is 410.
    const short = await startTestGateway([incident], { db: t.db, extraArgs: ['--watch-retention', '4s', '--watch-poll-interval', '20ms'] });
    try {
      const w = await watch('alice', '/v1/classes/incident/watch', {}, short.url);
      const { id: old } = await w.next();
      w.close();
      const from = `/v1/classes/incident/watch?from=${encodeURIComponent(old!)}`;
      for (const deadline = Date.now() + 20_000; ; ) {
        const x = await openWatch(short.url, 'alice', from);
        x.close();
        if (x.status === 410) break;
        expect(x.status).toBe(200);
        if (Date.now() > deadline) throw new Error('the old cursor did not expire within 20 s of a 4 s window');
        await new Promise((r) => setTimeout(r, 250));
      }
      await soft('fresh', 'inside the window');
      const e = await watch('alice', from, {}, short.url);
      expect(e.status).toBe(410);
      expect(e.body).toMatchObject({ error: 'EXPIRED', class: 'incident' });
      expect(typeof e.body.oldest).toBe('string');
      expect(e.body.message).toContain('retained window');
      // The oldest cursor resumes, and the change inside the window follows it.
      const r = await watch('alice', '/v1/classes/incident/watch', { 'last-event-id': e.body.oldest }, short.url);
      expect(r.status).toBe(200);
      const got = await r.until(2);
      expect(got[1].data).toMatchObject({ record: 'incident/fresh', value: 'inside the window' });
    } finally {
      await short.close();
    }
  });
});

test('every event data of this file validates against the OpenAPI document (x-event-data)', () => {
  const valid = eventDataValidator(apiDocument(), 'GET', '/v1/classes/{class}/watch');
  const events = open.flatMap((w) => w.events);
  expect(events.length).toBeGreaterThan(20);
  for (const e of events) expect(valid(e.data), JSON.stringify(e)).toBeNull();
});
