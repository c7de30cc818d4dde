/**
 * The RBAC objects that mirror class roles into a cluster (decisions §5). Pure: the
 * Kubernetes side (server-side apply, stale deletion) lives in runtime/k8s/role-mirror.ts.
 *
 * For each class role with at least one `k8s-sa:` subject: a Role `kslate:<class>:<role>` in
 * the class namespace granting `get` on that one SharedContext, and a RoleBinding of the same
 * name to those service accounts. Both are owned by the SharedContext, so Kubernetes
 * garbage-collects them with it. (RBAC names are path segments, so ':' is allowed.)
 */
import type { LiveClass } from './sweep.js';

export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'kslate';
/** The label selector that finds every Role and RoleBinding kslate manages. */
export const MANAGED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;
export const CLASS_LABEL = 'kslate.dev/class';
export const ROLE_LABEL = 'kslate.dev/role';
export const RBAC_GROUP = 'rbac.authorization.k8s.io';

export interface OwnerReference {
  apiVersion: 'kslate.dev/v1';
  kind: 'SharedContext';
  name: string;
  uid: string;
  controller: true;
  blockOwnerDeletion: false;
}

export interface ObjectMeta {
  name: string;
  namespace: string;
  labels: Record<string, string>;
  ownerReferences: OwnerReference[];
}

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  resourceNames: string[];
  verbs: string[];
}

export interface RoleObject {
  apiVersion: 'rbac.authorization.k8s.io/v1';
  kind: 'Role';
  metadata: ObjectMeta;
  rules: PolicyRule[];
}

export type RbacSubject =
  | { kind: 'ServiceAccount'; name: string; namespace: string }
  | { kind: 'Group'; apiGroup: typeof RBAC_GROUP; name: string };

export interface RoleRef {
  apiGroup: typeof RBAC_GROUP;
  kind: 'Role';
  name: string;
}

export interface RoleBindingObject {
  apiVersion: 'rbac.authorization.k8s.io/v1';
  kind: 'RoleBinding';
  metadata: ObjectMeta;
  roleRef: RoleRef;
  subjects: RbacSubject[];
}

export interface DesiredRbac {
  roles: RoleObject[];
  bindings: RoleBindingObject[];
  /** Classes left out, one sentence each (no uid: a Role without an owner would never be collected). */
  errors: string[];
  /** The classes left out (`namespace/name`): what exists for them must be kept, not deleted as stale. */
  skipped: string[];
}

/** `kslate:<class>:<role>`: the name of both the Role and the RoleBinding. */
export function rbacName(className: string, role: string): string {
  return `kslate:${className}:${role}`;
}

// A label value: at most 63 characters, alphanumerics at both ends, '-', '_' and '.' inside.
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/**
 * The RBAC subject a `k8s-sa:` subject stands for; null for other providers.
 * `k8s-sa:ns/name` is that service account, `k8s-sa:ns/*` the namespace's group.
 */
export function rbacSubject(subject: string): RbacSubject | null {
  if (!subject.startsWith('k8s-sa:')) return null;
  const [ns, sa] = subject.slice('k8s-sa:'.length).split('/');
  if (!ns || !sa) return null;
  if (sa === '*') return { kind: 'Group', apiGroup: RBAC_GROUP, name: `system:serviceaccounts:${ns}` };
  return { kind: 'ServiceAccount', name: sa, namespace: ns };
}

/** Every Role and RoleBinding the live classes need, sorted by namespace and name. */
export function desiredRbac(live: LiveClass[]): DesiredRbac {
  const roles: RoleObject[] = [];
  const bindings: RoleBindingObject[] = [];
  const errors: string[] = [];
  const skipped: string[] = [];
  for (const cls of live) {
    const mirrored = Object.entries(cls.spec.roles ?? {})
      .map(([role, def]) => ({ role, subjects: dedupe(def.subjects.map(rbacSubject).filter((s): s is RbacSubject => s !== null)) }))
      .filter((r) => r.subjects.length > 0);
    if (mirrored.length === 0) continue;
    if (!cls.uid) {
      errors.push(
        `class ${cls.namespace}/${cls.name}: no Role or RoleBinding mirrored because the SharedContext's uid is unknown ` +
          '(they would never be garbage-collected without an owner); the next sweep retries once the object is listed',
      );
      skipped.push(`${cls.namespace}/${cls.name}`);
      continue;
    }
    for (const { role, subjects } of mirrored) {
      const name = rbacName(cls.name, role);
      const labels: Record<string, string> = { [MANAGED_BY_LABEL]: MANAGED_BY };
      // Class and role names are almost always valid label values; when not (a trailing '-' or
      // a leading '_'), the object name still says which class and role it is for.
      if (LABEL_VALUE.test(cls.name)) labels[CLASS_LABEL] = cls.name;
      if (LABEL_VALUE.test(role)) labels[ROLE_LABEL] = role;
      const metadata = (): ObjectMeta => ({
        name,
        namespace: cls.namespace,
        labels: { ...labels },
        ownerReferences: [
          { apiVersion: 'kslate.dev/v1', kind: 'SharedContext', name: cls.name, uid: cls.uid!, controller: true, blockOwnerDeletion: false },
        ],
      });
      roles.push({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: metadata(),
        rules: [{ apiGroups: ['kslate.dev'], resources: ['sharedcontexts'], resourceNames: [cls.name], verbs: ['get'] }],
      });
      bindings.push({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: metadata(),
        roleRef: { apiGroup: RBAC_GROUP, kind: 'Role', name },
        subjects,
      });
    }
  }
  const order = (a: { metadata: ObjectMeta }, b: { metadata: ObjectMeta }) =>
    compare(a.metadata.namespace, b.metadata.namespace) || compare(a.metadata.name, b.metadata.name);
  roles.sort(order);
  bindings.sort(order);
  return { roles, bindings, errors, skipped };
}

/** The class a kslate-managed Role or RoleBinding is for: its class label, else its name. */
export function classOf(meta: { name?: string; labels?: Record<string, string> }): string | null {
  const label = meta.labels?.[CLASS_LABEL];
  if (label) return label;
  const m = /^kslate:([^:]+):/.exec(meta.name ?? '');
  return m ? m[1]! : null;
}

function dedupe(subjects: RbacSubject[]): RbacSubject[] {
  const seen = new Set<string>();
  return subjects.filter((s) => {
    const key = JSON.stringify(s);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
