/**
 * Read-your-writes on standbys (issue 34): the X-Kslate-Lsn a write answers with is sent as
 * X-Kslate-Min-Lsn on the client's later reads, the highest one seen.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { kslate, lsnValue } from '@kslate/client';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';

const cls = { name: 'lsn', spec: { fields: { memo: { kind: 'soft' as const } }, roles: { w: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } } } };

let t: TestGateway;
beforeAll(async () => {
  // Without standbys a gateway reads a write's LSN only when asked (--write-lsn on; docs/ha.md).
  t = await startTestGateway([cls], { extraArgs: ['--write-lsn', 'on'] });
});
afterAll(async () => {
  await t?.close();
});

test('the last write LSN goes out as X-Kslate-Min-Lsn on reads', async () => {
  const seen: { method: string; sentMin: string | null; gotLsn: string | null }[] = [];
  const recording: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    seen.push({ method: init?.method ?? 'GET', sentMin: new Headers(init?.headers).get('x-kslate-min-lsn'), gotLsn: res.headers.get('x-kslate-lsn') });
    return res;
  };
  const k = kslate({ url: t.url, token: KEYS.alice, fetch: recording });
  await k.record('lsn', 'a').get().catch(() => undefined);
  expect(seen[0].sentMin).toBeNull();
  await k.record('lsn', 'a').put('memo', 1);
  await k.record('lsn', 'a').put('memo', 2);
  const lsn = seen[2].gotLsn!;
  expect(lsnValue(lsn)).toBeDefined();
  expect(lsnValue(lsn)! >= lsnValue(seen[1].gotLsn!)!).toBe(true);
  await k.record('lsn', 'a').get();
  expect(seen[3].sentMin).toBe(lsn);
  expect(k.transport.lastLsn).toBe(lsn);
});
