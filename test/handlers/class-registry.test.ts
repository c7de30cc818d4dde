/**
 * The class cache (handlers/class-registry.ts): refreshed every second; an expired cache is
 * answered while the refresh runs (no request of the second waits for the reload's round
 * trip), but not after a refresh failed (then requests wait and see the failure, as the
 * database's 503); an unchanged class keeps its compiled form.
 */
import { expect, test } from 'vitest';
import type { ClassRow } from '../../db/port.js';
import { cachedRegistry } from '../../handlers/class-registry.js';

const row = (name: string, title = 'string'): ClassRow => ({
  name,
  namespace: 'ns',
  spec: { fields: { title: { kind: 'versioned', type: title } }, roles: { r: { subjects: ['apikey:a'], read: ['*'], write: ['*'] } } },
  gone: false,
  status: null,
  updated_at: new Date(0),
});

function loader() {
  const calls: { resolve: (rows: ClassRow[]) => void; reject: (e: Error) => void }[] = [];
  const load = () => new Promise<ClassRow[]>((resolve, reject) => calls.push({ resolve, reject }));
  return { calls, load };
}

test('an expired cache answers at once while the refresh runs, then the refreshed one', async () => {
  let clock = 0;
  const l = loader();
  const reg = cachedRegistry(l.load, () => clock, 1000);
  const first = reg.get('a');
  l.calls[0].resolve([row('a')]);
  const a1 = await first;
  expect(a1?.name).toBe('a');

  clock = 1500; // expired
  const stale = await reg.get('b'); // answered from the old cache, without waiting
  expect(stale).toBeNull();
  expect(l.calls).toHaveLength(2); // one refresh started
  await reg.get('a');
  expect(l.calls).toHaveLength(2); // not a second one while it runs
  l.calls[1].resolve([row('a'), row('b')]);
  await new Promise((r) => setTimeout(r, 0));
  expect((await reg.get('b'))?.name).toBe('b');
  // The unchanged class kept its compiled form.
  expect(await reg.get('a')).toBe(a1);
});

test('a changed class is compiled again', async () => {
  let clock = 0;
  const l = loader();
  const reg = cachedRegistry(l.load, () => clock, 1000);
  const p = reg.get('a');
  l.calls[0].resolve([row('a')]);
  const a1 = await p;
  clock = 1500;
  await reg.get('a');
  l.calls[1].resolve([row('a', 'integer')]);
  await new Promise((r) => setTimeout(r, 0));
  const a2 = await reg.get('a');
  expect(a2).not.toBe(a1);
  expect(a2?.fields.get('title')).toMatchObject({ type: 'integer' });
});

test('after a failed refresh requests wait for the next load and see its failure', async () => {
  let clock = 0;
  const l = loader();
  const reg = cachedRegistry(l.load, () => clock, 1000);
  const p = reg.get('a');
  l.calls[0].resolve([row('a')]);
  await p;
  clock = 1500;
  await reg.get('a'); // stale, refresh started
  l.calls[1].reject(new Error('database down'));
  await new Promise((r) => setTimeout(r, 0));
  const waiting = reg.get('a');
  expect(l.calls).toHaveLength(3);
  l.calls[2].reject(new Error('database down'));
  await expect(waiting).rejects.toThrow('database down');
});

test('a cache older than maxStaleMs is not answered: the request waits', async () => {
  let clock = 0;
  const l = loader();
  const reg = cachedRegistry(l.load, () => clock, 1000, 5000);
  const p = reg.get('a');
  l.calls[0].resolve([row('a')]);
  await p;
  clock = 6000;
  let settled = false;
  const waiting = reg.get('a').then((c) => ((settled = true), c));
  await new Promise((r) => setTimeout(r, 0));
  expect(settled).toBe(false);
  l.calls[1].resolve([]);
  expect(await waiting).toBeNull();
});
