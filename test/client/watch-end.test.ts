/**
 * The gateway itself ends watch streams (`--watch-max-age 1s`: an `end` event with reason
 * max_age); @kslate/client's watch resumes each time from its last event, so the caller sees
 * every change once, in order, across several server-ended streams.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { kslate, type WatchChange } from '@kslate/client';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';

const cls = { name: 'ends', spec: { fields: { n: { kind: 'versioned' as const, type: 'integer' as const } }, roles: { w: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } } } };

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([cls], { extraArgs: ['--watch-max-age', '1s'] });
});
afterAll(async () => {
  await t?.close();
});

test('a record watch continues across streams the gateway ends (max_age)', async () => {
  const k = kslate({ url: t.url, token: KEYS.alice });
  const r = k.record('ends', 'e-1');
  await r.put('n', 1, { expectedVersion: 0 });
  const reasons: string[] = [];
  let reconnected: () => void = () => undefined;
  const ac = new AbortController();
  const it = r.watch({
    fromRecordVersion: 0,
    signal: ac.signal,
    onReconnect: (i) => {
      reasons.push(i.reason);
      reconnected();
    },
  });
  const seen: WatchChange[] = [];
  const take = async () => {
    const n = await it.next();
    if (n.done) throw new Error('ended');
    seen.push(n.value);
  };
  await take();
  for (let v = 2; v <= 3; v++) {
    // Wait (reading) for the gateway to end the stream, then write while it reconnects.
    const ended = new Promise<void>((res) => (reconnected = res));
    const next = take();
    await ended;
    await r.put('n', v, { expectedVersion: v - 1 });
    await next;
  }
  ac.abort();
  expect(seen.map((c) => [c.value, c.record_version, c.id])).toEqual([
    [1, 1, '1'],
    [2, 2, '2'],
    [3, 3, '3'],
  ]);
  expect(reasons.slice(0, 2)).toEqual(['end: max_age', 'end: max_age']);
});
