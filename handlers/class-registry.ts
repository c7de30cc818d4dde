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

/** A registry over a loader (the database), refreshed at most every `ttlMs`. */
export function cachedRegistry(load: () => Promise<ClassRow[]>, now: () => number, ttlMs = 1000): ClassRegistry {
  let cache: Map<string, CompiledClass> | null = null;
  let loadedAt = 0;
  let inflight: Promise<Map<string, CompiledClass>> | null = null;

  async function current(): Promise<Map<string, CompiledClass>> {
    if (cache && now() - loadedAt < ttlMs) return cache;
    if (!inflight) {
      inflight = load()
        .then((rows) => {
          const next = new Map(rows.map((r) => [r.name, compileClass(r)] as const));
          cache = next;
          loadedAt = now();
          return next;
        })
        .finally(() => {
          inflight = null;
        });
    }
    return inflight;
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
