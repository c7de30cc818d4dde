/**
 * Classes: the reconciled manifests every gateway reads (decisions §1), and the cursor key of
 * `kslate_meta`.
 */
import { sql, type Kysely } from 'kysely';
import type { ClassRow, ClassUpsert } from '../port.js';
import { j } from './conn.js';
import type { Database } from './schema.js';

export function listClasses(db: Kysely<Database>): Promise<ClassRow[]> {
  return db.selectFrom('classes').select(['name', 'namespace', 'spec', 'gone', 'status', 'updated_at']).orderBy('name').execute();
}

/** Upsert live classes, record refusals, and (with `markGone`) mark every other class gone, in one transaction. */
export function applyClasses(db: Kysely<Database>, live: ClassUpsert[], refused: { name: string; reason: string }[], markGone: boolean): Promise<void> {
  return db.transaction().execute(async (trx) => {
    for (const c of live) {
      // Only a class that changed is written (its updated_at is when it last changed).
      await trx
        .insertInto('classes')
        .values({ name: c.name, namespace: c.namespace, spec: j(c.spec), gone: false, status: null, updated_at: sql<Date>`now()` })
        .onConflict((oc) =>
          oc
            .column('name')
            .doUpdateSet({
              namespace: (eb) => eb.ref('excluded.namespace'),
              spec: (eb) => eb.ref('excluded.spec'),
              gone: false,
              status: null,
              // The inserted row's now(): Citus refuses a function that is not IMMUTABLE in DO UPDATE SET.
              updated_at: (eb) => eb.ref('excluded.updated_at'),
            })
            .where(({ eb, or, ref }) =>
              or([
                eb(sql`classes.spec::text`, 'is distinct from', sql`excluded.spec::text`),
                eb('classes.gone', '=', true),
                eb('classes.namespace', '<>', ref('excluded.namespace')),
                eb('classes.status', 'is not', null),
              ]),
            ),
        )
        .execute();
    }
    for (const r of refused) {
      const status = j({ refused: r.reason });
      await trx
        .updateTable('classes')
        .set({ status: sql<string>`${status}::jsonb` })
        .where('name', '=', r.name)
        .where(sql<boolean>`status is distinct from ${status}::jsonb`)
        .execute();
    }
    if (markGone) {
      const keep = [...live.map((c) => c.name), ...refused.map((r) => r.name)];
      await trx
        .updateTable('classes')
        .set({ gone: true, updated_at: sql<Date>`now()` })
        .where('gone', '=', false)
        .where(sql<boolean>`not (name = any(${keep}::text[]))`)
        .execute();
    }
  });
}

/** A value of the kslate_meta table (e.g. the cursor key). */
export async function meta(db: Kysely<Database>, key: string): Promise<string | null> {
  const row = await db.selectFrom('kslate_meta').select('value').where('key', '=', key).executeTakeFirst();
  return row?.value ?? null;
}
