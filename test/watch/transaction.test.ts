/**
 * A transaction (issue 33 item 2) on a per-record watch: its changes arrive together, one per
 * written field, all with the transaction's one record_version, and nothing of a refused
 * transaction ever appears.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { tasks } from '../fixtures/task-classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { openWatch, type Watch } from './sse.js';

let t: TestGateway;
const open: Watch[] = [];
beforeAll(async () => {
  t = await startTestGateway([tasks], { extraArgs: ['--watch-poll-interval', '20ms', '--watch-heartbeat', '300ms'] });
});
afterAll(async () => {
  for (const w of open) w.close();
  await t?.close();
});

test("a transaction's changes arrive together with one record_version; a refused one sends nothing", async () => {
  const id = 'wtx-1';
  expect((await t.call('alice', 'PUT', `/v1/records/tasks/${id}/fields/memo`, { value: 0 })).status).toBe(201);
  const w = await openWatch(t.url, 'alice', `/v1/records/tasks/${id}/watch?from_record_version=1`);
  open.push(w);
  expect(w.status).toBe(200);
  expect((await w.next()).event).toBe('open');

  const tx = await t.call('alice', 'POST', `/v1/records/tasks/${id}/transactions`, {
    writes: [
      { op: 'put', field: 'title', value: 'x', expected_version: 0 },
      { op: 'put', field: 'memo', value: 1 },
      { op: 'claim', field: 'job', lease_seconds: 30 },
    ],
  });
  expect(tx.status, JSON.stringify(tx.body)).toBe(200);
  expect(tx.body.record_version).toBe(2);
  // Refused (STALE at index 1): nothing of it may reach the stream.
  const refused = await t.call('alice', 'POST', `/v1/records/tasks/${id}/transactions`, {
    writes: [{ op: 'put', field: 'memo', value: 2 }, { op: 'put', field: 'title', value: 'y', expected_version: 0 }],
  });
  expect(refused.body).toMatchObject({ error: 'STALE', index: 1 });
  expect((await t.call('alice', 'PUT', `/v1/records/tasks/${id}/fields/memo`, { value: 3 })).status).toBe(200);

  const changes: any[] = [];
  for (let i = 0; i < 4; i++) {
    const e = await w.next().catch((err) => ({ event: `error: ${err.message}`, data: w.events }));
    changes.push(e);
    if (e.event !== "change") break;
  }
  expect(changes.map((c) => c.event), JSON.stringify(w.events)).toEqual(["change", "change", "change", "change"]);
  expect(changes.map((c) => c.event)).toEqual(['change', 'change', 'change', 'change']);
  expect(changes.slice(0, 3).map((c) => c.data.record_version)).toEqual([2, 2, 2]);
  expect(changes.slice(0, 3).map((c) => c.data.field).sort()).toEqual(['job', 'memo', 'title']);
  expect(changes.slice(0, 3).every((c) => c.id === '2')).toBe(true);
  expect(changes[3].data).toMatchObject({ field: 'memo', value: 3, record_version: 3 });
});

test('resuming reads whole transactions: from before it gives all its changes, from its version none of them', async () => {
  const id = 'wtx-2';
  expect((await t.call('alice', 'PUT', `/v1/records/tasks/${id}/fields/memo`, { value: 0 })).status).toBe(201);
  const writes = [
    { op: 'put', field: 'title', value: 'x', expected_version: 0 },
    { op: 'append', field: 'log', entry: 1 },
    { op: 'append', field: 'log', entry: 2 },
    { op: 'put', field: 'memo', value: 1 },
  ];
  expect((await t.call('alice', 'POST', `/v1/records/tasks/${id}/transactions`, { evidence: 'e', writes })).status).toBe(200);
  expect((await t.call('alice', 'PUT', `/v1/records/tasks/${id}/fields/memo`, { value: 2 })).status).toBe(200);

  const from1 = await openWatch(t.url, 'alice', `/v1/records/tasks/${id}/watch?from_record_version=1`);
  open.push(from1);
  expect((await from1.next()).event).toBe('open');
  const got = [];
  for (let i = 0; i < 5; i++) got.push((await from1.next()).data);
  expect(got.map((c) => [c.record_version, c.field])).toEqual([
    [2, 'title'],
    [2, 'log'],
    [2, 'log'],
    [2, 'memo'],
    [3, 'memo'],
  ]);

  const from2 = await openWatch(t.url, 'alice', `/v1/records/tasks/${id}/watch?from_record_version=2`);
  open.push(from2);
  expect((await from2.next()).event).toBe('open');
  expect((await from2.next()).data).toMatchObject({ field: 'memo', value: 2, record_version: 3 });
});
