/**
 * With the gateway keeping Idempotency-Keys (issue 33): a write whose acknowledgement was lost
 * (the connection cut after the gateway answered) is retried by @kslate/client with the same key
 * and applied once; the retry gets the stored answer (Idempotent-Replayed: true).
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { kslate } from '@kslate/client';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { startCutProxy, type CutProxy } from './proxy.js';

const cls = {
  name: 'idem',
  spec: {
    fields: { log: { kind: 'append' as const }, memo: { kind: 'soft' as const }, title: { kind: 'versioned' as const }, job: { kind: 'task' as const } },
    roles: { w: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
  },
};

let t: TestGateway;
let proxy: CutProxy;
beforeAll(async () => {
  t = await startTestGateway([cls]);
  proxy = await startCutProxy(t.url);
});
afterAll(async () => {
  await proxy?.close();
  await t?.close();
});

test('append, put and claim retried after a lost answer apply once', async () => {
  const replayed: (string | null)[] = [];
  const recording: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if ((init?.method ?? 'GET') !== 'GET') replayed.push(res.headers.get('idempotent-replayed'));
    return res;
  };
  const k = kslate({ url: proxy.url, token: KEYS.alice, fetch: recording, retry: { baseDelayMs: 1 } });
  const r = k.record('idem', 'once-1');
  const lost = async <T>(write: () => Promise<T>): Promise<T> => {
    const cut = proxy.cutNextAnswer();
    const out = await write();
    await cut;
    return out;
  };
  const a = await lost(() => r.append('log', { n: 1 }, { evidence: 'test' }));
  expect(a.seq).toBe(1);
  const p = await lost(() => r.put('title', 'first', { expectedVersion: 0 }));
  expect(p.version).toBe(1);
  const c = await lost(() => r.claim('job', { leaseSeconds: 60 }));
  expect(c.owner).toBe('apikey:alice');
  expect(replayed.filter((h) => h === 'true')).toHaveLength(3);

  const rec = await kslate({ url: t.url, token: KEYS.alice }).record('idem', 'once-1').get();
  expect((rec.fields.log as { version: number }).version).toBe(1);
  expect(rec.fields.title).toMatchObject({ value: 'first', version: 1 });
  expect(rec.record_version).toBe(3);
  const history = (await r.history()).history;
  expect(history.map((h) => h.outcome)).toEqual(['applied', 'applied', 'applied']);
});
