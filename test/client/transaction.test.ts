/**
 * record(class, id).transaction (issue 33) against a real gateway: all writes applied with one
 * new record_version, or none, the rejection typed as the failing write's error with its index.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { kslate, StaleError } from '@kslate/client';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';

const cls = {
  name: 'txn',
  spec: {
    fields: { status: { kind: 'versioned' as const }, summary: { kind: 'versioned' as const }, log: { kind: 'append' as const }, job: { kind: 'task' as const } },
    roles: { w: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
  },
};

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([cls]);
});
afterAll(async () => {
  await t?.close();
});

test('all writes with one record_version, or none with the failing write typed and indexed', async () => {
  const r = kslate({ url: t.url, token: KEYS.alice }).record('txn', 't-1');
  const ok = await r.transaction(
    [
      { op: 'put', field: 'status', value: 'open', expected_version: 0 },
      { op: 'put', field: 'summary', value: 'started', expected_version: 0 },
      { op: 'append', field: 'log', entry: { n: 1 } },
      { op: 'claim', field: 'job', lease_seconds: 30 },
    ],
    { evidence: 'test' },
  );
  expect(ok.record_version).toBe(1);
  const err = await r
    .transaction(
      [
        { op: 'put', field: 'status', value: 'closed', expected_version: 1 },
        { op: 'put', field: 'summary', value: 'done', expected_version: 0 },
      ],
      { evidence: 'test' },
    )
    .catch((e) => e);
  expect(err).toBeInstanceOf(StaleError);
  expect(err.body.index).toBe(1);
  expect(err.currentValue).toBe('started');
  const rec = await r.get();
  expect(rec.record_version).toBe(1);
  expect(rec.fields.status).toMatchObject({ value: 'open', version: 1 });
});
