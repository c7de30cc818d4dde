/**
 * A write the gateway answers 503 (its database unreachable: a TCP proxy between the gateway
 * and PostgreSQL refuses connections) is retried by @kslate/client after the Retry-After the
 * gateway sent, with the same Idempotency-Key, and succeeds once the database is back.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { kslate } from '@kslate/client';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { startCutProxy, type CutProxy } from './proxy.js';

const cls = { name: 'retry', spec: { fields: { memo: { kind: 'soft' as const } }, roles: { w: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } } } };

let db: TestDb;
let pg: CutProxy;
let t: TestGateway;
beforeAll(async () => {
  db = await freshDatabase();
  const u = new URL(db.url);
  pg = await startCutProxy(`tcp://${u.hostname}:${u.port || 5432}`);
  const via = new URL(db.url);
  via.host = new URL(pg.url).host;
  t = await startTestGateway([cls], { db: { url: via.toString(), name: db.name, drop: async () => undefined } });
});
afterAll(async () => {
  await t?.close();
  await pg?.close();
  await db?.drop();
});

test('503 with Retry-After: retried after that long, with the same key, until it applies', async () => {
  const k0 = kslate({ url: t.url, token: KEYS.alice });
  await k0.record('retry', 'r-1').put('memo', 'before');
  const attempts: { at: number; status: number; retryAfter: string | null; key: string | null }[] = [];
  const recording: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const method = init?.method ?? 'GET';
    if (method === 'PUT') {
      attempts.push({ at: Date.now(), status: res.status, retryAfter: res.headers.get('retry-after'), key: new Headers(init?.headers).get('idempotency-key') });
      // The database comes back once the client has seen a 503.
      if (res.status === 503) pg.refuse(false);
    }
    return res;
  };
  const k = kslate({ url: t.url, token: KEYS.alice, fetch: recording, retry: { attempts: 10, baseDelayMs: 10 } });
  pg.refuse(true);
  const res = await k.record('retry', 'r-1').put('memo', 'after');
  expect(res.version).toBe(2);
  const failed = attempts.filter((a) => a.status === 503);
  expect(failed.length).toBeGreaterThanOrEqual(1);
  const last = attempts[attempts.length - 1];
  expect(last.status).toBe(200);
  expect(new Set(attempts.map((a) => a.key)).size).toBe(1);
  // Honoured: the retry after a 503 waited the Retry-After seconds, not the 10 ms backoff.
  const first503 = attempts.findIndex((a) => a.status === 503);
  const wait = attempts[first503 + 1].at - attempts[first503].at;
  expect(Number(attempts[first503].retryAfter)).toBeGreaterThanOrEqual(1);
  expect(wait).toBeGreaterThanOrEqual(Number(attempts[first503].retryAfter) * 1000 - 50);
  expect((await k0.record('retry', 'r-1').get()).fields.memo).toMatchObject({ value: 'after', version: 2 });
}, 60_000);
