/**
 * Classes from the cluster (decisions §1, docs/worker-cluster.md): SharedContext objects
 * (kslate.dev/v1), listed on every sweep and validated like the directory source's manifests.
 * Each object is told how it was reconciled through an `Accepted` status condition.
 *
 * A watch only hastens the next sweep (`onChange`, debounced); the LIST of each sweep stays the
 * source of truth, so a missed event costs at most one interval. client-node's informer stops
 * for good on most errors, so the watch here is client-node's `Watch` in a loop of our own:
 * restarted with exponential backoff, bounded by a server-side timeout and a client-side idle
 * limit, and stoppable with no timer left behind.
 */
import { CustomObjectsApi, Watch, type KubeConfig } from '@kubernetes/client-node';
import { parseManifest } from '../../handlers/class-schema.js';
import type { Logger } from '../../handlers/context.js';
import type { ClassManifest } from '../../handlers/types.js';
import type { ClassSource, ReconcileReport } from '../../worker/reconcile-classes.js';
import { apiMessage, callOptions, headerMiddleware, serverOf, statusOf } from './cluster.js';

export const GROUP = 'kslate.dev';
export const VERSION = 'v1';
export const PLURAL = 'sharedcontexts';
export const CONDITION = 'Accepted';

export type AcceptedReason = 'Applied' | 'Invalid' | 'Duplicate' | 'KindChange';

export interface ClusterClassSourceOptions {
  kubeConfig: KubeConfig;
  /** The namespace to list and watch; '' = all namespaces. */
  namespace: string;
  log: Logger;
  /** Called (debounced) when a SharedContext was added, changed or deleted: sweep earlier. */
  onChange?: () => void;
  now?: () => number;
  /** Per API call (default 10 s); also how long a watch may take to connect. */
  timeoutMs?: number;
  /** LIST page size (default 500). */
  pageSize?: number;
  /** Events within this long make one onChange call (default 1 s). */
  debounceMs?: number;
  /** Watch restarts wait this long at first, doubling up to backoffMaxMs (defaults 1 s, 60 s). */
  backoffMs?: number;
  backoffMaxMs?: number;
  /** The API server ends each watch after this long (default 300 s); a new one starts at once. */
  watchTimeoutSeconds?: number;
}

export interface ClusterClassSource {
  /** Lists every SharedContext; rejects (and marks the source unhealthy) when the LIST fails. */
  load(): Promise<ClassSource>;
  /** The last LIST succeeded within maxAgeMs and, once started, the watch is up (or was, within maxAgeMs). */
  healthy(maxAgeMs: number): boolean;
  /** When the last LIST succeeded (ms, the `now` clock). */
  readonly lastOkAt: number | null;
  /** `namespace/name` of every SharedContext the last LIST returned, valid or not. */
  listed(): ReadonlySet<string>;
  /** Starts the watch that calls onChange. */
  start(): void;
  /** Stops the watch and every timer. */
  stop(): void;
}

interface Listed {
  namespace: string;
  name: string;
  uid?: string;
  generation?: number;
  problems?: string[];
  conditions: Condition[];
}

interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime: string;
}

export function createClusterClassSource(opts: ClusterClassSourceOptions): ClusterClassSource {
  const api = opts.kubeConfig.makeApiClient(CustomObjectsApi);
  const now = opts.now ?? Date.now;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const pageSize = opts.pageSize ?? 500;
  const debounceMs = opts.debounceMs ?? 1000;
  const backoffMs = opts.backoffMs ?? 1000;
  const backoffMaxMs = opts.backoffMaxMs ?? 60_000;
  const watchTimeoutSeconds = opts.watchTimeoutSeconds ?? 300;
  const server = serverOf(opts.kubeConfig);
  const ns = opts.namespace;
  const where = ns ? `in namespace ${ns}` : 'in all namespaces';
  const { log } = opts;

  let lastOkAt: number | null = null;
  let listFailed = false;
  let listed = new Set<string>();
  // The generation of each SharedContext (by uid) the last LIST saw: watch events for what
  // a sweep already saw (our own status writes, a watch's initial ADDED events) change nothing.
  let seen = new Map<string, number | undefined>();

  async function listAll(): Promise<any[]> {
    const items: any[] = [];
    let cont: string | undefined;
    for (let page = 0; page < 1000; page++) {
      const options = callOptions(timeoutMs);
      const list = ns
        ? await api.listNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace: ns, limit: pageSize, _continue: cont }, options)
        : await api.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, limit: pageSize, _continue: cont }, options);
      items.push(...(Array.isArray(list?.items) ? list.items : []));
      cont = list?.metadata?.continue || undefined;
      if (!cont) break;
    }
    return items;
  }

  async function load(): Promise<ClassSource> {
    let items: any[];
    try {
      items = await listAll();
    } catch (e) {
      listFailed = true;
      throw new Error(`cannot list SharedContexts (sharedcontexts.kslate.dev) ${where} at ${server}: ${apiMessage(e)}; ${listHint(statusOf(e))}`);
    }
    listFailed = false;
    lastOkAt = now();

    const manifests: ClassManifest[] = [];
    const problems: string[] = [];
    const invalid: { name: string; namespace: string; reason: string }[] = [];
    const uids = new Map<string, string>();
    const objects: Listed[] = [];
    const nextSeen = new Map<string, number | undefined>();
    for (const item of items) {
      const meta = item?.metadata ?? {};
      const name = String(meta.name ?? '');
      const namespace = String(meta.namespace ?? '');
      const obj: Listed = {
        namespace,
        name,
        uid: typeof meta.uid === 'string' ? meta.uid : undefined,
        generation: typeof meta.generation === 'number' ? meta.generation : undefined,
        conditions: Array.isArray(item?.status?.conditions) ? item.status.conditions : [],
      };
      objects.push(obj);
      if (obj.uid) {
        uids.set(`${namespace}/${name}`, obj.uid);
        nextSeen.set(obj.uid, obj.generation);
      }
      // Only what the manifest says: the server's metadata (uid, managedFields, ...) and status
      // are not part of the class.
      const result = parseManifest({ apiVersion: item?.apiVersion, kind: item?.kind, metadata: { name, namespace }, spec: item?.spec });
      if (result.ok) manifests.push(result.manifest);
      else {
        obj.problems = result.problems;
        for (const p of result.problems) problems.push(`${namespace}/${name}: ${p}`);
        invalid.push({ name, namespace, reason: `invalid manifest: ${result.problems.join('; ')}` });
      }
    }
    listed = new Set(objects.map((o) => `${o.namespace}/${o.name}`));
    seen = nextSeen;
    return { manifests, problems, invalid, uids, report: (rec) => report(objects, rec) };
  }

  function listHint(status: number | null): string {
    if (status === null) return `check that the API server at ${server} is reachable from the worker; the next sweep retries`;
    if (status === 401) return "the API server refused the worker's credentials; check its service-account token or kubeconfig";
    if (status === 403) return `grant the worker's service account list and watch on sharedcontexts.kslate.dev ${ns ? `in namespace ${ns}` : 'cluster-wide (a ClusterRole)'}; see docs/worker-cluster.md`;
    if (status === 404) return 'install the SharedContext CRD (sharedcontexts.kslate.dev, in the chart\'s crds/) and check the namespace exists';
    return 'the next sweep retries';
  }

  /** Writes each object's Accepted condition when it changed; failures are logged, never thrown. */
  async function report(objects: Listed[], rec: ReconcileReport): Promise<void> {
    for (const obj of objects) {
      const want = desiredCondition(obj, rec);
      if (!want) continue;
      const old = obj.conditions.find((c) => c.type === CONDITION);
      if (old && old.status === want.status && old.reason === want.reason && old.message === want.message && old.observedGeneration === obj.generation) continue;
      const condition: Condition = {
        type: CONDITION,
        ...want,
        ...(obj.generation !== undefined ? { observedGeneration: obj.generation } : {}),
        lastTransitionTime: old && old.status === want.status ? old.lastTransitionTime : rfc3339(now()),
      };
      const conditions = [...obj.conditions.filter((c) => c.type !== CONDITION), condition];
      try {
        await api.patchNamespacedCustomObjectStatus(
          { group: GROUP, version: VERSION, plural: PLURAL, namespace: obj.namespace, name: obj.name, body: { status: { conditions } } },
          callOptions(timeoutMs, [headerMiddleware('Content-Type', 'application/merge-patch+json')]),
        );
        obj.conditions = conditions;
      } catch (e) {
        const status = statusOf(e);
        log.warn(
          `cannot write the ${CONDITION} condition of SharedContext ${obj.namespace}/${obj.name}: ${apiMessage(e)}; ` +
            (status === 403
              ? "grant the worker's service account patch on sharedcontexts/status (kslate.dev)"
              : status === null
                ? `check that the API server at ${server} is reachable; the next sweep retries`
                : 'the next sweep retries'),
          { class: obj.name, namespace: obj.namespace },
        );
        // Unreachable: the other objects would only wait out their time limits too.
        if (status === null) return;
      }
    }
  }

  // ---- the watch ----

  const watch = new Watch(opts.kubeConfig);
  const watchPath = `/apis/${GROUP}/${VERSION}${ns ? `/namespaces/${encodeURIComponent(ns)}` : ''}/${PLURAL}`;
  let started = false;
  let stopped = true;
  let attempt: { controller?: AbortController; finished: boolean } | null = null;
  let restartTimer: NodeJS.Timeout | null = null;
  let connectTimer: NodeJS.Timeout | null = null;
  let idleTimer: NodeJS.Timeout | null = null;
  let debounceTimer: NodeJS.Timeout | null = null;
  let delay = backoffMs;
  let resourceVersion = '';
  let watchConnected = false;
  let watchOkAt: number | null = null;

  const clear = (t: NodeJS.Timeout | null) => {
    if (t) clearTimeout(t);
    return null;
  };

  function changed() {
    if (!opts.onChange || debounceTimer || stopped) return;
    debounceTimer = setTimeout(() => {
      debounceTimer = null;
      try {
        opts.onChange!();
      } catch (e) {
        log.warn(`the SharedContext change callback failed: ${(e as Error)?.message ?? e}`);
      }
    }, debounceMs);
  }

  function onEvent(type: string, obj: any) {
    watchOkAt = now();
    armIdle();
    const rv = obj?.metadata?.resourceVersion;
    if (type === 'ERROR') {
      // 410 Gone: the resourceVersion is too old; the server ends the stream, the next starts afresh.
      if (obj?.code === 410) resourceVersion = '';
      return;
    }
    if (typeof rv === 'string') resourceVersion = rv;
    delay = backoffMs; // events flow: the next failure starts the backoff afresh
    const uid = obj?.metadata?.uid;
    if (type === 'BOOKMARK' || typeof uid !== 'string') return;
    if (type === 'DELETED') {
      if (seen.has(uid)) changed();
      seen.delete(uid);
      return;
    }
    if (type === 'ADDED' || type === 'MODIFIED') {
      const generation = typeof obj.metadata.generation === 'number' ? obj.metadata.generation : undefined;
      if (!seen.has(uid) || seen.get(uid) !== generation) {
        seen.set(uid, generation);
        changed();
      }
    }
  }

  /** The watch got no event (bookmarks included) for far longer than its own timeout: presumed dead. */
  function armIdle() {
    idleTimer = clear(idleTimer);
    if (stopped) return;
    idleTimer = setTimeout(() => {
      idleTimer = null;
      attempt?.controller?.abort();
    }, (watchTimeoutSeconds + 60) * 1000);
  }

  function connect() {
    restartTimer = null;
    if (stopped) return;
    const mine: { controller?: AbortController; finished: boolean } = { finished: false };
    attempt = mine;
    const connectedAt = now();
    const done = (err: unknown) => {
      if (mine.finished) return;
      mine.finished = true;
      connectTimer = clear(connectTimer);
      idleTimer = clear(idleTimer);
      if (attempt !== mine || stopped) return;
      watchConnected = false;
      attempt = null;
      const code = (err as { statusCode?: number; code?: unknown } | null)?.statusCode;
      if (code === 410) resourceVersion = '';
      if (!err) {
        // The server ended the watch (its timeout): start the next one at once, unless it
        // ended at once, which would otherwise loop without pause.
        if (now() - connectedAt >= backoffMs) {
          delay = backoffMs;
          return connect();
        }
        log.debug('the SharedContext watch ended at once; restarting after a pause', { delay_ms: delay });
      } else {
        const message = code ? `HTTP ${code} ${(err as Error).message}` : apiMessage(err);
        log.warn(`the SharedContext watch ${where} at ${server} failed (${message}); restarting it in ${delay} ms (classes are still listed every sweep)`);
      }
      restartTimer = setTimeout(connect, delay);
      delay = Math.min(delay * 2, backoffMaxMs);
    };
    // Watch.watch resolves once the server answered; one that never does is abandoned.
    connectTimer = setTimeout(() => {
      connectTimer = null;
      done(new Error(`no answer to the watch request within ${timeoutMs} ms`));
    }, timeoutMs);
    const query: Record<string, string | number | boolean> = { allowWatchBookmarks: true, timeoutSeconds: watchTimeoutSeconds };
    if (resourceVersion) query.resourceVersion = resourceVersion;
    // Lines still buffered from an attempt that was abandoned or stopped are not events any more.
    const events = (type: string, obj: any) => {
      if (attempt === mine && !stopped) onEvent(type, obj);
    };
    watch.watch(watchPath, query, events, done).then(
      (controller) => {
        mine.controller = controller;
        if (mine.finished || stopped || attempt !== mine) {
          controller.abort();
          return;
        }
        connectTimer = clear(connectTimer);
        watchConnected = true;
        watchOkAt = now();
        armIdle();
      },
      (err) => done(err),
    );
  }

  return {
    load,
    get lastOkAt() {
      return lastOkAt;
    },
    listed: () => listed,
    healthy(maxAgeMs) {
      const t = now();
      if (listFailed || lastOkAt === null || t - lastOkAt > maxAgeMs) return false;
      if (!started) return true;
      return watchConnected || (watchOkAt !== null && t - watchOkAt <= maxAgeMs);
    },
    start() {
      if (!stopped) return;
      started = true;
      stopped = false;
      delay = backoffMs;
      watchOkAt = now();
      connect();
    },
    stop() {
      stopped = true;
      watchConnected = false;
      restartTimer = clear(restartTimer);
      connectTimer = clear(connectTimer);
      idleTimer = clear(idleTimer);
      debounceTimer = clear(debounceTimer);
      const a = attempt;
      attempt = null;
      if (a) {
        a.finished = true;
        a.controller?.abort();
      }
    },
  };
}

/** The ways a ReconcileReport can leave an object; undefined when the report does not mention it. */
function desiredCondition(obj: Listed, rec: ReconcileReport): { status: 'True' | 'False'; reason: AcceptedReason; message: string } | undefined {
  if (obj.problems) return { status: 'False', reason: 'Invalid', message: obj.problems.join('; ') };
  const refused = rec.refused.find((r) => r.name === obj.name && r.namespace === obj.namespace);
  if (refused) return { status: 'False', reason: refused.reason.startsWith('Duplicate') ? 'Duplicate' : 'KindChange', message: refused.reason };
  if (rec.live.some((l) => l.name === obj.name && l.namespace === obj.namespace)) {
    return { status: 'True', reason: 'Applied', message: `class ${obj.name} is applied` };
  }
  return undefined;
}

/** RFC 3339 in seconds, as Kubernetes writes metav1.Time. */
function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
