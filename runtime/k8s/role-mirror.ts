/**
 * Role mirroring against a cluster (decisions §5, docs/worker-cluster.md): server-side apply
 * of the Roles and RoleBindings worker/rbac.ts computes, then deletion of the managed ones no
 * class needs any more. Every call is time-limited; a failing object becomes one error line
 * and the others still go through.
 */
import { RbacAuthorizationV1Api, type KubeConfig, type V1Role, type V1RoleBinding } from '@kubernetes/client-node';
import {
  classOf,
  desiredRbac,
  MANAGED_SELECTOR,
  RBAC_GROUP,
  type RbacSubject,
  type RoleBindingObject,
  type RoleObject,
} from '../../worker/rbac.js';
import type { LiveClass, MirrorReport, RoleMirror } from '../../worker/sweep.js';
import { apiMessage, callOptions, headerMiddleware, serverOf, statusOf } from './cluster.js';

/** One page of a list call, and the parameters this mirror sends with each. */
type Page<T> = { items: T[]; metadata?: { _continue?: string } };
interface ListPage {
  labelSelector: string;
  limit: number;
  _continue: string | undefined;
}

export const FIELD_MANAGER = 'kslate-worker';

export interface K8sRoleMirrorOptions {
  kubeConfig: KubeConfig;
  /** The namespace the worker watches; empty or absent = cluster-wide. */
  namespace?: string;
  /**
   * `namespace/name` of every SharedContext the class source last listed, valid or not. A
   * managed object whose class is listed but not live (an invalid edit, a refused kind
   * change: the class table keeps the previous definition) is kept rather than deleted.
   * Without it, everything no live class needs is deleted.
   */
  listed?: () => ReadonlySet<string>;
  /** Per API call (default 10 s). */
  timeoutMs?: number;
  /** LIST page size (default 500). */
  pageSize?: number;
}

type Kind = 'Role' | 'RoleBinding';
type Existing = { role: Map<string, V1Role>; binding: Map<string, V1RoleBinding> };

export class K8sRoleMirror implements RoleMirror {
  private readonly api: RbacAuthorizationV1Api;
  private readonly namespace: string;
  private readonly timeoutMs: number;
  private readonly pageSize: number;
  private readonly server: string;

  constructor(private readonly opts: K8sRoleMirrorOptions) {
    this.api = opts.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    this.namespace = opts.namespace ?? '';
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.pageSize = opts.pageSize ?? 500;
    this.server = serverOf(opts.kubeConfig);
  }

  async mirror(live: LiveClass[]): Promise<MirrorReport> {
    const desired = desiredRbac(live);
    const report: MirrorReport = { applied: 0, deleted: 0, errors: [...desired.errors] };
    // Once the API server cannot be reached, the remaining calls would only wait out their
    // time limits: they are skipped and the next sweep tries again.
    let unreachable = false;
    const call = async <T>(what: () => string, fn: () => Promise<T>, hint: (status: number | null) => string): Promise<T | undefined> => {
      if (unreachable) return undefined;
      try {
        return await fn();
      } catch (e) {
        const status = statusOf(e);
        if (status === null) unreachable = true;
        report.errors.push(`${what()}: ${apiMessage(e)}; ${hint(status)}`);
        return undefined;
      }
    };

    const existing = await this.listManaged(call);

    for (const role of desired.roles) {
      const have = existing?.role.get(keyOf(role.metadata));
      if (have && roleUpToDate(have, role)) continue;
      const ok = await call(() => `cannot apply ${describe('Role', role)}`, () => this.apply('Role', role), this.hint('patch', 'roles', role.metadata.namespace));
      if (ok) report.applied++;
    }
    for (const binding of desired.bindings) {
      const have = existing?.binding.get(keyOf(binding.metadata));
      if (have && bindingUpToDate(have, binding)) continue;
      // roleRef is immutable: a binding pointing elsewhere is deleted and created again.
      let recreate = have !== undefined && !sameRoleRef(have, binding);
      for (let attempt = 0; attempt < 2; attempt++) {
        if (recreate) {
          const gone = await call(
            () => `cannot delete ${describe('RoleBinding', binding)} to change its roleRef (immutable)`,
            () => this.delete('RoleBinding', binding.metadata.namespace, binding.metadata.name),
            this.hint('delete', 'rolebindings', binding.metadata.namespace),
          );
          if (!gone) break;
        }
        let conflict = false;
        const ok = await call(
          () => `cannot apply ${describe('RoleBinding', binding)}`,
          async () => {
            try {
              return await this.apply('RoleBinding', binding);
            } catch (e) {
              // Not in the managed list (its label was removed) but there, with another roleRef.
              if (!recreate && statusOf(e) === 422 && /roleRef/i.test(apiMessage(e))) {
                conflict = true;
                return undefined;
              }
              throw e;
            }
          },
          this.hint('patch', 'rolebindings', binding.metadata.namespace),
        );
        if (ok) report.applied++;
        if (!conflict) break;
        recreate = true;
      }
    }

    if (existing) {
      const want = new Set([...desired.roles, ...desired.bindings].map((o) => `${o.kind}/${keyOf(o.metadata)}`));
      const keep = new Set(desired.skipped);
      const listed = this.opts.listed?.();
      const stale = (kind: Kind, o: V1Role | V1RoleBinding): boolean => {
        const ns = o.metadata?.namespace ?? '';
        if (want.has(`${kind}/${ns}/${o.metadata?.name}`)) return false;
        const cls = classOf({ name: o.metadata?.name, labels: o.metadata?.labels });
        if (cls === null) return true;
        if (keep.has(`${ns}/${cls}`)) return false;
        // A listed class that is not live is invalid or refused: its roles stay until it is fixed.
        return !(listed?.has(`${ns}/${cls}`) && !live.some((l) => l.name === cls && l.namespace === ns));
      };
      for (const [kind, map] of [['RoleBinding', existing.binding], ['Role', existing.role]] as const) {
        for (const o of map.values()) {
          if (!stale(kind, o)) continue;
          const ns = o.metadata?.namespace ?? '';
          const name = o.metadata?.name ?? '';
          const gone = await call(
            () => `cannot delete the stale ${kind} ${ns}/${name} (no class role needs it any more)`,
            () => this.delete(kind, ns, name),
            this.hint('delete', kind === 'Role' ? 'roles' : 'rolebindings', ns),
          );
          if (gone === 'deleted') report.deleted++;
        }
      }
    }
    return report;
  }

  /** The managed Roles and RoleBindings by `namespace/name`; undefined when they cannot be listed. */
  private async listManaged(
    call: <T>(what: () => string, fn: () => Promise<T>, hint: (s: number | null) => string) => Promise<T | undefined>,
  ): Promise<Existing | undefined> {
    const where = this.namespace ? `in namespace ${this.namespace}` : 'in all namespaces';
    const ns = this.namespace;
    /** Every managed object of one kind: one namespace's list call, or the cluster-wide one. */
    const managed = <T>(
      kind: 'Roles' | 'RoleBindings',
      inNamespace: (p: { namespace: string } & ListPage) => Promise<Page<T>>,
      everywhere: (p: ListPage) => Promise<Page<T>>,
    ) =>
      call(
        () => `cannot list the ${kind} kslate manages ${where}, so none is deleted this sweep`,
        () => this.listAll<T>((cont) => {
          const page: ListPage = { labelSelector: MANAGED_SELECTOR, limit: this.pageSize, _continue: cont };
          return ns ? inNamespace({ namespace: ns, ...page }) : everywhere(page);
        }),
        this.hint('list', kind === 'Roles' ? 'roles' : 'rolebindings', ns || null),
      );
    const roles = await managed<V1Role>(
      'Roles',
      (p) => this.api.listNamespacedRole(p, this.options()),
      (p) => this.api.listRoleForAllNamespaces(p, this.options()),
    );
    const bindings = await managed<V1RoleBinding>(
      'RoleBindings',
      (p) => this.api.listNamespacedRoleBinding(p, this.options()),
      (p) => this.api.listRoleBindingForAllNamespaces(p, this.options()),
    );
    if (!roles || !bindings) return undefined;
    const byKey = <T extends V1Role | V1RoleBinding>(items: T[]) => new Map(items.map((o) => [`${o.metadata?.namespace}/${o.metadata?.name}`, o]));
    return { role: byKey(roles), binding: byKey(bindings) };
  }

  private async listAll<T>(page: (cont: string | undefined) => Promise<Page<T>>): Promise<T[]> {
    const items: T[] = [];
    let cont: string | undefined;
    // Bounded: 1000 pages of pageSize objects is far beyond any real cluster's kslate roles.
    for (let i = 0; i < 1000; i++) {
      const list = await page(cont);
      items.push(...list.items);
      cont = list.metadata?._continue || undefined;
      if (!cont) break;
    }
    return items;
  }

  private apply(kind: Kind, body: RoleObject | RoleBindingObject): Promise<unknown> {
    const param = {
      name: body.metadata.name,
      namespace: body.metadata.namespace,
      body,
      fieldManager: FIELD_MANAGER,
      force: true,
    };
    const options = this.options('application/apply-patch+yaml');
    return kind === 'Role' ? this.api.patchNamespacedRole(param, options) : this.api.patchNamespacedRoleBinding(param, options);
  }

  /** 'deleted', or 'absent' when it was already gone. */
  private async delete(kind: Kind, namespace: string, name: string): Promise<'deleted' | 'absent'> {
    try {
      if (kind === 'Role') await this.api.deleteNamespacedRole({ name, namespace }, this.options());
      else await this.api.deleteNamespacedRoleBinding({ name, namespace }, this.options());
      return 'deleted';
    } catch (e) {
      if (statusOf(e) === 404) return 'absent';
      throw e;
    }
  }

  private options(contentType?: string) {
    return callOptions(this.timeoutMs, contentType ? [headerMiddleware('Content-Type', contentType)] : []);
  }

  /** What to do about a failed call, by HTTP status (null: no answer). */
  private hint(verb: string, resource: 'roles' | 'rolebindings', namespace: string | null): (status: number | null) => string {
    const where = namespace ? `in namespace ${namespace}` : 'cluster-wide';
    return (status) => {
      if (status === null) return `check that the API server at ${this.server} is reachable from the worker; the next sweep retries`;
      if (status === 401) return "the API server refused the worker's credentials; check its service-account token or kubeconfig";
      if (status === 403) {
        const extra =
          resource === 'roles'
            ? ' (a Role granting get on sharedcontexts can only be created by a worker that itself holds get on sharedcontexts.kslate.dev: RBAC escalation prevention)'
            : resource === 'rolebindings'
              ? ' (binding a Role also requires holding its permissions, get on sharedcontexts.kslate.dev, or the bind verb)'
              : '';
        return `grant the worker's service account ${verb} on ${resource}.rbac.authorization.k8s.io ${where}${extra}; see docs/worker-cluster.md`;
      }
      if (status === 404) return `the namespace may not exist; the next sweep retries`;
      if (status === 422) return 'the API server refused the object as invalid; check the class and role names';
      return 'the next sweep retries';
    };
  }
}

function keyOf(meta: { namespace: string; name: string }): string {
  return `${meta.namespace}/${meta.name}`;
}

function describe(kind: Kind, o: RoleObject | RoleBindingObject): string {
  return `${kind} ${o.metadata.namespace}/${o.metadata.name}`;
}

/** Labels and owner as desired (other labels and owners may be there too). */
function metaUpToDate(have: V1Role | V1RoleBinding, want: RoleObject | RoleBindingObject): boolean {
  const labels = have.metadata?.labels ?? {};
  const owner = want.metadata.ownerReferences[0]!;
  return (
    Object.entries(want.metadata.labels).every(([k, v]) => labels[k] === v) &&
    (have.metadata?.ownerReferences ?? []).some((r) => r.uid === owner.uid && r.controller === true && r.kind === owner.kind)
  );
}

function roleUpToDate(have: V1Role, want: RoleObject): boolean {
  const rules = (have.rules ?? []).map((r) => ({
    apiGroups: r.apiGroups ?? [],
    resources: r.resources ?? [],
    resourceNames: r.resourceNames ?? [],
    verbs: r.verbs ?? [],
    ...(r.nonResourceURLs?.length ? { nonResourceURLs: r.nonResourceURLs } : {}),
  }));
  return metaUpToDate(have, want) && JSON.stringify(rules) === JSON.stringify(want.rules);
}

function sameRoleRef(have: V1RoleBinding, want: RoleBindingObject): boolean {
  return have.roleRef?.kind === want.roleRef.kind && have.roleRef?.name === want.roleRef.name && have.roleRef?.apiGroup === want.roleRef.apiGroup;
}

function bindingUpToDate(have: V1RoleBinding, want: RoleBindingObject): boolean {
  const norm = (s: { kind: string; name: string; namespace?: string; apiGroup?: string }) =>
    `${s.kind}|${s.apiGroup ?? (s.kind === 'ServiceAccount' ? '' : RBAC_GROUP)}|${s.namespace ?? ''}|${s.name}`;
  const a = (have.subjects ?? []).map(norm);
  const b = want.subjects.map((s: RbacSubject) => norm(s));
  return metaUpToDate(have, want) && sameRoleRef(have, want) && JSON.stringify(a) === JSON.stringify(b);
}
