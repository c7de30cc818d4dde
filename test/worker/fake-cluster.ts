/**
 * A loopback stand-in for the parts of the Kubernetes API the worker uses, and a kubeconfig
 * pointing at it (token auth): the worker reaches it through @kubernetes/client-node exactly
 * as it would reach a cluster, in-process or as a child `kslate worker` (KUBECONFIG=...).
 *
 * It holds SharedContexts (set by the test: add/update/delete, each with a uid,
 * resourceVersion and generation), Roles and RoleBindings, and records every request. It
 * serves: LIST and WATCH of sharedcontexts (namespaced and cluster-wide; a watch is a chunked
 * stream of JSON lines `{type, object}`), PATCH .../status (merge patch), and PATCH (server-side
 * apply) / GET / LIST (labelSelector, limit/continue) / DELETE of roles and rolebindings.
 * `fail()` makes matching requests answer an error; `endWatches()` closes every open watch.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { writeKubeconfig } from '../setup/kubeconfig.js';

export const WORKER_TOKEN = 'worker-sa-token-for-the-fake';

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  contentType: string | undefined;
  authorization: string | undefined;
  body: any;
}

export interface FailRule {
  method?: string;
  /** Matched against the decoded path: a substring, or a regular expression. */
  path: string | RegExp;
  /** Only watch requests (true) or only non-watch requests (false). */
  watch?: boolean;
  status: number;
  message?: string;
  /** How many requests to fail; default: until clearFailures(). */
  times?: number;
}

type Obj = Record<string, any>;

export interface FakeCluster {
  port: number;
  server: string;
  kubeconfig: string;
  requests: RecordedRequest[];
  /** Adds a SharedContext (generation 1) and tells open watches. */
  addContext(o: { name: string; namespace: string; spec: unknown; apiVersion?: string; kind?: string }): Obj;
  /** Replaces a SharedContext's spec (generation + 1). */
  updateContext(namespace: string, name: string, spec: unknown): Obj;
  deleteContext(namespace: string, name: string): void;
  context(namespace: string, name: string): Obj | undefined;
  /** Puts a Role or RoleBinding in place as someone else would (no request recorded). */
  putRbac(o: Obj): void;
  role(namespace: string, name: string): Obj | undefined;
  binding(namespace: string, name: string): Obj | undefined;
  roles(): Obj[];
  bindings(): Obj[];
  fail(rule: FailRule): void;
  clearFailures(): void;
  /** Ends every open watch stream normally (as the API server does at its timeout). */
  endWatches(): void;
  /** Watch streams open right now. */
  openWatches(): number;
  /** Requests matching method and a path substring. */
  requestsTo(method: string, path: string | RegExp): RecordedRequest[];
  reset(): void;
  close(): Promise<void>;
}

const SC = '/apis/kslate.dev/v1';
const RBAC = '/apis/rbac.authorization.k8s.io/v1';

export async function startFakeCluster(): Promise<FakeCluster> {
  let rv = 1000;
  const nextRv = () => String(++rv);
  const contexts = new Map<string, Obj>();
  const rbac = { roles: new Map<string, Obj>(), rolebindings: new Map<string, Obj>() };
  const watches = new Set<{ res: ServerResponse; namespace: string | null }>();
  let failures: FailRule[] = [];
  const sockets = new Set<Socket>();
  const key = (ns: string, name: string) => `${ns}/${name}`;
  const clone = <T>(o: T): T => JSON.parse(JSON.stringify(o));
  const sorted = (m: Map<string, Obj>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, o]) => o);

  const emit = (type: string, obj: Obj) => {
    for (const w of watches) {
      if (w.namespace === null || w.namespace === obj.metadata.namespace) w.res.write(`${JSON.stringify({ type, object: obj })}\n`);
    }
  };

  const status = (res: ServerResponse, code: number, message: string, reason = '') => {
    res.writeHead(code, { 'content-type': 'application/json' }).end(
      JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code }),
    );
  };
  const json = (res: ServerResponse, code: number, body: unknown) => {
    res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };

  const matches = (o: Obj, selector: string | undefined) => {
    if (!selector) return true;
    return selector.split(',').every((term) => {
      const [k, v] = term.split('=');
      return o.metadata?.labels?.[k!] === v;
    });
  };

  const list = (res: ServerResponse, kind: string, items: Obj[], query: Record<string, string>) => {
    const all = items.filter((o) => matches(o, query.labelSelector));
    const start = query.continue ? Number(query.continue) : 0;
    const limit = query.limit ? Number(query.limit) : all.length;
    const page = all.slice(start, start + limit);
    const more = start + limit < all.length;
    json(res, 200, {
      apiVersion: kind.startsWith('Role') ? 'rbac.authorization.k8s.io/v1' : 'kslate.dev/v1',
      kind,
      metadata: { resourceVersion: String(rv), ...(more ? { continue: String(start + limit) } : {}) },
      items: page,
    });
  };

  const handle = (req: IncomingMessage, res: ServerResponse, bodyText: string) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const path = decodeURIComponent(url.pathname);
    const query = Object.fromEntries(url.searchParams.entries());
    const method = req.method ?? 'GET';
    let body: any;
    try {
      body = bodyText ? JSON.parse(bodyText) : undefined;
    } catch {
      body = bodyText;
    }
    fake.requests.push({ method, path, query, contentType: req.headers['content-type'], authorization: req.headers.authorization, body });
    if (req.headers.authorization !== `Bearer ${WORKER_TOKEN}`) return status(res, 401, 'Unauthorized', 'Unauthorized');

    const isWatch = query.watch === 'true' || query.watch === '1';
    const rule = failures.find(
      (f) =>
        (f.method === undefined || f.method === method) &&
        (f.watch === undefined || f.watch === isWatch) &&
        (typeof f.path === 'string' ? path.includes(f.path) : f.path.test(path)),
    );
    if (rule) {
      if (rule.times !== undefined && --rule.times <= 0) failures = failures.filter((f) => f !== rule);
      return status(res, rule.status, rule.message ?? `the fake was told to fail this request with ${rule.status}`, rule.status === 403 ? 'Forbidden' : '');
    }

    let m: RegExpExecArray | null;
    // SharedContexts: list / watch.
    if ((m = new RegExp(`^${SC}(?:/namespaces/([^/]+))?/sharedcontexts$`).exec(path)) && method === 'GET') {
      const ns = m[1] ?? null;
      const items = sorted(contexts).filter((o) => ns === null || o.metadata.namespace === ns);
      if (!isWatch) return list(res, 'SharedContextList', items, query);
      res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
      res.flushHeaders();
      const w = { res, namespace: ns };
      watches.add(w);
      res.on('close', () => watches.delete(w));
      // No resourceVersion: synthetic ADDED events for what exists, as a real API server sends.
      if (!query.resourceVersion) for (const o of items) res.write(`${JSON.stringify({ type: 'ADDED', object: o })}\n`);
      return;
    }
    // SharedContexts: get / status.
    if ((m = new RegExp(`^${SC}/namespaces/([^/]+)/sharedcontexts/([^/]+)(/status)?$`).exec(path))) {
      const o = contexts.get(key(m[1]!, m[2]!));
      if (!o) return status(res, 404, `sharedcontexts.kslate.dev "${m[2]}" not found`, 'NotFound');
      if (method === 'GET') return json(res, 200, o);
      if (method === 'PATCH' && m[3]) {
        if (req.headers['content-type'] !== 'application/merge-patch+json') return status(res, 415, `unsupported patch type ${req.headers['content-type']}`);
        o.status = mergePatch(o.status ?? {}, body?.status ?? {});
        o.metadata.resourceVersion = nextRv();
        emit('MODIFIED', o);
        return json(res, 200, o);
      }
      return status(res, 405, 'method not allowed');
    }
    // Roles and RoleBindings: list.
    if ((m = new RegExp(`^${RBAC}(?:/namespaces/([^/]+))?/(roles|rolebindings)$`).exec(path)) && method === 'GET') {
      const ns = m[1] ?? null;
      const plural = m[2] as 'roles' | 'rolebindings';
      const items = sorted(rbac[plural]).filter((o) => ns === null || o.metadata.namespace === ns);
      return list(res, plural === 'roles' ? 'RoleList' : 'RoleBindingList', items, query);
    }
    // Roles and RoleBindings: get / apply / delete.
    if ((m = new RegExp(`^${RBAC}/namespaces/([^/]+)/(roles|rolebindings)/([^/]+)$`).exec(path))) {
      const [ns, plural, name] = [m[1]!, m[2] as 'roles' | 'rolebindings', m[3]!];
      const store = rbac[plural];
      const existing = store.get(key(ns, name));
      const what = `${plural}.rbac.authorization.k8s.io "${name}"`;
      if (method === 'GET') return existing ? json(res, 200, existing) : status(res, 404, `${what} not found`, 'NotFound');
      if (method === 'DELETE') {
        if (!existing) return status(res, 404, `${what} not found`, 'NotFound');
        store.delete(key(ns, name));
        return json(res, 200, { kind: 'Status', apiVersion: 'v1', status: 'Success', details: { name, kind: plural } });
      }
      if (method === 'PATCH') {
        if (req.headers['content-type'] !== 'application/apply-patch+yaml') return status(res, 415, `the fake only supports server-side apply, not ${req.headers['content-type']}`);
        if (!query.fieldManager) return status(res, 400, 'fieldManager is required for apply patch', 'BadRequest');
        if (body?.metadata?.name !== name || (body.metadata.namespace ?? ns) !== ns) return status(res, 400, 'the name in the body does not match the URL', 'BadRequest');
        if (plural === 'rolebindings' && existing && JSON.stringify(existing.roleRef) !== JSON.stringify(body.roleRef)) {
          return status(res, 422, `RoleBinding.rbac.authorization.k8s.io "${name}" is invalid: roleRef: Invalid value: cannot change roleRef`, 'Invalid');
        }
        const { metadata, ...rest } = body;
        const next: Obj = {
          ...(existing ?? {}),
          ...rest,
          metadata: {
            ...(existing?.metadata ?? { uid: randomUUID(), creationTimestamp: new Date().toISOString() }),
            ...metadata,
            namespace: ns,
            resourceVersion: nextRv(),
          },
        };
        store.set(key(ns, name), next);
        return json(res, existing ? 200 : 201, next);
      }
      return status(res, 405, 'method not allowed');
    }
    status(res, 404, `the fake serves no ${method} ${path}`, 'NotFound');
  };

  let server: Server;
  await new Promise<void>((resolve, reject) => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => handle(req, res, Buffer.concat(chunks).toString('utf8')));
    });
    server.on('connection', (s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server!.address() as AddressInfo).port;
  const { kubeconfig, dir } = writeKubeconfig(port, 'kslate-worker', WORKER_TOKEN);

  const fake: FakeCluster = {
    port,
    server: `http://127.0.0.1:${port}`,
    kubeconfig,
    requests: [],
    addContext(o) {
      const obj: Obj = {
        apiVersion: o.apiVersion ?? 'kslate.dev/v1',
        kind: o.kind ?? 'SharedContext',
        metadata: {
          name: o.name,
          namespace: o.namespace,
          uid: randomUUID(),
          resourceVersion: nextRv(),
          generation: 1,
          creationTimestamp: new Date().toISOString(),
          managedFields: [{ manager: 'kubectl', operation: 'Apply' }],
        },
        spec: clone(o.spec),
      };
      contexts.set(key(o.namespace, o.name), obj);
      emit('ADDED', obj);
      return obj;
    },
    updateContext(namespace, name, spec) {
      const obj = contexts.get(key(namespace, name));
      if (!obj) throw new Error(`no SharedContext ${namespace}/${name}`);
      obj.spec = clone(spec);
      obj.metadata.generation++;
      obj.metadata.resourceVersion = nextRv();
      emit('MODIFIED', obj);
      return obj;
    },
    deleteContext(namespace, name) {
      const obj = contexts.get(key(namespace, name));
      if (!obj) return;
      contexts.delete(key(namespace, name));
      obj.metadata.resourceVersion = nextRv();
      emit('DELETED', obj);
    },
    context: (namespace, name) => contexts.get(key(namespace, name)),
    putRbac(o) {
      const store = o.kind === 'Role' ? rbac.roles : rbac.rolebindings;
      store.set(key(o.metadata.namespace, o.metadata.name), { ...clone(o), metadata: { uid: randomUUID(), resourceVersion: nextRv(), ...clone(o.metadata) } });
    },
    role: (namespace, name) => rbac.roles.get(key(namespace, name)),
    binding: (namespace, name) => rbac.rolebindings.get(key(namespace, name)),
    roles: () => sorted(rbac.roles),
    bindings: () => sorted(rbac.rolebindings),
    fail(rule) {
      failures.push({ ...rule });
    },
    clearFailures() {
      failures = [];
    },
    endWatches() {
      for (const w of watches) w.res.end();
      watches.clear();
    },
    openWatches: () => watches.size,
    requestsTo: (method, path) =>
      fake.requests.filter((r) => r.method === method && (typeof path === 'string' ? r.path.includes(path) : path.test(r.path))),
    reset() {
      fake.requests = [];
      failures = [];
    },
    async close() {
      fake.endWatches();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return fake;
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: any, patch: any): any {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: any = target && typeof target === 'object' && !Array.isArray(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}
