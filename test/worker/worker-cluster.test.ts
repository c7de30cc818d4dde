/**
 * `kslate worker` as a child process with classes from a cluster (KUBECONFIG pointing at the
 * loopback fake API server) and a real PostgreSQL: SharedContexts become classes with an
 * Accepted condition, a refused manifest gets Accepted=False, roles are mirrored, a watch
 * event makes the next sweep come early (a deleted SharedContext: class gone, RBAC deleted),
 * and /readyz reflects whether listing SharedContexts works.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { children, cleanEnv, ensureBuilt, getJson, kslate, start, stop } from '../setup/cli.js';
import { freePort } from '../setup/ports.js';
import { startFakeCluster, type FakeCluster } from './fake-cluster.js';

let fake: FakeCluster;
let d: TestDb;
beforeAll(async () => {
  await ensureBuilt();
  fake = await startFakeCluster();
  d = await freshDatabase();
}, 180_000);
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await fake?.close();
  await d?.drop();
});

async function classes(): Promise<{ name: string; gone: boolean }[]> {
  const c = new pg.Client({ connectionString: d.url });
  await c.connect();
  try {
    return (await c.query('select name, gone from classes order by name')).rows;
  } finally {
    await c.end();
  }
}

async function until<T>(what: string, fn: () => Promise<T> | T, ok: (v: T) => boolean, ms = 20_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}: last ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const spec = (subjects: string[]) => ({
  fields: { title: { kind: 'versioned' } },
  roles: { responder: { subjects, read: ['*'], write: ['*'] } },
});

test('kslate worker reconciles SharedContexts from the cluster, mirrors roles, reacts to a watch event and reports list health on /readyz', async () => {
  fake.addContext({ name: 'incident', namespace: 'team-a', spec: spec(['k8s-sa:team-a/responder', 'k8s-sa:team-b/*']) });
  fake.addContext({ name: 'Bad_Name', namespace: 'team-a', spec: spec(['apikey:alice']) });
  const healthPort = await freePort();
  const w = await start(
    // A long interval: anything after the first sweep happens because of the watch.
    ['worker', '--database-url', d.url, '--health-port', String(healthPort), '--metrics-port', '0', '--sweep-interval', '1h', '--log-level', 'debug'],
    cleanEnv({ KUBECONFIG: fake.kubeconfig }),
    { ready: /sweep done/ },
  );
  expect(w.stdout()).toMatch(/classes come from the cluster: SharedContext objects in every namespace at http:\/\/127\.0\.0\.1:/);
  expect(await classes()).toEqual([{ name: 'incident', gone: false }]);
  expect(fake.context('team-a', 'incident')?.status?.conditions).toEqual([
    expect.objectContaining({ type: 'Accepted', status: 'True', reason: 'Applied' }),
  ]);
  expect(fake.context('team-a', 'Bad_Name')?.status?.conditions).toEqual([
    expect.objectContaining({ type: 'Accepted', status: 'False', reason: 'Invalid' }),
  ]);
  // The role's RBAC, applied by server-side apply as kslate-worker.
  const role = fake.role('team-a', 'kslate:incident:responder');
  expect(role?.rules).toEqual([{ apiGroups: ['kslate.dev'], resources: ['sharedcontexts'], resourceNames: ['incident'], verbs: ['get'] }]);
  const binding = fake.binding('team-a', 'kslate:incident:responder');
  expect(binding?.subjects).toEqual(
    expect.arrayContaining([
      { kind: 'ServiceAccount', name: 'responder', namespace: 'team-a' },
      { kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: 'system:serviceaccounts:team-b' },
    ]),
  );
  const apply = fake.requestsTo('PATCH', /\/roles\/kslate:incident:responder/)[0];
  expect(apply?.contentType).toBe('application/apply-patch+yaml');
  expect(apply?.query).toMatchObject({ fieldManager: 'kslate-worker', force: 'true' });
  expect((await getJson(`http://127.0.0.1:${healthPort}/readyz`)).status).toBe(200);

  // A deleted SharedContext: the watch brings the next sweep forward.
  fake.deleteContext('team-a', 'incident');
  await until('the class to be gone', classes, (rows) => rows.some((r) => r.name === 'incident' && r.gone));
  await until('the RBAC to be deleted', () => fake.role('team-a', 'kslate:incident:responder') ?? null, (r) => r === null);
  expect(fake.binding('team-a', 'kslate:incident:responder')).toBeUndefined();

  await stop(w.child);
  expect((await w.exited).code).toBe(0);
}, 60_000);

test('/readyz turns 503 when SharedContexts cannot be listed for two intervals, and `kslate sweep` exits 1 then', async () => {
  const healthPort = await freePort();
  const w = await start(
    ['worker', '--database-url', d.url, '--health-port', String(healthPort), '--metrics-port', '0', '--sweep-interval', '1s'],
    cleanEnv({ KUBECONFIG: fake.kubeconfig }),
    { ready: /sweep done/ },
  );
  expect((await getJson(`http://127.0.0.1:${healthPort}/readyz`)).status).toBe(200);
  fake.fail({ method: 'GET', path: '/sharedcontexts', status: 403, message: 'sharedcontexts.kslate.dev is forbidden' });
  fake.endWatches();
  const r = await until('readyz 503', () => getJson(`http://127.0.0.1:${healthPort}/readyz`), (x) => x.status === 503, 15_000);
  expect(r.body).toMatchObject({ error: 'UNAVAILABLE' });
  expect(r.body.message).toMatch(/SharedContext/);
  // The worker sweeps every second: a one-off sweep that finds the sweep lease held does
  // nothing and exits 0 (worker/sweep.ts), so try until one runs.
  let once = await kslate(['sweep', '--database-url', d.url], cleanEnv({ KUBECONFIG: fake.kubeconfig }));
  for (let i = 0; i < 20 && once.code === 0; i++) {
    await new Promise((r) => setTimeout(r, 100 + Math.random() * 400));
    once = await kslate(['sweep', '--database-url', d.url], cleanEnv({ KUBECONFIG: fake.kubeconfig }));
  }
  expect(once.code).toBe(1);
  expect(once.stdout).toMatch(/step classes failed: /);
  fake.clearFailures();
  await until('readyz 200 again', () => getJson(`http://127.0.0.1:${healthPort}/readyz`), (x) => x.status === 200, 15_000);
  await stop(w.child);
  expect((await w.exited).code).toBe(0);
}, 60_000);
