/**
 * The class reconciler (decisions §1): writes the manifests of a source (a directory now,
 * the cluster later) into the class table. Gateways read classes only from that table.
 */
import type { ClassRow, SweepDb } from '../db/port.js';
import type { Logger } from '../handlers/context.js';
import type { ClassManifest, ClassSpec } from '../handlers/types.js';

export interface ClassSource {
  manifests: ClassManifest[];
  /**
   * Invalid manifests, one line per problem, `<file>[#<doc>]: <problem>` (a cluster object:
   * `<namespace>/<name>: <problem>`): while there are any, no class is marked gone (it may be one of them).
   */
  problems: string[];
  /**
   * Cluster sources: each invalid object by name. When given, an invalid manifest keeps only
   * its own class as it was (not marked gone, the refusal in its status) instead of keeping
   * every class from being marked gone: a directory's unparsable file may hold any class, a
   * cluster object's name is known.
   */
  invalid?: { name: string; namespace: string; reason: string }[];
  /** Cluster sources: the uid of each SharedContext by `namespace/name`, for ownerReferences. */
  uids?: ReadonlyMap<string, string>;
  /** Cluster sources: tell each object how it was reconciled (status conditions). */
  report?(report: ReconcileReport): Promise<void>;
}

export interface ReconcileReport {
  applied: string[];
  /** The manifests applied, as the class table now holds them. */
  live: { name: string; namespace: string; spec: ClassSpec }[];
  refused: { name: string; namespace: string; reason: string }[];
  problems: string[];
  markedGone: boolean;
  /**
   * Manifests (cluster objects) refused this time: invalid, a duplicate name or a kind change.
   * A refusal is the manifest's problem, not the sweep's: the worker reports it by a gauge,
   * its log (once per change) and, in a cluster, the object's Accepted condition.
   */
  refusedCount: number;
}

/**
 * The refusals and problems last logged per store, so each is logged when it appears (or
 * changes), not every sweep: a refused manifest stays refused until someone edits it.
 */
const loggedRefusals = new WeakMap<object, Set<string>>();

export async function reconcileClasses(db: Pick<SweepDb, 'listClasses' | 'applyClasses'>, source: ClassSource, log: Logger): Promise<ReconcileReport> {
  const existing = new Map<string, ClassRow>((await db.listClasses()).map((r) => [r.name, r]));
  const refused: ReconcileReport['refused'] = [];
  const live: { name: string; namespace: string; spec: ClassSpec }[] = [];

  // Class names are one flat namespace. The namespace that holds a class keeps it, even while
  // it is gone (its records remain and must not pass to another namespace); a new name goes
  // to the first manifest. Every other manifest of the name is refused as Duplicate.
  const byName = new Map<string, ClassManifest[]>();
  for (const m of source.manifests) byName.set(m.metadata.name, [...(byName.get(m.metadata.name) ?? []), m]);
  for (const [name, group] of byName) {
    const holder = existing.get(name);
    const winner = holder ? group.find((m) => m.metadata.namespace === holder.namespace) : group[0];
    for (const m of group) {
      if (m !== winner) {
        refused.push({
          name,
          namespace: m.metadata.namespace,
          reason: `Duplicate: class "${name}" is held by namespace ${holder?.namespace ?? winner!.metadata.namespace}`,
        });
      }
    }
    if (!winner) continue;
    const kindChange = holder ? changedKinds(holder.spec as ClassSpec, winner.spec) : [];
    if (kindChange.length > 0) {
      refused.push({
        name,
        namespace: winner.metadata.namespace,
        reason: `changing the kind of existing field(s) ${kindChange.join(', ')} is refused; the previous definition stays (add a new field instead)`,
      });
      continue;
    }
    live.push({ name, namespace: winner.metadata.namespace, spec: winner.spec });
  }

  const kindRefused = refused.filter((r) => !r.reason.startsWith('Duplicate')).map((r) => ({ name: r.name, reason: r.reason }));
  // An invalid cluster object keeps its class's previous definition, like a refused kind change.
  const liveNames = new Set(live.map((l) => l.name));
  for (const bad of source.invalid ?? []) {
    const holder = existing.get(bad.name);
    if (!liveNames.has(bad.name) && (!holder || holder.namespace === bad.namespace)) kindRefused.push({ name: bad.name, reason: bad.reason });
  }
  const markGone = source.problems.length === 0 || source.invalid !== undefined;
  await db.applyClasses(live, kindRefused, markGone);

  // One line per change, not per sweep: applied (new, changed, back), gone, refused.
  for (const l of live) {
    const before = existing.get(l.name);
    const how = !before
      ? 'new'
      : before.gone
        ? 'back from gone'
        : JSON.stringify(before.spec) !== JSON.stringify(l.spec) || before.namespace !== l.namespace
          ? 'changed'
          : before.status !== null && before.status !== undefined
            ? 'no longer refused'
            : null;
    if (how) log.info(`class ${l.namespace}/${l.name} applied (${how})`, { class: l.name, namespace: l.namespace });
  }
  if (markGone) {
    const keep = new Set([...live.map((l) => l.name), ...kindRefused.map((r) => r.name)]);
    for (const row of existing.values()) {
      if (!row.gone && !keep.has(row.name)) {
        log.info(`class ${row.namespace}/${row.name} marked gone: its manifest was removed (its records stay readable)`, {
          class: row.name,
          namespace: row.namespace,
        });
      }
    }
  }
  const seen = loggedRefusals.get(db) ?? new Set<string>();
  const now = new Set<string>();
  const once = (key: string, say: () => void) => {
    now.add(key);
    if (!seen.has(key)) say();
  };
  for (const r of refused) {
    once(`refused ${r.namespace}/${r.name}: ${r.reason}`, () =>
      log.warn(`class ${r.namespace}/${r.name} refused: ${r.reason}`, { class: r.name, namespace: r.namespace }),
    );
  }
  for (const p of source.problems) once(`problem ${p}`, () => log.warn(`class manifest refused: ${p}`));
  if (!markGone) {
    once('no gone', () => log.warn('some class manifests are invalid, so no class is marked gone while they are; fix them (kslate classes check DIR)'));
  }
  loggedRefusals.set(db, now);
  // A manifest counts once however many problems it has: a cluster object by name, a
  // directory's by the `<file>[#<doc>]` that starts each of its problem lines.
  const invalidCount = source.invalid ? source.invalid.length : new Set(source.problems.map((p) => p.split(': ')[0])).size;
  const refusedCount = refused.length + invalidCount;
  return { applied: live.map((l) => l.name), live, refused, problems: source.problems, markedGone: markGone, refusedCount };
}

function changedKinds(before: ClassSpec, after: ClassSpec): string[] {
  return Object.entries(after.fields ?? {})
    .filter(([name, def]) => before.fields?.[name] && before.fields[name].kind !== def.kind)
    .map(([name]) => name);
}
