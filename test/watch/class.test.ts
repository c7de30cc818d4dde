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
  open.push(w);
  return w;
}

const soft = async (id: string, value: unknown) => {
  const r = await t.call('alice', 'PUT', `/v1/records/incident/${id}/fields/scratch`, { value });
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
};

async function pgClient(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: t.db.url });
  await c.connect();
  clients.push(c);
  return c;
}

describe('per-class watch', () => {
  test('without `from` it starts now; every change of every record follows, each with a cursor id', async () => {
    await soft('c0', { before: true });
    const w = await watch('alice', '/v1/classes/incident/watch');
    expect(w.status).toBe(200);
    const opened = await w.next();
    expect(opened).toMatchObject({ event: 'open', data: { class: 'incident' } });
    expect(opened.id).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    await soft('c1', 1);
    await soft('c2', 2);
    await soft('c1', 3);
    const events = await w.until(4);
    expect(events.slice(1).map((e) => [e.data.record, e.data.value])).toEqual([
      ['incident/c1', 1],
      ['incident/c2', 2],
      ['incident/c1', 3],
    ]);
    expect(new Set(events.map((e) => e.id)).size).toBe(4);
  });

  test('resumes from every cursor (from= and Last-Event-ID) with exactly the changes after it', async () => {
    const w = await watch('alice', '/v1/classes/incident/watch');
    await w.next();
    for (let i = 0; i < 5; i++) await soft(`r${i % 2}`, { i });
    const events = await w.until(6);
    for (let k = 0; k < events.length; k++) {
      const rest = events.slice(k + 1).map((e) => e.data.value.i);
      const q = await watch('alice', `/v1/classes/incident/watch?from=${encodeURIComponent(events[k].id!)}`);
      const h = await watch('alice', '/v1/classes/incident/watch', { 'last-event-id': events[k].id! });
      for (const r of [q, h]) {
        const got = await r.until(1 + rest.length);
        expect(got[0]).toMatchObject({ event: 'open', id: events[k].id });
        expect(got.slice(1).map((e) => e.data.value.i)).toEqual(rest);
        expect(got.slice(1).map((e) => e.id)).toEqual(events.slice(k + 1).map((e) => e.id));
        r.close();
      }
    }
  });

  test('never delivers past a transaction still open; delivers both in order once it commits', async () => {
    const w = await watch('alice', '/v1/classes/incident/watch');
    await w.next();
    const held = await pgClient();
    await held.query('begin');
    // An applied change whose transaction stays open (it takes its transaction id now).
    await held.query(
      `insert into history (class, rid, field, op, version, record_version, value, author, outcome)
       values ('incident', 'held', 'scratch', 'put', 1, 1, '"held"', 'apikey:alice', 'applied')`,
    );
    // A later transaction commits first.
    await soft('later', 'later');
    const later = await t.call('alice', 'GET', '/v1/records/incident/later/history');
    expect(later.body.history).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 500));
    expect(w.events).toHaveLength(1);
    await held.query('commit');
    const events = await w.until(3);
    expect(events.slice(1).map((e) => e.data.value)).toEqual(['held', 'later']);
  });

  test('a rolled-back transaction never appears and does not hold the log back', async () => {
    const w = await watch('alice', '/v1/classes/incident/watch');
    await w.next();
    const c = await pgClient();
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
    const short = await startTestGateway([incident], { db: t.db, extraArgs: ['--watch-retention', '1s', '--watch-poll-interval', '20ms'] });
    try {
      const w = await watch('alice', '/v1/classes/incident/watch', {}, short.url);
      const { id: old } = await w.next();
      await new Promise((r) => setTimeout(r, 1_200));
      await soft('fresh', 'inside the window');
      const e = await watch('alice', `/v1/classes/incident/watch?from=${encodeURIComponent(old!)}`, {}, short.url);
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
