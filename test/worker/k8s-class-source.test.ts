/**
 * Classes from a (fake) cluster through @kubernetes/client-node: the LIST that is the source
 * of truth, the Accepted status condition, health, and the watch that only hastens a sweep.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { createClusterClassSource, type ClusterClassSource } from '../../runtime/k8s/class-source.js';
import type { ReconcileReport } from '../../worker/reconcile-classes.js';
import { startFakeCluster, type FakeCluster } from './fake-cluster.js';

const warnings: string[] = [];
const log = { debug() {}, info() {}, warn: (m: string) => void warnings.push(m), error() {} };

let fake: FakeCluster;
let kc: KubeConfig;
beforeAll(async () => {
  fake = await startFakeCluster();
  kc = new KubeConfig();
  kc.loadFromFile(fake.kubeconfig);
});
afterAll(async () => {
  await fake?.close();
});
beforeEach(() => {
  fake.reset();
  warnings.length = 0;
});

const SPEC = { fields: { title: { kind: 'versioned' } }, roles: { r: { subjects: ['k8s-sa:team-a/x'], read: ['*'] } } };
let n = 0;
const nsName = () => `src-${++n}`;

function report(over: Partial<ReconcileReport>): ReconcileReport {
  return { applied: [], live: [], refused: [], problems: [], markedGone: true, refusedCount: 0, ...over };
}

const condition = (ns: string, name: string) => fake.context(ns, name)?.status?.conditions?.find((c: any) => c.type === 'Accepted');

test('load: valid objects become manifests with uids, invalid ones problem lines; report writes Accepted only when it changes', async () => {
  const ns = nsName();
  const good = fake.addContext({ name: 'alpha', namespace: ns, spec: SPEC });
  fake.addContext({ name: 'beta', namespace: ns, spec: { fields: {} } });
  const dup = fake.addContext({ name: 'gamma', namespace: ns, spec: SPEC });
  const kind = fake.addContext({ name: 'delta', namespace: ns, spec: SPEC });
  const src = createClusterClassSource({ kubeConfig: kc, namespace: ns, log, pageSize: 2 });
  const s = await src.load();

  expect(s.manifests.map((m) => m.metadata)).toEqual([
    { name: 'alpha', namespace: ns },
    { name: 'delta', namespace: ns },
    { name: 'gamma', namespace: ns },
  ]);
  // Server-added metadata is not part of the manifest.
  expect(s.manifests[0]).toEqual({ apiVersion: 'kslate.dev/v1', kind: 'SharedContext', metadata: { name: 'alpha', namespace: ns }, spec: expect.objectContaining({ fields: SPEC.fields }) });
  expect(s.problems).toEqual([`${ns}/beta: spec.fields: must define at least one field`]);
  expect(s.uids?.get(`${ns}/alpha`)).toBe(good.metadata.uid);
  expect(src.listed()).toEqual(new Set(['alpha', 'beta', 'delta', 'gamma'].map((x) => `${ns}/${x}`)));
  // The namespace option lists that namespace only, page by page.
  const lists = fake.requestsTo('GET', '/sharedcontexts');
  expect(lists.map((r) => r.path)).toEqual([`/apis/kslate.dev/v1/namespaces/${ns}/sharedcontexts`, `/apis/kslate.dev/v1/namespaces/${ns}/sharedcontexts`]);
  expect(lists[1]!.query.continue).toBeTruthy();

  const rec = report({
    live: [{ name: 'alpha', namespace: ns, spec: s.manifests[0]!.spec }],
    refused: [
      { name: 'gamma', namespace: ns, reason: 'Duplicate: class "gamma" is held by namespace other' },
      { name: 'delta', namespace: ns, reason: 'changing the kind of existing field(s) title is refused; the previous definition stays (add a new field instead)' },
    ],
  });
  await s.report!(rec);
  const patches = fake.requestsTo('PATCH', '/status');
  expect(patches).toHaveLength(4);
  for (const p of patches) expect(p.contentType).toBe('application/merge-patch+json');
  expect(condition(ns, 'alpha')).toMatchObject({ status: 'True', reason: 'Applied', observedGeneration: 1 });
  expect(condition(ns, 'beta')).toMatchObject({ status: 'False', reason: 'Invalid', message: 'spec.fields: must define at least one field' });
  expect(condition(ns, 'gamma')).toMatchObject({ status: 'False', reason: 'Duplicate', message: expect.stringContaining('held by namespace other') });
  expect(condition(ns, 'delta')).toMatchObject({ status: 'False', reason: 'KindChange', message: expect.stringContaining('changing the kind') });
  expect(condition(ns, 'alpha').lastTransitionTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  expect(dup.metadata.generation).toBe(1);

  // Unchanged: a second report writes nothing, from the same load or a new one.
  fake.reset();
  await s.report!(rec);
  await (await src.load()).report!(rec);
  expect(fake.requestsTo('PATCH', '')).toEqual([]);

  // gamma accepted after all: True now, with a new transition time; a spec change bumps observedGeneration.
  fake.updateContext(ns, 'alpha', { ...SPEC, ttl: '1h' });
  const before = condition(ns, 'alpha').lastTransitionTime;
  const t = Date.parse('2030-01-01T00:00:00Z');
  const later = createClusterClassSource({ kubeConfig: kc, namespace: ns, log, now: () => t });
  await (await later.load()).report!(report({ ...rec, refused: rec.refused.slice(1), live: [...rec.live, { name: 'gamma', namespace: ns, spec: s.manifests[2]!.spec }] }));
  expect(condition(ns, 'gamma')).toMatchObject({ status: 'True', reason: 'Applied', lastTransitionTime: '2030-01-01T00:00:00Z' });
  expect(condition(ns, 'alpha')).toMatchObject({ status: 'True', observedGeneration: 2, lastTransitionTime: before });
  expect(fake.requestsTo('PATCH', '').map((r) => r.path.split('/')[7])).toEqual(['alpha', 'gamma']);
});

test('a status write refused is a warning, never a throw', async () => {
  const ns = nsName();
  fake.addContext({ name: 'alpha', namespace: ns, spec: SPEC });
  const src = createClusterClassSource({ kubeConfig: kc, namespace: ns, log });
  const s = await src.load();
  fake.fail({ method: 'PATCH', path: '/status', status: 403 });
  await s.report!(report({ live: [{ name: 'alpha', namespace: ns, spec: s.manifests[0]!.spec }] }));
  expect(warnings).toEqual([expect.stringMatching(new RegExp(`^cannot write the Accepted condition of SharedContext ${ns}/alpha: HTTP 403.*patch on sharedcontexts/status`))]);
});

test('a failing LIST rejects with a clear message and makes the source unhealthy; cluster-wide uses the cluster path', async () => {
  let t = 1_000_000;
  const src = createClusterClassSource({ kubeConfig: kc, namespace: '', log, now: () => t });
  expect(src.healthy(60_000)).toBe(false);
  expect(src.lastOkAt).toBeNull();
  await src.load();
  expect(fake.requestsTo('GET', '/sharedcontexts')[0]!.path).toBe('/apis/kslate.dev/v1/sharedcontexts');
  expect(src.healthy(60_000)).toBe(true);
  expect(src.lastOkAt).toBe(t);
  t += 61_000;
  expect(src.healthy(60_000)).toBe(false);
  await src.load();
  expect(src.healthy(60_000)).toBe(true);

  fake.fail({ path: '/sharedcontexts', status: 500, message: 'etcd fell over' });
  await expect(src.load()).rejects.toThrow(
    `cannot list SharedContexts (sharedcontexts.kslate.dev) in all namespaces at ${fake.server}: HTTP 500: etcd fell over; the next sweep retries`,
  );
  expect(src.healthy(60_000)).toBe(false);
  fake.clearFailures();
  fake.fail({ path: '/sharedcontexts', status: 404, message: 'the server could not find the requested resource' });
  await expect(src.load()).rejects.toThrow(/HTTP 404.*install the SharedContext CRD/);
  fake.clearFailures();
  fake.fail({ path: '/sharedcontexts', status: 403 });
  await expect(src.load()).rejects.toThrow(/HTTP 403.*grant the worker's service account list and watch on sharedcontexts.kslate.dev cluster-wide/);
  fake.clearFailures();
  await src.load();
  expect(src.healthy(60_000)).toBe(true);
});

/** Resolves when `cond` holds, polling; fails after `ms`. */
async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

function started(ns: string): { src: ClusterClassSource; changes: () => number } {
  let changes = 0;
  const src = createClusterClassSource({
    kubeConfig: kc,
    namespace: ns,
    log,
    onChange: () => changes++,
    debounceMs: 20,
    backoffMs: 30,
    backoffMaxMs: 200,
  });
  return { src, changes: () => changes };
}

test('watch: an ADDED event calls onChange (debounced); what the last load saw and status writes do not', async () => {
  const ns = nsName();
  fake.addContext({ name: 'alpha', namespace: ns, spec: SPEC });
  const { src, changes } = started(ns);
  const s = await src.load();
  src.start();
  try {
    await until(() => fake.openWatches() === 1);
    const w = fake.requestsTo('GET', '/sharedcontexts').find((r) => r.query.watch);
    expect(w?.path).toBe(`/apis/kslate.dev/v1/namespaces/${ns}/sharedcontexts`);
    expect(w?.query).toMatchObject({ allowWatchBookmarks: 'true', timeoutSeconds: '300' });
    // The synthetic ADDED for alpha (already loaded) and our own status write change nothing.
    await s.report!(report({ live: [{ name: 'alpha', namespace: ns, spec: s.manifests[0]!.spec }] }));
    await new Promise((r) => setTimeout(r, 100));
    expect(changes()).toBe(0);
    expect(src.healthy(60_000)).toBe(true);

    fake.addContext({ name: 'beta', namespace: ns, spec: SPEC });
    fake.addContext({ name: 'gamma', namespace: ns, spec: SPEC });
    await until(() => changes() === 1);
    await new Promise((r) => setTimeout(r, 60));
    expect(changes()).toBe(1); // two events, one call
    fake.updateContext(ns, 'alpha', { ...SPEC, ttl: '2h' });
    await until(() => changes() === 2);
    fake.deleteContext(ns, 'alpha');
    await until(() => changes() === 3);
  } finally {
    src.stop();
  }
  await until(() => fake.openWatches() === 0);
});

test('watch: restarted after the server ends it or answers 500, with backoff; stop() leaves nothing running', async () => {
  const ns = nsName();
  const { src, changes } = started(ns);
  await src.load();
  src.start();
  try {
    await until(() => fake.openWatches() === 1);
    // Ended by the server, as at its timeout: a new watch, from the last resourceVersion.
    fake.addContext({ name: 'one', namespace: ns, spec: SPEC });
    await until(() => changes() === 1);
    const watches = () => fake.requestsTo('GET', '/sharedcontexts').filter((r) => r.query.watch);
    fake.endWatches();
    await until(() => watches().length === 2 && fake.openWatches() === 1);
    expect(watches()[1]!.query.resourceVersion).toBeTruthy();
    expect(warnings).toEqual([]);

    // Failing: 500 three times, then it comes back; each restart is logged once.
    fake.fail({ path: '/sharedcontexts', watch: true, status: 500, times: 3 });
    fake.endWatches();
    await until(() => fake.openWatches() === 1, 5000);
    expect(warnings).toHaveLength(3);
    expect(warnings[0]).toMatch(new RegExp(`^the SharedContext watch in namespace ${ns} at ${fake.server} failed \\(HTTP 500.*\\); restarting it in \\d+ ms`));
    // Exponential from 30 ms (or further along, had the previous watch ended at once), capped at 200 ms.
    const delays = warnings.map((w) => Number(/in (\d+) ms/.exec(w)![1]));
    expect(delays[0]).toBeGreaterThanOrEqual(30);
    expect(delays.slice(1)).toEqual(delays.slice(0, -1).map((d) => Math.min(d * 2, 200)));
    fake.addContext({ name: 'two', namespace: ns, spec: SPEC });
    await until(() => changes() === 2);
    expect(src.healthy(60_000)).toBe(true);

    // Failing for good: unhealthy once the watch has been down longer than maxAge.
    fake.fail({ path: '/sharedcontexts', watch: true, status: 500 });
    fake.endWatches();
    await until(() => warnings.length >= 5);
    expect(src.healthy(60_000)).toBe(true);
    expect(src.healthy(1)).toBe(false);
  } finally {
    src.stop();
    fake.clearFailures();
  }
  const requests = fake.requests.length;
  const calls = changes();
  fake.addContext({ name: 'after-stop', namespace: ns, spec: SPEC });
  await new Promise((r) => setTimeout(r, 400));
  expect(fake.requests.length).toBe(requests);
  expect(changes()).toBe(calls);
  expect(fake.openWatches()).toBe(0);
});
