/**
 * KslateStore on a real gateway: the BaseStore operations (put, get, delete, search with
 * filters and paging, listNamespaces with match conditions and depth) answer as LangGraph's
 * InMemoryStore does for the same calls; items written through the store are kslate records
 * with an audit history, and concurrent writers of one item are serialized by compare-and-set.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { InMemoryStore, type BaseStore, type Item } from '@langchain/langgraph-checkpoint';
import { kslate } from '@kslate/client';
import { KslateStore } from '@kslate/langgraph';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { langgraphClasses } from './classes.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(langgraphClasses());
});
afterAll(async () => {
  await t?.close();
});

const plain = (i: Item | null) => (i ? { namespace: i.namespace, key: i.key, value: i.value } : null);
const keys = (items: Item[]) => items.map((i) => `${i.namespace.join('/')}:${i.key}`).sort();

async function seed(s: BaseStore) {
  await s.put(['users', 'u1', 'memories'], 'm1', { text: 'likes tea', score: 5, tag: 'food' });
  await s.put(['users', 'u1', 'memories'], 'm2', { text: 'works nights', score: 2, tag: 'work' });
  await s.put(['users', 'u1', 'prefs'], 'theme', { text: 'dark', score: 3 });
  await s.put(['users', 'u2', 'memories'], 'm1', { text: 'likes coffee', score: 4, tag: 'food' });
  await s.put(['docs', 'api'], 'put', { text: 'PUT a field', score: 1 });
  await s.put(['users', 'u1', 'memories'], 'm2', { text: 'works days now', score: 3, tag: 'work' });
  await s.delete(['docs', 'api'], 'put');
}

test('answers as InMemoryStore does', async () => {
  const k = new KslateStore({ url: t.url, token: KEYS.alice, prefix: randomUUID() });
  const m = new InMemoryStore();
  await seed(k);
  await seed(m);
  for (const [ns, key] of [
    [['users', 'u1', 'memories'], 'm1'],
    [['users', 'u1', 'memories'], 'm2'],
    [['docs', 'api'], 'put'],
    [['users', 'u3'], 'x'],
  ] as [string[], string][]) {
    expect(plain(await k.get(ns, key))).toEqual(plain(await m.get(ns, key)));
  }
  const searches: [string[], Parameters<BaseStore['search']>[1]][] = [
    [['users'], { limit: 100 }],
    [['users', 'u1'], { limit: 100 }],
    [[], { limit: 100 }],
    [['users'], { filter: { tag: 'food' }, limit: 100 }],
    [['users'], { filter: { score: { $gte: 3 } }, limit: 100 }],
    [['users'], { filter: { score: { $lt: 3 }, tag: { $ne: 'food' } }, limit: 100 }],
    [['users'], { filter: { tag: { $eq: 'work' } }, limit: 100 }],
    [['nobody'], {}],
  ];
  for (const [prefix, opts] of searches) expect(keys(await k.search(prefix, opts))).toEqual(keys(await m.search(prefix, opts)));
  // Paging: two pages of two cover the same items as one page of four, without repeats.
  const p1 = await k.search(['users'], { limit: 2 });
  const p2 = await k.search(['users'], { limit: 2, offset: 2 });
  expect(keys([...p1, ...p2])).toEqual(keys(await m.search(['users'], { limit: 100 })));

  const lists: Parameters<BaseStore['listNamespaces']>[0][] = [
    {},
    { prefix: ['users'] },
    { prefix: ['users', '*', 'memories'] },
    { suffix: ['prefs'] },
    { maxDepth: 2 },
    { prefix: ['users'], maxDepth: 2, limit: 1, offset: 1 },
  ];
  // InMemoryStore keeps listing the namespace of a deleted item (docs/api), whose last item is
  // gone; KslateStore, like the Postgres store, lists namespaces that hold items.
  const live = (nss: string[][]) => nss.filter((ns) => ns[0] !== 'docs');
  for (const o of lists) expect(await k.listNamespaces(o)).toEqual(live(await m.listNamespaces(o)));

  const item = await k.get(['users', 'u1', 'memories'], 'm2');
  expect(item!.createdAt.getTime()).toBeLessThanOrEqual(item!.updatedAt.getTime());
});

test('items are kslate records with an audit history; concurrent writers of one item lose no write', async () => {
  const prefix = randomUUID();
  const stores = [KEYS.alice, KEYS.bob].map((token) => new KslateStore({ url: t.url, token, prefix }));
  await Promise.all(Array.from({ length: 8 }, (_, i) => stores[i % 2].put(['team'], 'note', { n: i })));
  const item = await stores[0].get(['team'], 'note');
  expect(item!.value.n).toBeTypeOf('number');
  const id = (await stores[0].search(['team']))[0];
  expect(id.key).toBe('note');
  // The record behind it: 8 applied puts of `item`, each by its writer.
  const c = kslate({ url: t.url, token: KEYS.alice });
  const [rec] = (await c.records('langgraph-store').query({ store: prefix })).records;
  const history = await c.records('langgraph-store').history(rec.record.split('/')[1], { field: 'item' });
  const applied = history.history.filter((h) => h.outcome === 'applied');
  expect(applied).toHaveLength(8);
  expect(new Set(applied.map((h) => h.author))).toEqual(new Set(['apikey:alice', 'apikey:bob']));
});

test('deleting an item that is not there writes nothing', async () => {
  const prefix = randomUUID();
  const s = new KslateStore({ url: t.url, token: KEYS.alice, prefix });
  await s.delete(['x'], 'never');
  await s.put(['x'], 'k', { v: 1 });
  await s.delete(['x'], 'k');
  await s.delete(['x'], 'k');
  expect(await s.get(['x'], 'k')).toBeNull();
  const c = kslate({ url: t.url, token: KEYS.alice });
  const [rec] = (await c.records('langgraph-store').query({ store: prefix })).records;
  const ops = (await c.records('langgraph-store').history(rec.record.split('/')[1], { field: 'item' })).history;
  expect(ops).toHaveLength(2); // the put and one delete
  expect((await c.records('langgraph-store').query({ store: prefix })).records).toHaveLength(1);
});

test('two stores with different prefixes do not see each other', async () => {
  const a = new KslateStore({ url: t.url, token: KEYS.alice, prefix: randomUUID() });
  const b = new KslateStore({ url: t.url, token: KEYS.alice, prefix: randomUUID() });
  await a.put(['x'], 'k', { v: 1 });
  expect(await b.get(['x'], 'k')).toBeNull();
  expect(await b.search(['x'])).toEqual([]);
  expect(await b.listNamespaces()).toEqual([]);
});
