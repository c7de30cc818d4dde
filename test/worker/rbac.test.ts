/**
 * The RBAC objects that mirror class roles (decisions §5): one Role and one RoleBinding per
 * class role with k8s-sa subjects, owned by the SharedContext.
 */
import { expect, test } from 'vitest';
import { classOf, desiredRbac, MANAGED_SELECTOR, rbacName, rbacSubject } from '../../worker/rbac.js';
import type { LiveClass } from '../../worker/sweep.js';
import { roleSpec } from './role-spec.js';

const spec = roleSpec;

/** `uid: null` = the SharedContext's uid is unknown. */
const live = (name: string, namespace: string, roles: Record<string, string[]>, uid: string | null = `uid-${name}`): LiveClass => ({
  name,
  namespace,
  spec: spec(roles),
  ...(uid === null ? {} : { uid }),
});

test('a role with k8s-sa subjects gets a Role granting get on its SharedContext and a RoleBinding to them', () => {
  const { roles, bindings, errors } = desiredRbac([
    live('incident', 'team-a', { responder: ['k8s-sa:team-a/responder', 'apikey:alice', 'k8s-sa:team-b/*'] }),
  ]);
  expect(errors).toEqual([]);
  const owner = { apiVersion: 'kslate.dev/v1', kind: 'SharedContext', name: 'incident', uid: 'uid-incident', controller: true, blockOwnerDeletion: false };
  const labels = { 'app.kubernetes.io/managed-by': 'kslate', 'kslate.dev/class': 'incident', 'kslate.dev/role': 'responder' };
  expect(roles).toEqual([
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'kslate:incident:responder', namespace: 'team-a', labels, ownerReferences: [owner] },
      rules: [{ apiGroups: ['kslate.dev'], resources: ['sharedcontexts'], resourceNames: ['incident'], verbs: ['get'] }],
    },
  ]);
  expect(bindings).toEqual([
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'kslate:incident:responder', namespace: 'team-a', labels, ownerReferences: [owner] },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'kslate:incident:responder' },
      subjects: [
        { kind: 'ServiceAccount', name: 'responder', namespace: 'team-a' },
        { kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: 'system:serviceaccounts:team-b' },
      ],
    },
  ]);
});

test('roles without k8s-sa subjects get nothing; duplicate subjects are bound once', () => {
  const { roles, bindings } = desiredRbac([
    live('incident', 'team-a', { reviewer: ['apikey:bob', 'oidc:carol'], nobody: [], twice: ['k8s-sa:team-a/x', 'k8s-sa:team-a/x'] }),
  ]);
  expect(roles.map((r) => r.metadata.name)).toEqual(['kslate:incident:twice']);
  expect(bindings[0].subjects).toEqual([{ kind: 'ServiceAccount', name: 'x', namespace: 'team-a' }]);
});

test('a class without a uid is skipped with an error line, the others still mirrored', () => {
  const { roles, bindings, errors } = desiredRbac([
    live('alpha', 'team-a', { r: ['k8s-sa:team-a/a'] }, null),
    live('beta', 'team-a', { r: ['k8s-sa:team-a/b'] }),
  ]);
  expect(roles.map((r) => r.metadata.name)).toEqual(['kslate:beta:r']);
  expect(bindings.map((r) => r.metadata.name)).toEqual(['kslate:beta:r']);
  expect(errors).toHaveLength(1);
  expect(desiredRbac([live('alpha', 'team-a', { r: ['k8s-sa:team-a/a'] }, null)]).skipped).toEqual(['team-a/alpha']);
  expect(errors[0]).toMatch(/^class team-a\/alpha: .*uid is unknown.*garbage-collected.*next sweep/);
  // A class with no k8s-sa role needs no uid at all.
  expect(desiredRbac([live('gamma', 'team-a', { r: ['apikey:a'] }, null)]).errors).toEqual([]);
});

test('the order is deterministic: by namespace, then name, whatever the input order', () => {
  const classes = [
    live('zeta', 'team-a', { b: ['k8s-sa:team-a/x'], a: ['k8s-sa:team-a/y'] }),
    live('alpha', 'team-b', { r: ['k8s-sa:team-b/x'] }),
    live('alpha2', 'team-a', { r: ['k8s-sa:team-a/x'] }),
  ];
  const names = (l: LiveClass[]) => desiredRbac(l).roles.map((r) => `${r.metadata.namespace}/${r.metadata.name}`);
  expect(names(classes)).toEqual(['team-a/kslate:alpha2:r', 'team-a/kslate:zeta:a', 'team-a/kslate:zeta:b', 'team-b/kslate:alpha:r']);
  expect(names([...classes].reverse())).toEqual(names(classes));
  expect(desiredRbac([...classes].reverse()).bindings.map((b) => b.metadata.name)).toEqual(desiredRbac(classes).bindings.map((b) => b.metadata.name));
});

test('names, subjects and labels that are not valid label values', () => {
  expect(rbacName('incident', 'on_call')).toBe('kslate:incident:on_call');
  expect(rbacSubject('apikey:alice')).toBeNull();
  expect(rbacSubject('k8s-sa:ns/*')).toEqual({ kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: 'system:serviceaccounts:ns' });
  expect(MANAGED_SELECTOR).toBe('app.kubernetes.io/managed-by=kslate');
  // '_lead' cannot be a label value; the role label is left out, the name still says it.
  const { roles } = desiredRbac([live('cls-', 'team-a', { _lead: ['k8s-sa:team-a/x'] })]);
  expect(roles[0].metadata.name).toBe('kslate:cls-:_lead');
  expect(roles[0].metadata.labels).toEqual({ 'app.kubernetes.io/managed-by': 'kslate' });
  expect(classOf(roles[0].metadata)).toBe('cls-');
  expect(classOf({ name: 'kslate:a:b', labels: { 'kslate.dev/class': 'a' } })).toBe('a');
  expect(classOf({ name: 'admin' })).toBeNull();
});
