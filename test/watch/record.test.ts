/**
 * The per-record watch (issue 16): GET /v1/records/{class}/{id}/watch as Server-Sent Events
 * over a real socket, against a real PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, TS, type ClassInput, type TestGateway } from '../setup/gateway.js';
import { apiDocument } from '../../runtime/http/openapi.js';
import { eventDataValidator } from '../openapi/check.js';
import { openWatch, type Watch } from './sse.js';

let t: TestGateway;
const open: Watch[] = [];

/** Records that expire a second after their last write. */
const brief: ClassInput = {
  name: 'brief',
  spec: {
    ttl: '1s',
    fields: { title: { kind: 'versioned', type: 'string' } },
    roles: { writer: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
  },
};

beforeAll(async () => {
  t = await startTestGateway([incident, brief], { extraArgs: ['--watch-poll-interval', '20ms', '--watch-heartbeat', '300ms'] });
});
afterAll(async () => {
  for (const w of open) w.close();
  await t?.close();
});

async function watch(who: string, path: string, headers: Record<string, string> = {}): Promise<Watch> {
  const w = await openWatch(t.url, who, path, headers);
  open.push(w);
  return w;
}

const put = async (id: string, field: string, value: unknown, expected_version?: number, who = 'alice') => {
  const r = await t.call(who, 'PUT', `/v1/records/incident/${id}/fields/${field}`, {
    value,
    ...(expected_version !== undefined ? { expected_version } : {}),
  });
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  return r.body;
};

describe('per-record watch', () => {
  test('streams every applied change after from_record_version, in order, with record_version as the id', async () => {
    await put('w1', 'title', 'one', 0);
    await put('w1', 'severity', 2, 0);
    const w = await watch('alice', '/v1/records/incident/w1/watch?from_record_version=0');
    expect(w.status).toBe(200);
    expect(w.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const opened = await w.next();
    expect(opened).toMatchObject({ event: 'open', id: '0', data: { record: 'incident/w1', record_version: 0 } });
    const a = await w.next();
    expect(a).toMatchObject({ event: 'change', id: '1' });
    expect(a.data).toMatchObject({ record: 'incident/w1', field: 'title', op: 'put', version: 1, record_version: 1, value: 'one', author: 'apikey:alice' });
    expect(a.data.created_at).toMatch(TS);
    expect((await w.next()).data).toMatchObject({ field: 'severity', value: 2, record_version: 2 });
    // Live: a change after the stream started.
    await put('w1', 'title', 'two', 1);
    expect((await w.next()).data).toMatchObject({ field: 'title', value: 'two', version: 2, record_version: 3 });
  });

  test('resumes from every position: from_record_version=N and Last-Event-ID=N each give exactly the changes after N', async () => {
    for (let i = 0; i < 6; i++) await put('w2', 'scratch', { i });
    for (let n = 0; n <= 6; n++) {
      const q = await watch('alice', `/v1/records/incident/w2/watch?from_record_version=${n}`);
      const h = await watch('alice', '/v1/records/incident/w2/watch', { 'last-event-id': String(n) });
      // Last-Event-ID wins over the query (a browser's EventSource reconnects with both).
      const both = await watch('alice', '/v1/records/incident/w2/watch?from_record_version=0', { 'last-event-id': String(n) });
      for (const w of [q, h, both]) {
        const events = await w.until(1 + 6 - n);
        expect(events[0]).toMatchObject({ event: 'open', id: String(n) });
        expect(events.slice(1).map((e) => e.id)).toEqual(Array.from({ length: 6 - n }, (_, k) => String(n + k + 1)));
        expect(events.slice(1).map((e) => e.data.value.i)).toEqual(Array.from({ length: 6 - n }, (_, k) => n + k));
        w.close();
      }
    }
  });

  test('without from_record_version it starts at the current version', async () => {
    await put('w3', 'title', 'a', 0);
    await put('w3', 'title', 'b', 1);
    const w = await watch('alice', '/v1/records/incident/w3/watch');
    expect(await w.next()).toMatchObject({ event: 'open', id: '2' });
    await put('w3', 'title', 'c', 2);
    expect(await w.next()).toMatchObject({ event: 'change', id: '3', data: { value: 'c' } });
    expect(w.events).toHaveLength(2);
  });

  test('appends and soft puts render as get and history render them; rejected writes never appear', async () => {
    await put('w4', 'title', 'x', 0);
    const w = await watch('alice', '/v1/records/incident/w4/watch?from_record_version=0');
    // A STALE rejection leaves a history row but is not a change.
    expect((await t.call('alice', 'PUT', '/v1/records/incident/w4/fields/title', { value: 'y', expected_version: 0 })).status).toBe(409);
    const app = await t.call('alice', 'POST', '/v1/records/incident/w4/fields/notes/entries', {
      entry: { text: 'seen' },
      evidence: 'the log',
      based_on: [{ field: 'title', version: 1 }],
    });
    expect(app.status).toBe(200);
    await put('w4', 'scratch', { s: 1 });
    const events = await w.until(4);
    expect(events.slice(1).map((e) => e.data.field)).toEqual(['title', 'notes', 'scratch']);
    expect(events[2].data).toMatchObject({ op: 'append', version: 1, value: { text: 'seen' }, evidence: 'the log', based_on: [{ field: 'title', version: 1 }] });
    expect(events[3].data).toMatchObject({ op: 'put', value: { s: 1 }, record_version: 3 });
  });

  test('a role sees only the changes of fields it may read, and only premises on them', async () => {
    await put('w5', 'status', 'open', 0);
    const w = await watch('bob', '/v1/records/incident/w5/watch?from_record_version=1');
    expect(w.status).toBe(200);
    await put('w5', 'severity', 3, 0); // bob (reviewer) may not read severity
    await put('w5', 'secret', 's', 0); // nobody may read secret
    const r = await t.call('alice', 'PUT', '/v1/records/incident/w5/fields/title', {
      value: 'shown',
      expected_version: 0,
      based_on: [{ field: 'severity', version: 1 }],
    });
    expect(r.status).toBe(200);
    const events = await w.until(2);
    await new Promise((res) => setTimeout(res, 300));
    expect(w.events.map((e) => e.event)).toEqual(['open', 'change']);
    expect(events[1]).toMatchObject({ id: '4', data: { field: 'title', value: 'shown', record_version: 4 } });
    expect(events[1].data.based_on).toBeUndefined();
    // The responder sees severity but not secret (outside every role's read list).
    const a = await watch('alice', '/v1/records/incident/w5/watch?from_record_version=0');
    const seen = await a.until(4);
    expect(seen.slice(1).map((e) => e.data.field)).toEqual(['status', 'severity', 'title']);
    expect(seen[3].data.based_on).toEqual([{ field: 'severity', version: 1 }]);
  });

  test('sends heartbeats (comment lines) while nothing changes', async () => {
    await put('w6', 'title', 'a', 0);
    const w = await watch('alice', '/v1/records/incident/w6/watch');
    await w.next();
    await new Promise((r) => setTimeout(r, 1_000));
    expect(w.comments).toBeGreaterThanOrEqual(2);
    expect(w.events).toHaveLength(1);
  });

  test('every refusal is a JSON error before any stream, through the ordinary request lifecycle', async () => {
    await put('w7', 'title', 'a', 0);
    const cases: [string | null, string, number, string][] = [
      ['nobody-key', '/v1/records/incident/w7/watch', 401, 'UNAUTHENTICATED'],
      ['dave', '/v1/records/incident/w7/watch', 403, 'NO_ROLE'],
      ['alice', '/v1/records/nope/w7/watch', 404, 'NOT_FOUND'],
      ['alice', '/v1/records/incident/NOT_OK/watch', 400, 'MALFORMED'],
      ['alice', '/v1/records/incident/never-written/watch', 404, 'NOT_FOUND'],
      ['alice', '/v1/records/incident/never-written/watch?from_record_version=0', 404, 'NOT_FOUND'],
      ['alice', '/v1/records/incident/w7/watch?from_record_version=-1', 400, 'MALFORMED'],
      ['alice', '/v1/records/incident/w7/watch?from_record_version=1e3', 400, 'MALFORMED'],
      ['alice', '/v1/records/incident/w7/watch?from=1', 400, 'MALFORMED'],
      ['alice', '/v1/records/incident/w7/watch?from_record_version=1&from_record_version=2', 400, 'MALFORMED'],
    ];
    for (const [who, path, status, code] of cases) {
      const w = await watch(who!, path);
      expect(w.status, path).toBe(status);
      expect(w.headers.get('content-type')).toMatch(/^application\/json/);
      expect(w.headers.get('x-request-id')).toBeTruthy();
      expect(w.body).toMatchObject({ error: code });
      expect(typeof w.body.message).toBe('string');
    }
    const bad = await watch('alice', '/v1/records/incident/w7/watch', { 'last-event-id': 'abc' });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('Last-Event-ID');
    // The route takes GET only.
    const post = await t.call('alice', 'POST', '/v1/records/incident/w7/watch');
    expect(post.status).toBe(405);
  });

  test('a record that expires and is written again ends its stream (recreated): the new record restarts at record_version 1', async () => {
    const at = (v: number) => t.call('alice', 'PUT', '/v1/records/brief/x/fields/title', { value: `v${v}`, expected_version: v });
    expect((await at(0)).status).toBe(201);
    expect((await at(1)).status).toBe(200);
    const w = await watch('alice', '/v1/records/brief/x/watch');
    expect(await w.next()).toMatchObject({ event: 'open', id: '2' });
    await new Promise((r) => setTimeout(r, 1_300));
    const swept = await t.gw.services.sweepOnce();
    expect(swept.expired?.records).toBe(1);
    const again = await at(0);
    expect(again.status).toBe(201);
    expect(again.body.record_version).toBe(1);
    await w.ended();
    expect(w.events.map((e) => e.event)).toEqual(['open', 'end']);
    expect(w.events[1].data).toMatchObject({ reason: 'recreated' });
    expect(w.events[1].data.message).toContain('from_record_version=0');
    // Reconnecting from 0 shows the new record's changes.
    const r = await watch('alice', '/v1/records/brief/x/watch?from_record_version=0');
    const got = await r.until(2);
    expect(got[1].data).toMatchObject({ value: 'v0', record_version: 1 });
  });
});

test('every event data of this file validates against the OpenAPI document (x-event-data)', () => {
  const valid = eventDataValidator(apiDocument(), 'GET', '/v1/records/{class}/{id}/watch');
  const events = open.flatMap((w) => w.events);
  expect(events.length).toBeGreaterThan(20);
  for (const e of events) expect(valid(e.data), JSON.stringify(e)).toBeNull();
});
