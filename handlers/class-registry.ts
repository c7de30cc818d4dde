/**
 * Classes as gateways see them: read from the class table (never from manifests directly,
 * decisions §1), compiled once per change and cached for a short time so a reconcile made
 * by another process shows up within `ttlMs` without per-request JSON work.
 */
import type { ClassRow } from '../db/port.js';
import type { ClassSpec, FieldDef, RoleDef } from './types.js';

export interface CompiledRole {
  name: string;
  def: RoleDef;
  readAll: boolean;
  writeAll: boolean;
  read: ReadonlySet<string>;
  write: ReadonlySet<string>;
}

export interface CompiledClass {
  name: string;
  namespace: string;
  spec: ClassSpec;
  gone: boolean;
  idPattern: RegExp | null;
  fields: ReadonlyMap<string, FieldDef>;
  roles: CompiledRole[];
}

export interface ClassRegistry {
  get(name: string): Promise<CompiledClass | null>;
  list(): Promise<CompiledClass[]>;
  /** Drop the cache, e.g. right after this process reconciled. */
  invalidate(): void;
}

/** True when a role subject (`apikey:alice`, `k8s-sa:ns/*`) names the author. */
export function subjectMatches(subject: string, author: string): boolean {
  if (subject === author) return true;
  if (subject.endsWith('/*')) {
    const prefix = subject.slice(0, -1); // keep the slash: `k8s-sa:ns/`
    return author.startsWith(prefix) && !author.slice(prefix.length).includes('/');
  }
  return false;
}

export function rolesOf(cls: CompiledClass, author: string): CompiledRole[] {
  return cls.roles.filter((r) => r.def.subjects.some((s) => subjectMatches(s, author)));
}

export function compileClass(row: Pick<ClassRow, 'name' | 'namespace' | 'spec' | 'gone'>): CompiledClass {
  const spec = row.spec as ClassSpec;
  let idPattern: RegExp | null = null;
  if (spec.idPattern) {
    try {
      idPattern = new RegExp(spec.idPattern); // compiled exactly as class-schema validates it
    } catch {
      // Validated at reconcile; a pattern that no longer compiles matches nothing.
      idPattern = /(?!)/;
    }
  }
  const roles: CompiledRole[] = Object.entries(spec.roles ?? {}).map(([name, def]) => ({
    name,
    def,
    readAll: def.read?.includes('*') ?? false,
    writeAll: def.write?.includes('*') ?? false,
    read: new Set(def.read ?? []),
    write: new Set(def.write ?? []),
  }));
  return {
    name: row.name,
    namespace: row.namespace,
    spec,
    gone: row.gone,
    idPattern,
    fields: new Map(Object.entries(spec.fields ?? {})),
    roles,
  };
}

/**
 * A registry over a loader (the database), refreshed every `ttlMs`. An expired cache is
 * still answered while the refresh runs (stale while revalidate), up to `maxStaleMs`: every
 * request of the second no longer waits for the reload's round trip (a burst in the tail
 * latency once a second). A class whose spec did not change keeps its compiled form.
 */
export function cachedRegistry(
  load: () => Promise<ClassRow[]>,
  now: () => number,
  ttlMs = 1000,
  maxStaleMs = 10 * ttlMs,
): ClassRegistry {
  let cache: Map<string, CompiledClass> | null = null;
  let loadedAt = 0;
  let inflight: Promise<Map<string, CompiledClass>> | null = null;
  const specs = new Map<string, string>();
  /** The last refresh failed (the database is unreachable): no stale answers until one succeeds. */
  let failed = false;

  function refresh(): Promise<Map<string, CompiledClass>> {
    inflight ??= load()
      .then((rows) => {
        const next = new Map<string, CompiledClass>();
        for (const r of rows) {
          const key = JSON.stringify([r.spec, r.namespace, r.gone, r.status]);
          const old = cache?.get(r.name);
          next.set(r.name, old && specs.get(r.name) === key ? old : compileClass(r));
          specs.set(r.name, key);
        }
        for (const name of specs.keys()) if (!next.has(name)) specs.delete(name);
        cache = next;
        loadedAt = now();
        failed = false;
        return next;
      })
      .catch((e: unknown) => {
        failed = true;
        throw e;
      })
      .finally(() => {
        inflight = null;
      });
    return inflight;
  }

  async function current(): Promise<Map<string, CompiledClass>> {
    const age = now() - loadedAt;
    if (cache && age < ttlMs) return cache;
    if (cache && age < maxStaleMs && !failed) {
      // A request waits only once the cache is older than maxStaleMs or a refresh failed
      // (then it answers as the database does: 503 while it is unreachable).
      refresh().catch(() => undefined);
      return cache;
    }
    return refresh();
  }

  return {
    async get(name) {
      return (await current()).get(name) ?? null;
    },
    async list() {
      return [...(await current()).values()];
    },
    invalidate() {
      cache = null;
    },
  };
}
