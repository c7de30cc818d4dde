/**
 * Role mirroring against a (fake) cluster through @kubernetes/client-node: server-side apply,
 * stale deletion limited to what kslate manages, roleRef changes, and API errors as lines.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { FIELD_MANAGER, K8sRoleMirror } from '../../runtime/k8s/role-mirror.js';
import type { LiveClass } from '../../worker/sweep.js';
import { startFakeCluster, type FakeCluster } from './fake-cluster.js';
import { roleSpec } from './role-spec.js';

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
beforeEach(() => fake.reset());

const spec = roleSpec;

let n = 0;
/** A class in its own namespace, so tests do not see each other's objects. */
function cls(roles: Record<string, string[]>, name = 'incident'): LiveClass {
  const ns = `ns-${++n}`;
  const sub = (s: string[]) => s.map((x) => x.replace('NS', ns));
  return { name, namespace: ns, spec: spec(Object.fromEntries(Object.entries(roles).map(([r, s]) => [r, sub(s)]))), uid: `uid-${name}-${n}` };
}

test('Roles and RoleBindings go out by server-side apply with the owner, labels, rules and subjects', async () => {
  const c = cls({ responder: ['k8s-sa:NS/responder', 'apikey:alice', 'k8s-sa:NS/*'], reviewer: ['apikey:bob'] });
  const mirror = new K8sRoleMirror({ kubeConfig: kc, namespace: '' });
  const report = await mirror.mirror([c]);
  expect(report).toEqual({ applied: 2, deleted: 0, errors: [] });

  const patches = fake.requests.filter((r) => r.method === 'PATCH');
  expect(patches.map((r) => r.path)).toEqual([
    `/apis/rbac.authorization.k8s.io/v1/namespaces/${c.namespace}/roles/kslate:incident:responder`,
    `/apis/rbac.authorization.k8s.io/v1/namespaces/${c.namespace}/rolebindings/kslate:incident:responder`,
  ]);
  for (const p of patches) {
    expect(p.contentType).toBe('application/apply-patch+yaml');
    expect(p.query).toMatchObject({ fieldManager: FIELD_MANAGER, force: 'true' });
    expect(p.body.metadata.ownerReferences).toEqual([
      { apiVersion: 'kslate.dev/v1', kind: 'SharedContext', name: 'incident', uid: c.uid, controller: true, blockOwnerDeletion: false },
    ]);
    expect(p.body.metadata.labels).toEqual({ 'app.kubernetes.io/managed-by': 'kslate', 'kslate.dev/class': 'incident', 'kslate.dev/role': 'responder' });
  }
  expect(FIELD_MANAGER).toBe('kslate-worker');
  expect(patches[0]!.body.rules).toEqual([{ apiGroups: ['kslate.dev'], resources: ['sharedcontexts'], resourceNames: ['incident'], verbs: ['get'] }]);
  expect(patches[1]!.body.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'kslate:incident:responder' });
  expect(patches[1]!.body.subjects).toEqual([
    { kind: 'ServiceAccount', name: 'responder', namespace: c.namespace },
    { kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: `system:serviceaccounts:${c.namespace}` },
  ]);
  // The reviewer role (no k8s-sa subject) got nothing.
  expect(fake.role(c.namespace, 'kslate:incident:reviewer')).toBeUndefined();
  // Cluster-wide: the managed objects were listed across namespaces by label.
  const lists = fake.requests.filter((r) => r.method === 'GET');
  expect(lists.map((r) => r.path)).toEqual(['/apis/rbac.authorization.k8s.io/v1/roles', '/apis/rbac.authorization.k8s.io/v1/rolebindings']);
  for (const l of lists) expect(l.query.labelSelector).toBe('app.kubernetes.io/managed-by=kslate');

  // A second mirror with nothing changed writes nothing.
  fake.reset();
  expect(await mirror.mirror([c])).toEqual({ applied: 0, deleted: 0, errors: [] });
  expect(fake.requests.filter((r) => r.method !== 'GET')).toEqual([]);
});

test('a role removed from its class is deleted; unmanaged objects are never touched', async () => {
  const c = cls({ a: ['k8s-sa:NS/a'], b: ['k8s-sa:NS/b'] });
  const mirror = new K8sRoleMirror({ kubeConfig: kc, namespace: c.namespace, pageSize: 1 });
  expect((await mirror.mirror([c])).applied).toBe(4);
  // Someone else's Role and RoleBinding, named like ours but without the label.
  fake.putRbac({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'kslate:incident:c', namespace: c.namespace }, rules: [] });
  fake.putRbac({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'admin-binding', namespace: c.namespace, labels: { team: 'a' } },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
    subjects: [],
  });

  fake.reset();
  const without = { ...c, spec: spec({ a: [`k8s-sa:${c.namespace}/a`], b: ['apikey:b'] }) };
  const report = await mirror.mirror([without]);
  expect(report).toEqual({ applied: 0, deleted: 2, errors: [] });
  expect(fake.requestsTo('DELETE', '').map((r) => r.path)).toEqual([
    `/apis/rbac.authorization.k8s.io/v1/namespaces/${c.namespace}/rolebindings/kslate:incident:b`,
    `/apis/rbac.authorization.k8s.io/v1/namespaces/${c.namespace}/roles/kslate:incident:b`,
  ]);
  expect(fake.role(c.namespace, 'kslate:incident:a')).toBeDefined();
  expect(fake.role(c.namespace, 'kslate:incident:c')).toBeDefined();
  expect(fake.binding(c.namespace, 'admin-binding')).toBeDefined();
  // Namespaced: listed in that namespace only, page by page.
  const lists = fake.requestsTo('GET', '');
  expect(lists.every((r) => r.path.startsWith(`/apis/rbac.authorization.k8s.io/v1/namespaces/${c.namespace}/`))).toBe(true);
  expect(lists.some((r) => r.query.continue)).toBe(true);

  // The class gone altogether: its objects go too.
  fake.reset();
  expect(await mirror.mirror([])).toEqual({ applied: 0, deleted: 2, errors: [] });
  expect(fake.role(c.namespace, 'kslate:incident:a')).toBeUndefined();
  expect(fake.binding(c.namespace, 'kslate:incident:a')).toBeUndefined();
});

test('a listed class that is not live (invalid or refused) keeps its objects', async () => {
  const c = cls({ a: ['k8s-sa:NS/a'] });
  let listed = new Set([`${c.namespace}/incident`]);
  const mirror = new K8sRoleMirror({ kubeConfig: kc, namespace: c.namespace, listed: () => listed });
  await mirror.mirror([c]);
  expect(await mirror.mirror([])).toEqual({ applied: 0, deleted: 0, errors: [] });
  expect(fake.role(c.namespace, 'kslate:incident:a')).toBeDefined();
  listed = new Set();
  expect((await mirror.mirror([])).deleted).toBe(2);
});

test('a RoleBinding whose roleRef must change is deleted and created again', async () => {
  const c = cls({ a: ['k8s-sa:NS/a'] });
  fake.putRbac({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'kslate:incident:a', namespace: c.namespace, labels: { 'app.kubernetes.io/managed-by': 'kslate' } },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
    subjects: [{ kind: 'ServiceAccount', name: 'a', namespace: c.namespace }],
  });
  const report = await new K8sRoleMirror({ kubeConfig: kc, namespace: c.namespace }).mirror([c]);
  expect(report).toEqual({ applied: 2, deleted: 0, errors: [] });
  const writes = fake.requests.filter((r) => r.method !== 'GET').map((r) => `${r.method} ${r.path.split('/').slice(-2).join('/')}`);
  expect(writes).toEqual(['PATCH roles/kslate:incident:a', 'DELETE rolebindings/kslate:incident:a', 'PATCH rolebindings/kslate:incident:a']);
  expect(fake.binding(c.namespace, 'kslate:incident:a')!.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'kslate:incident:a' });

  // The same without the label (so not in the managed list): the 422 from apply leads there too.
  const d = cls({ a: ['k8s-sa:NS/a'] });
  fake.putRbac({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'kslate:incident:a', namespace: d.namespace },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
    subjects: [],
  });
  fake.reset();
  expect(await new K8sRoleMirror({ kubeConfig: kc, namespace: d.namespace }).mirror([d])).toEqual({ applied: 2, deleted: 0, errors: [] });
  expect(fake.binding(d.namespace, 'kslate:incident:a')!.roleRef.kind).toBe('Role');
});

test('a 403 becomes an error line naming the object and the RBAC to grant; the rest still goes through', async () => {
  const c = cls({ a: ['k8s-sa:NS/a'] });
  fake.fail({ method: 'PATCH', path: '/roles/', status: 403, message: 'roles.rbac.authorization.k8s.io "kslate:incident:a" is forbidden: user "system:serviceaccount:kslate:worker" is attempting to grant RBAC permissions not currently held' });
  const report = await new K8sRoleMirror({ kubeConfig: kc, namespace: c.namespace }).mirror([c]);
  expect(report.applied).toBe(1);
  expect(report.errors).toHaveLength(1);
  expect(report.errors[0]).toContain(`cannot apply Role ${c.namespace}/kslate:incident:a: HTTP 403: roles.rbac.authorization.k8s.io "kslate:incident:a" is forbidden`);
  expect(report.errors[0]).toContain(`grant the worker's service account patch on roles.rbac.authorization.k8s.io in namespace ${c.namespace}`);
  expect(report.errors[0]).toContain('get on sharedcontexts.kslate.dev');

  // Listing refused: nothing is deleted, and it says so.
  fake.reset();
  fake.fail({ method: 'GET', path: '/rolebindings', status: 403 });
  const listed = await new K8sRoleMirror({ kubeConfig: kc, namespace: '' }).mirror([]);
  expect(listed.deleted).toBe(0);
  expect(listed.errors).toEqual([
    expect.stringMatching(/^cannot list the RoleBindings kslate manages in all namespaces, so none is deleted this sweep: HTTP 403.*grant the worker's service account list on rolebindings.rbac.authorization.k8s.io cluster-wide/),
  ]);
});

test('an unreachable API server gives one line per kind of call, not a wait per object', async () => {
  const down = new KubeConfig();
  down.loadFromOptions({
    clusters: [{ name: 'c', server: 'http://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'u', token: 'x' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const report = await new K8sRoleMirror({ kubeConfig: down, timeoutMs: 2000 }).mirror([cls({ a: ['k8s-sa:NS/a'], b: ['k8s-sa:NS/b'] })]);
  expect(report.applied).toBe(0);
  expect(report.errors).toHaveLength(1);
  expect(report.errors[0]).toMatch(/^cannot list the Roles kslate manages in all namespaces.*check that the API server at http:\/\/127\.0\.0\.1:1 is reachable/);
});
