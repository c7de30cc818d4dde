/**
 * The sweep end to end against a (fake) cluster and a real PostgreSQL: SharedContexts become
 * classes, their Accepted condition is written, class roles are mirrored into RBAC, and a
 * deleted SharedContext makes its class gone and its Role and RoleBinding go.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { createClusterClassSource } from '../../runtime/k8s/class-source.js';
import { K8sRoleMirror } from '../../runtime/k8s/role-mirror.js';
import { sweep, type SweepDeps } from '../../worker/sweep.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { startFakeCluster, type FakeCluster } from './fake-cluster.js';

const log = { debug() {}, info() {}, warn() {}, error() {} };

let tdb: TestDb;
let db: PgDb;
let fake: FakeCluster;
beforeAll(async () => {
  tdb = await freshDatabase();
  db = new PgDb(createPool({ connectionString: tdb.url, max: 4 }));
  fake = await startFakeCluster();
});
afterAll(async () => {
  await db?.kysely.destroy();
  await tdb?.drop();
  await fake?.close();
});

test('a SharedContext becomes a class with mirrored roles; deleted, the class is gone and its RBAC deleted', async () => {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(fake.kubeconfig);
  const source = createClusterClassSource({ kubeConfig, namespace: '', log });
  const deps: SweepDeps = {
    db,
    log,
    holder: 'test/x',
    classSource: () => source.load(),
    roles: new K8sRoleMirror({ kubeConfig, namespace: '', listed: () => source.listed() }),
  };
  const sc = fake.addContext({
    name: 'incident',
    namespace: 'team-a',
    spec: {
      fields: { title: { kind: 'versioned' } },
      roles: { responder: { subjects: ['k8s-sa:team-a/responder', 'apikey:alice'], read: ['*'], write: ['title'] } },
    },
  });

  const first = await sweep(deps);
  expect(first.errors).toEqual([]);
  expect(first.ok).toBe(true);
  expect(first.classes?.applied).toEqual(['incident']);
  expect(first.roles).toEqual({ applied: 2, deleted: 0, errors: [] });
  const row = (await db.listClasses()).find((c) => c.name === 'incident');
  expect(row).toMatchObject({ namespace: 'team-a', gone: false });
  expect(fake.context('team-a', 'incident')?.status?.conditions).toEqual([
    expect.objectContaining({ type: 'Accepted', status: 'True', reason: 'Applied', observedGeneration: 1 }),
  ]);
  expect(fake.role('team-a', 'kslate:incident:responder')?.metadata.ownerReferences[0].uid).toBe(sc.metadata.uid);
  expect(fake.binding('team-a', 'kslate:incident:responder')?.subjects).toEqual([{ kind: 'ServiceAccount', name: 'responder', namespace: 'team-a' }]);

  // Nothing changed: nothing written to the cluster.
  fake.reset();
  const second = await sweep(deps);
  expect(second.roles).toEqual({ applied: 0, deleted: 0, errors: [] });
  expect(fake.requests.filter((r) => r.method !== 'GET')).toEqual([]);

  // An invalid edit: refused with Accepted=False; the class and its RBAC stay as they were.
  const spec = sc.spec;
  fake.updateContext('team-a', 'incident', { fields: {} });
  const invalid = await sweep(deps);
  // Refused, not failed: the gauge counts it, the sweep's other steps and classes go on.
  expect(invalid.ok).toBe(true);
  expect(invalid.classes?.refusedCount).toBe(1);
  expect(invalid.classes?.problems).toEqual(['team-a/incident: spec.fields: must define at least one field']);
  expect(invalid.roles).toEqual({ applied: 0, deleted: 0, errors: [] });
  expect((await db.listClasses()).find((c) => c.name === 'incident')?.gone).toBe(false);
  expect(fake.context('team-a', 'incident')?.status?.conditions).toEqual([
    expect.objectContaining({ type: 'Accepted', status: 'False', reason: 'Invalid', observedGeneration: 2 }),
  ]);
  expect(fake.role('team-a', 'kslate:incident:responder')).toBeDefined();
  fake.updateContext('team-a', 'incident', spec);
  expect((await sweep(deps)).ok).toBe(true);

  fake.deleteContext('team-a', 'incident');
  const third = await sweep(deps);
  expect(third.errors).toEqual([]);
  expect(third.classes?.markedGone).toBe(true);
  expect((await db.listClasses()).find((c) => c.name === 'incident')?.gone).toBe(true);
  expect(third.roles).toEqual({ applied: 0, deleted: 2, errors: [] });
  expect(fake.role('team-a', 'kslate:incident:responder')).toBeUndefined();
  expect(fake.binding('team-a', 'kslate:incident:responder')).toBeUndefined();
});
