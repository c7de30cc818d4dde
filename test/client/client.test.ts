/**
 * @kslate/client against a real gateway on a real PostgreSQL, over real sockets: every
 * method, the typed errors, the compare-and-set loop under contention, leases renewed and
 * lost, watches resumed after a dropped connection, and retries keeping their
 * Idempotency-Key.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { HeldError, kslate, NotFoundError, ScopeDeniedError, StaleError, UnauthenticatedError, type WatchChange } from '@kslate/client';
import { KEYS, startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';
import { startCutProxy, type CutProxy } from './proxy.js';

const notes: ClassInput = {
  name: 'notebook',
  namespace: 'team-n',
  spec: {
    idPattern: '^[a-z0-9-]{1,64}$',
    fields: {
      title: { kind: 'versioned', type: 'string' },
      counter: { kind: 'versioned', type: 'integer' },
      memo: { kind: 'soft' },
      log: { kind: 'append' },
      job: { kind: 'task' },
      secret: { kind: 'versioned' },
    },
    roles: {
      writer: { subjects: ['apikey:alice', 'apikey:bob'], read: ['*'], write: ['*'] },
      reader: { subjects: ['apikey:carol'], read: ['title', 'counter', 'log'], write: ['log'] },
    },
    checkpoint: { sections: ['summary'] },
  },
};

let t: TestGateway;
let proxy: CutProxy;
const alice = () => kslate({ url: t.url, token: KEYS.alice });

beforeAll(async () => {
  t = await startTestGateway([notes]);
  proxy = await startCutProxy(t.url);
});
afterAll(async () => {
  await proxy?.close();
  await t?.close();
});

describe('each method', () => {
  test('put, get, query, history, append, claim, release, checkpoint, classes', async () => {
    const k = alice();
    const r = k.record('notebook', 'crud-1');
    const w = await r.put('title', 'first', { expectedVersion: 0 });
    expect(w).toMatchObject({ record: 'notebook/crud-1', field: 'title', version: 1, record_version: 1 });
    await r.put('memo', { any: 'json' });
    const a = await r.append('log', { step: 1 }, { evidence: 'test', invocation: { run: 'r1' } });
    expect(a.seq).toBe(1);

    const got = await k.records('notebook').get('crud-1');
    expect(got.record_version).toBe(3);
    expect(got.fields.title).toMatchObject({ value: 'first', version: 1, author: 'apikey:alice' });
    expect(got.fields.memo).toMatchObject({ value: { any: 'json' } });
    const only = await r.get({ fields: ['title', 'memo'] });
    expect(Object.keys(only.fields).sort()).toEqual(['memo', 'title']);

    const q = await k.records('notebook').query({ title: 'first' });
    expect(q.records.map((x) => x.record)).toEqual(['notebook/crud-1']);
    expect((await k.records('notebook').query({ title: 'none' })).records).toEqual([]);
    await k.record('notebook', 'crud-2').put('title', 'first', { expectedVersion: 0 });
    const page = await k.records('notebook').query({ title: 'first' }, { limit: 1 });
    expect(page.records).toHaveLength(1);
    expect(page.next_after).toBeTypeOf('string');
    const all: string[] = [];
    for await (const rec of k.records('notebook').scan({ title: 'first' }, { limit: 1 })) all.push(rec.record);
    expect(all).toEqual(['notebook/crud-1', 'notebook/crud-2']);

    const c = await r.claim('job', { leaseSeconds: 30 });
    expect(c.owner).toBe('apikey:alice');
    const rel = await r.release('job');
    expect(rel.owner).toBeUndefined();

    const h = await k.records('notebook').history('crud-1', { field: 'title' });
    expect(h.history.map((row) => [row.op, row.outcome])).toEqual([['put', 'applied']]);
    expect((await r.history()).history).toHaveLength(5);

    const saved = await r.checkpoint({ summary: 'half done' });
    expect(saved.role).toBe('writer');
    const loaded = await r.loadCheckpoint();
    expect(loaded.document).toEqual({ summary: 'half done' });

    expect((await k.classes()).classes.map((x) => x.name)).toContain('notebook');
    expect((await k.class('notebook')).name).toBe('notebook');
    expect(await r.find()).toBeDefined();
    expect(await k.record('notebook', 'nope').find()).toBeUndefined();
  });

  test('errors are typed: StaleError carries the current value and diff, HeldError the owner', async () => {
    const k = alice();
    const bob = kslate({ url: t.url, getToken: () => KEYS.bob });
    const r = k.record('notebook', 'err-1');
    await r.put('title', 'a', { expectedVersion: 0 });
    await r.put('title', 'b', { expectedVersion: 1 });
    const stale = await r.put('title', 'c', { expectedVersion: 1 }).catch((e) => e);
    expect(stale).toBeInstanceOf(StaleError);
    expect(stale.currentValue).toBe('b');
    expect(stale.currentVersion).toBe(2);
    expect(stale.yourVersion).toBe(1);
    expect(stale.diff).toContain('-"b"');
    expect(stale.status).toBe(409);

    await r.claim('job', { leaseSeconds: 60 });
    const held = await bob.record('notebook', 'err-1').claim('job', { leaseSeconds: 60 }).catch((e) => e);
    expect(held).toBeInstanceOf(HeldError);
    expect(held.owner).toBe('apikey:alice');

    const carol = kslate({ url: t.url, token: KEYS.carol });
    const denied = await carol.record('notebook', 'err-1').get({ fields: ['memo'] }).catch((e) => e);
    expect(denied).toBeInstanceOf(ScopeDeniedError);
    expect(denied.field).toBe('memo');
    expect(await k.record('notebook', 'missing').get().catch((e) => e)).toBeInstanceOf(NotFoundError);
    expect(await kslate({ url: t.url, token: 'wrong' }).classes().catch((e) => e)).toBeInstanceOf(UnauthenticatedError);
  });

  test('an AbortSignal cancels a call', async () => {
    const ac = new AbortController();
    ac.abort(new Error('stop'));
    await expect(alice().record('notebook', 'crud-1').get({ signal: ac.signal })).rejects.toThrow('stop');
  });
});

describe('update()', () => {
  test('32 concurrent updaters of one field lose no increment, recomputing from STALE without extra reads', async () => {
    let gets = 0;
    let puts = 0;
    const counting: typeof fetch = (input, init) => {
      const method = (init?.method ?? 'GET').toUpperCase();
      if (method === 'GET') gets++;
      if (method === 'PUT') puts++;
      return fetch(input, init);
    };
    const N = 32;
    const clients = Array.from({ length: N }, (_, i) => kslate({ url: t.url, token: i % 2 ? KEYS.alice : KEYS.bob, fetch: counting }));
    const results = await Promise.all(clients.map((k) => k.record('notebook', 'counter-1').update<number>('counter', (n) => (n ?? 0) + 1, { retries: 200, maxDelayMs: 200 })));
    const rec = await alice().record('notebook', 'counter-1').get();
    expect(rec.fields.counter).toMatchObject({ value: N, version: N });
    expect(results.map((r) => r.value).sort((a, b) => a - b)).toEqual(Array.from({ length: N }, (_, i) => i + 1));
    // One read per updater; every retry used the value its STALE answer carried.
    expect(gets).toBe(N);
    expect(puts).toBeGreaterThan(N);
  }, 60_000);

  test('gives up after `retries` with the StaleError', async () => {
    const r = alice().record('notebook', 'counter-2');
    await r.put('counter', 0, { expectedVersion: 0 });
    let calls = 0;
    const err = await r
      .update<number>(
        'counter',
        async (n) => {
          calls++;
          // Someone else moves the field between every read and write.
          await kslate({ url: t.url, token: KEYS.bob }).record('notebook', 'counter-2').update<number>('counter', (m) => (m ?? 0) + 100);
          return (n ?? 0) + 1;
        },
        { retries: 2, baseDelayMs: 1 },
      )
      .catch((e) => e);
    expect(err).toBeInstanceOf(StaleError);
    expect(calls).toBe(3);
  });
});

describe('lease()', () => {
  test('renews in the background, so another identity stays out past the lease length; dispose releases', async () => {
    const r = alice().record('notebook', 'lease-1');
    const bob = kslate({ url: t.url, token: KEYS.bob }).record('notebook', 'lease-1');
    let renewed!: () => void;
    const fourRenewals = new Promise<void>((res) => (renewed = res));
    {
      await using lease = await r.lease('job', { seconds: 1, onRenew: () => lease && lease.renewals >= 3 && renewed() });
      expect(lease.owner).toBe('apikey:alice');
      await fourRenewals; // about 1.3 s: past the 1 s lease, which only renewals kept
      expect(await bob.claim('job', { leaseSeconds: 5 }).catch((e) => e)).toBeInstanceOf(HeldError);
      expect(lease.signal.aborted).toBe(false);
    }
    // Disposed: released, so bob gets it at once.
    expect((await bob.claim('job', { leaseSeconds: 5 })).owner).toBe('apikey:bob');
    const ops = (await r.history({ field: 'job' })).history.map((h) => h.op);
    expect(ops).toContain('release');
  });

  test('its signal fires when the lease is lost to another identity', async () => {
    const r = alice().record('notebook', 'lease-2');
    const bob = kslate({ url: t.url, token: KEYS.bob }).record('notebook', 'lease-2');
    // Renewing only after twice the lease length: the lease lapses first.
    const lease = await r.lease('job', { seconds: 1, renewFraction: 2 });
    const lost = new Promise<unknown>((res) => lease.signal.addEventListener('abort', () => res(lease.signal.reason)));
    for (;;) {
      const got = await bob.claim('job', { leaseSeconds: 30 }).catch((e) => e);
      if (!(got instanceof HeldError)) {
        expect(got.took_over_from).toBe('apikey:alice');
        break;
      }
      await new Promise((res) => setTimeout(res, 100));
    }
    const reason = await lost;
    expect(reason).toBeInstanceOf(HeldError);
    expect((reason as HeldError).owner).toBe('apikey:bob');
    await lease.release(); // lost: nothing to release, no throw
  });
});

describe('watch()', () => {
  test('a record watch resumes from its last event after the connection is cut', async () => {
    const k = kslate({ url: proxy.url, token: KEYS.alice });
    const r = k.record('notebook', 'watch-1');
    await r.put('title', 'v1', { expectedVersion: 0 });
    const ac = new AbortController();
    const seen: WatchChange[] = [];
    const reconnects: string[] = [];
    const it = r.watch({ fromRecordVersion: 0, signal: ac.signal, onReconnect: (i) => reconnects.push(i.lastEventId ?? '') });
    const next = async () => {
      const n = await it.next();
      if (n.done) throw new Error('watch ended');
      seen.push(n.value);
      return n.value;
    };
    expect((await next()).value).toBe('v1');
    proxy.cutAll();
    // Written while the stream is down: must arrive after the resume, once.
    await alice().record('notebook', 'watch-1').put('title', 'v2', { expectedVersion: 1 });
    await alice().record('notebook', 'watch-1').put('title', 'v3', { expectedVersion: 2 });
    expect((await next()).value).toBe('v2');
    expect((await next()).value).toBe('v3');
    expect(reconnects[0]).toBe('1');
    expect(seen.map((c) => c.record_version)).toEqual([1, 2, 3]);
    await it.return(undefined);
  });

  test('a class watch resumes with its cursor', async () => {
    const k = kslate({ url: proxy.url, token: KEYS.alice });
    const ac = new AbortController();
    let opened!: () => void;
    const open = new Promise<void>((res) => (opened = res));
    const it = k.records('notebook').watch({ signal: ac.signal, onOpen: () => opened() });
    const first = it.next();
    await open; // the stream starts "now": write after it is open
    const writer = alice().record('notebook', 'watch-2');
    await writer.put('title', 'a', { expectedVersion: 0 });
    let c = (await first).value as WatchChange;
    while (c.record !== 'notebook/watch-2') c = (await it.next()).value as WatchChange;
    expect(c.value).toBe('a');
    proxy.cutAll();
    await writer.put('title', 'b', { expectedVersion: 1 });
    const n = (await it.next()).value as WatchChange;
    expect([n.record, n.value, n.record_version]).toEqual(['notebook/watch-2', 'b', 2]);
    ac.abort();
    expect((await it.next()).done).toBe(true);
  });
});

describe('retries', () => {
  test('a write whose answer was lost is sent again with the same Idempotency-Key', async () => {
    const sent: { method: string; key: string | null }[] = [];
    const recording: typeof fetch = (input, init) => {
      const h = new Headers(init?.headers);
      sent.push({ method: init?.method ?? 'GET', key: h.get('idempotency-key') });
      return fetch(input, init);
    };
    const k = kslate({ url: proxy.url, token: KEYS.alice, fetch: recording, retry: { baseDelayMs: 1 } });
    const cut = proxy.cutNextAnswer();
    const res = await k.record('notebook', 'retry-1').put('memo', 'once');
    await cut;
    expect(res.version).toBeGreaterThanOrEqual(1);
    const writes = sent.filter((s) => s.method === 'PUT');
    expect(writes).toHaveLength(2);
    expect(writes[0].key).toMatch(/^[0-9a-f-]{36}$/);
    expect(writes[1].key).toBe(writes[0].key);
    // A second logical write gets a key of its own.
    await k.record('notebook', 'retry-1').put('memo', 'twice');
    expect(sent.filter((s) => s.method === 'PUT')[2].key).not.toBe(writes[0].key);
  });
});
