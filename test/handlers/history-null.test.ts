/**
 * A JSON null written as a value shows as `"value": null` in history, as it does in get: the
 * history row keeps what the writer sent (interface.md "History row"), and a missing `value`
 * means the row holds none (a claim, a release). Before migration 0025 history left the key
 * out for a null, so a reader could not tell a put of null from a claim.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';

const jobs: ClassInput = {
  name: 'jobs',
  spec: { fields: { run: { kind: 'task', leaseSeconds: 60 } }, roles: { w: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } } },
};

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([incident, jobs]);
}, 120_000);
afterAll(async () => {
  await t?.close();
});

const newest = (rows: Array<{ seq: number; field: string }>, field: string) =>
  rows.filter((r) => r.field === field).reduce((a, b) => (b.seq > a.seq ? b : a));

test('a put of null, applied or refused STALE, shows value null in history; a claim row has no value', async () => {
  const path = '/v1/records/incident/nulls';
  expect((await t.call('alice', 'PUT', `${path}/fields/blob`, { value: null, expected_version: 0 })).status).toBe(201);
  expect((await t.call('alice', 'PUT', `${path}/fields/scratch`, { value: null })).status).toBe(200);
  expect((await t.call('alice', 'PUT', `${path}/fields/blob`, { value: null, expected_version: 7 })).status).toBe(409);
  const got = await t.call('alice', 'GET', path);
  expect(got.body.fields.blob).toHaveProperty('value', null);
  const hist = await t.call('alice', 'GET', `${path}/history`);
  expect(hist.status).toBe(200);
  const rows = hist.body.history as Array<{ seq: number; field: string; outcome: string }>;
  const blob = rows.filter((r) => r.field === 'blob');
  expect(blob.map((r) => r.outcome).sort()).toEqual(['applied', 'stale']);
  for (const r of blob) expect(r).toHaveProperty('value', null);
  expect(newest(rows, 'scratch')).toHaveProperty('value', null);
});

test('a claim and a release keep no value', async () => {
  const path = '/v1/records/jobs/j1';
  expect((await t.call('alice', 'PUT', `${path}/fields/run/claim`, { lease_seconds: 60 })).status).toBe(201);
  expect((await t.call('alice', 'PUT', `${path}/fields/run/claim`, { lease_seconds: 0 })).status).toBe(200);
  const hist = await t.call('alice', 'GET', `${path}/history`);
  const rows = hist.body.history as Array<{ op: string }>;
  expect(rows.map((r) => r.op).sort()).toEqual(['claim', 'release']);
  for (const r of rows) expect(r).not.toHaveProperty('value');
});
