/**
 * transaction: POST /v1/records/{class}/{id}/transactions (issue 33 item 2), against a real
 * gateway and PostgreSQL: all or nothing with one record_version, a rejection is the failing
 * write's own body plus `index`, later writes see earlier ones, history rows of the attempt,
 * racing single puts never interleave, the 1..64 bounds and malformed bodies.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { tasks } from '../fixtures/task-classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
let sql: pg.Client;
beforeAll(async () => {
  t = await startTestGateway([tasks, incident]);
  sql = new pg.Client({ connectionString: t.db.url });
  await sql.connect();
});
afterAll(async () => {
  await sql?.end();
  await t?.close();
});

type Res = { status: number; body: any };
let n = 0;
const fresh = (prefix = 'tx') => `${prefix}-${++n}`;

const txn = (who: string, id: string, body: unknown, cls = 'tasks'): Promise<Res> =>
  t.call(who, 'POST', `/v1/records/${cls}/${id}/transactions`, body);
const put = (who: string, id: string, field: string, body: unknown, cls = 'tasks'): Promise<Res> =>
  t.call(who, 'PUT', `/v1/records/${cls}/${id}/fields/${field}`, body);
const get = async (id: string, cls = 'tasks'): Promise<any> => (await t.call('alice', 'GET', `/v1/records/${cls}/${id}`)).body;
async function history(id: string, cls = 'tasks'): Promise<any[]> {
  const h = await t.call('alice', 'GET', `/v1/records/${cls}/${id}/history`);
  expect(h.status, JSON.stringify(h.body)).toBe(200);
  return h.body.history.slice().reverse(); // oldest first
}

describe('all or nothing', () => {
  test('every write applied with one record_version; history rows carry the transaction id', async () => {
    const id = fresh();
    const r = await txn('alice', id, {
      evidence: 'seen in the logs',
      // A key named like the row's own: the rendered row's transaction goes before the real one.
      invocation: { outcome: 'x', run: 'r1' },
      writes: [
        { op: 'put', field: 'title', value: 'first', expected_version: 0 },
        { op: 'put', field: 'memo', value: { a: 1 } },
        { op: 'append', field: 'log', entry: 'one' },
        { op: 'append', field: 'log', entry: 'two' },
        { op: 'claim', field: 'job' },
      ],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toMatchObject({
      record: `tasks/${id}`,
      record_version: 1,
      writes: [
        { op: 'put', field: 'title', version: 1 },
        { op: 'put', field: 'memo', version: 1 },
        { op: 'append', field: 'log', seq: 1 },
        { op: 'append', field: 'log', seq: 2 },
        { op: 'claim', field: 'job', owner: 'apikey:alice', version: 1 },
      ],
    });
    expect(r.body.transaction).toMatch(/^[0-9a-f-]{36}$/);
    const rec = await get(id);
    expect(rec.record_version).toBe(1);
    expect(rec.fields.title).toMatchObject({ value: 'first', version: 1, evidence: 'seen in the logs' });
    expect(rec.fields.log.entries.map((e: any) => e.value)).toEqual(['one', 'two']);
    const h = await history(id);
    expect(h).toHaveLength(5);
    h.forEach((row, i) => {
      expect(row).toMatchObject({ outcome: 'applied', record_version: 1, transaction: { id: r.body.transaction, index: i } });
      expect(row.invocation).toEqual({ outcome: 'x', run: 'r1' });
      expect(row.transaction.failed_index).toBeUndefined();
    });
    // A second transaction raises the record version once.
    const r2 = await txn('alice', id, { writes: [{ op: 'put', field: 'title', value: 'second', expected_version: 1 }, { op: 'append', field: 'log', entry: 'three', evidence: 'e' }] });
    expect(r2.status, JSON.stringify(r2.body)).toBe(200);
    expect(r2.body.record_version).toBe(2);
  });

  test('the 5th write STALE: nothing changes, the answer is the STALE body with index 4', async () => {
    const id = fresh();
    await put('alice', id, 'title', { value: 'base', expected_version: 0 });
    await t.call('alice', 'POST', `/v1/records/tasks/${id}/fields/log/entries`, { entry: 'e0', evidence: 'x' });
    const before = await get(id);
    const alone = await put('alice', id, 'title', { value: 'mine', expected_version: 0 });
    const r = await txn('alice', id, {
      writes: [
        { op: 'put', field: 'memo', value: 'm' },
        { op: 'append', field: 'log', entry: 'e1', evidence: 'x' },
        { op: 'claim', field: 'job' },
        { op: 'append', field: 'counts', entry: 7, evidence: 'x' },
        { op: 'put', field: 'title', value: 'mine', expected_version: 0 },
      ],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    const { index, ...rest } = r.body;
    expect(index).toBe(4);
    // Exactly the body the write alone gets (its message too).
    expect(rest).toEqual(alone.body);
    const after = await get(id);
    expect(after).toEqual(before);
    const h = (await history(id)).filter((row) => row.transaction);
    expect(h.map((row) => row.outcome)).toEqual(['not_applied', 'not_applied', 'not_applied', 'not_applied', 'stale']);
    expect(h[0].transaction).toMatchObject({ index: 0, failed_index: 4 });
    expect(h[4].transaction).toMatchObject({ index: 4 });
    expect(h[4].transaction.failed_index).toBeUndefined();
    expect(h[4]).toMatchObject({ value: 'mine', expected_version: 0, record_version: before.record_version });
  });

  test('HELD inside a transaction: the HELD body plus index, the other writes not applied', async () => {
    const id = fresh();
    await t.call('bob', 'PUT', `/v1/records/tasks/${id}/fields/job/claim`, {});
    const alone = await t.call('alice', 'PUT', `/v1/records/tasks/${id}/fields/job/claim`, {});
    expect(alone.status).toBe(409);
    const r = await txn('alice', id, { writes: [{ op: 'put', field: 'memo', value: 1 }, { op: 'claim', field: 'job' }] });
    expect(r.status).toBe(409);
    expect(r.body).toEqual({ ...alone.body, index: 1 });
    expect((await get(id)).fields.memo).toBeUndefined();
  });

  test('STALE_PREMISE and the resolve gate inside a transaction', async () => {
    const id = fresh();
    await put('alice', id, 'status', { value: 'open', expected_version: 0 }, 'incident');
    await put('alice', id, 'severity', { value: 2, expected_version: 0 }, 'incident');
    const premise = [{ field: 'severity', version: 1 }];
    // Write 0 moves severity: write 1's premise, judged after it, has moved.
    const r = await txn('alice', id, {
      writes: [
        { op: 'put', field: 'severity', value: 3, expected_version: 1 },
        { op: 'put', field: 'title', value: 't', expected_version: 0, based_on: premise },
      ],
    }, 'incident');
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body).toMatchObject({ error: 'STALE_PREMISE', index: 1, field: 'title', moved: [{ field: 'severity', your_version: 1, current_version: 2 }] });
    expect((await get(id, 'incident')).fields.severity.version).toBe(1);

    // The resolve gate: no checkpoint of the responder role → INVALID_CHECKPOINT, no history rows.
    const rows = (await history(id, 'incident')).length;
    const alone = await put('alice', id, 'status', { value: 'resolved', expected_version: 1 }, 'incident');
    const g = await txn('alice', id, { writes: [{ op: 'put', field: 'scratch', value: 1 }, { op: 'put', field: 'status', value: 'resolved', expected_version: 1 }] }, 'incident');
    expect(g.status).toBe(422);
    expect(g.body).toEqual({ ...alone.body, index: 1 });
    expect(await history(id, 'incident')).toHaveLength(rows);
  });

  test('later writes see earlier ones: claim, then put fenced by the claim', async () => {
    const id = fresh();
    const r = await txn('alice', id, {
      writes: [
        { op: 'claim', field: 'job', lease_seconds: 60 },
        { op: 'put', field: 'title', value: 'working', expected_version: 0, based_on: [{ field: 'job', version: 1, kind: 'fence' }] },
        { op: 'put', field: 'title', value: 'again', expected_version: 1 },
      ],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect((await get(id)).fields.title).toMatchObject({ value: 'again', version: 2 });
    // Without the claim the fence does not hold: bob holds nothing.
    const f = await txn('bob', id, { writes: [{ op: 'put', field: 'memo', value: 1, based_on: [{ field: 'job', version: 1, kind: 'fence' }] }] });
    expect(f.body).toMatchObject({ error: 'STALE_PREMISE', index: 0 });
  });

  test('a refusal before the lock at a later write: earlier STALE wins; EVIDENCE_REQUIRED leaves the attempt in history', async () => {
    const id = fresh();
    await put('alice', id, 'title', { value: 'a', expected_version: 0 });
    const s = await txn('alice', id, {
      writes: [
        { op: 'put', field: 'title', value: 'b', expected_version: 5 },
        { op: 'append', field: 'notes', entry: {} },
      ],
    });
    expect(s.body).toMatchObject({ error: 'STALE', index: 0 });
    const e = await txn('alice', id, {
      writes: [
        { op: 'put', field: 'title', value: 'b', expected_version: 1 },
        { op: 'append', field: 'notes', entry: { x: 1 } },
      ],
    });
    expect(e.status).toBe(422);
    expect(e.body).toMatchObject({ error: 'EVIDENCE_REQUIRED', index: 1, field: 'notes' });
    const h = (await history(id)).slice(-2);
    expect(h.map((row) => row.outcome)).toEqual(['not_applied', 'evidence_required']);
    expect((await get(id)).fields.title.version).toBe(1);
  });
});

describe('malformed bodies and bounds', () => {
  test.each([
    [{}, /writes/],
    [{ writes: [] }, /1 to 64 writes; it holds 0/],
    [{ writes: Array.from({ length: 65 }, () => ({ op: 'put', field: 'memo', value: 1 })) }, /1 to 64 writes; it holds 65/],
    [{ writes: 'x' }, /writes/],
    [{ writes: [{ op: 'delete', field: 'memo' }] }, /writes\[0\]\.op must be/],
    [{ writes: [{ op: 'put', value: 1 }] }, /writes\[0\]\.field/],
    [{ writes: [1] }, /writes\[0\] must be an object/],
    [{ writes: [{ op: 'put', field: 'memo', value: 1 }], extra: true }, /extra/],
    [{ writes: [{ op: 'put', field: 'memo', value: 1, lease_seconds: 3 }] }, /lease_seconds/],
  ])('%j → 400 MALFORMED', async (body, message) => {
    const id = fresh();
    const r = await txn('alice', id, body);
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.error).toBe('MALFORMED');
    expect(r.body.message).toMatch(message);
    expect((await t.call('alice', 'GET', `/v1/records/tasks/${id}/history`)).status).toBe(404);
  });

  test('64 writes are taken', async () => {
    const id = fresh();
    const r = await txn('alice', id, { writes: Array.from({ length: 64 }, (_, i) => ({ op: 'append', field: 'counts', entry: i, evidence: 'e' })) });
    expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(201);
    expect((await get(id)).fields.counts.version).toBe(64);
  });

  test('not JSON → 400', async () => {
    const r = await t.call('alice', 'POST', `/v1/records/tasks/${fresh()}/transactions`, '{"writes": [');
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('MALFORMED');
  });
});

describe('concurrency', () => {
  test('a transaction racing single puts never interleaves (replay the history)', async () => {
    const id = fresh();
    await txn('alice', id, { writes: [{ op: 'put', field: 'title', value: 'v0', expected_version: 0 }, { op: 'put', field: 'memo', value: 'v0' }] });
    // Each transaction writes title and memo to the same value; single puts write one of them.
    const jobs: Promise<Res>[] = [];
    for (let i = 0; i < 12; i++) {
      jobs.push(
        (async () => {
          const cur = await get(id);
          return txn('bob', id, {
            writes: [
              { op: 'put', field: 'title', value: `t${i}`, expected_version: cur.fields.title.version },
              { op: 'put', field: 'memo', value: `t${i}` },
            ],
          });
        })(),
      );
      jobs.push(put('carol', id, 'memo', { value: `s${i}` }));
    }
    await Promise.all(jobs);
    // Replay the applied rows in order: a transaction's rows share one record_version and
    // are consecutive; single puts never sit between them.
    const rows = (await history(id)).filter((r) => r.outcome === 'applied');
    const state: Record<string, unknown> = {};
    let lastRv = 0;
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i];
      expect(row.record_version).toBeGreaterThanOrEqual(lastRv);
      if (row.transaction) {
        if (row.transaction.index === 0) {
          const next = rows[i + 1];
          expect(next.transaction?.id).toBe(row.transaction.id);
          expect(next.record_version).toBe(row.record_version);
        }
      } else {
        expect(row.record_version).toBe(lastRv + 1);
      }
      lastRv = row.record_version;
      state[row.field] = row.value;
    }
    const rec = await get(id);
    expect(rec.record_version).toBe(lastRv);
    expect(rec.fields.title.value).toBe(state.title);
    expect(rec.fields.memo.value).toBe(state.memo);
  });
});
