/**
 * Read sets and scope owners (decisions §2–§3): what (identity, scope) read, for premise
 * inference, and which identity a scope belongs to (IDENTITY_MISMATCH).
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';

/** `windowSeconds` ago by the database clock. */
const windowStart = (windowSeconds: number) => sql<Date>`now() - make_interval(secs => ${windowSeconds})`;

/**
 * Use a scope as `author`: returns the scope's owner, which is `author` unless another
 * identity used it within `windowSeconds` (then that identity, unchanged).
 */
export async function claimScope(db: Kysely<Database>, scope: string, author: string, windowSeconds: number): Promise<string> {
  // Take the scope when it is free, ours, or idle past the window; otherwise leave it be. Two
  // statements, not an upsert whose ON CONFLICT WHERE reads now(): Citus refuses a function
  // that is not IMMUTABLE there (scope_owners is a reference table on Citus, migration 0014).
  const took =
    (await db
      .updateTable('scope_owners')
      .set({ author, last_used_at: sql<Date>`now()` })
      .where('scope', '=', scope)
      .where(({ eb, or }) => or([eb('author', '=', author), eb('last_used_at', '<', windowStart(windowSeconds))]))
      .returning('author')
      .executeTakeFirst()) ??
    (await db
      .insertInto('scope_owners')
      .values({ scope, author, last_used_at: sql<Date>`now()` })
      .onConflict((oc) => oc.column('scope').doNothing())
      .returning('author')
      .executeTakeFirst());
  if (took) return took.author;
  const cur = await db.selectFrom('scope_owners').select('author').where('scope', '=', scope).executeTakeFirst();
  return cur?.author ?? author;
}

/** Remember that (author, scope) saw these field versions now. */
export async function recordReads(
  db: Kysely<Database>,
  author: string,
  scope: string,
  cls: string,
  reads: { rid: string; field: string; version: number }[],
): Promise<void> {
  await sql`
    insert into read_sets (author, scope, class, rid, field, version, read_at)
    select ${author}, ${scope}, ${cls}, t.rid, t.field, t.version, now()
    from unnest(${reads.map((r) => r.rid)}::text[], ${reads.map((r) => r.field)}::text[], ${reads.map((r) => r.version)}::bigint[])
      as t(rid, field, version)
    on conflict (author, scope, class, rid, field)
      do update set version = excluded.version, read_at = excluded.read_at`.execute(db);
}

/** Delete read-set entries and scope owners idle longer than the window; returns rows deleted. */
export async function pruneReadSets(db: Kysely<Database>, windowSeconds: number): Promise<number> {
  const a = await db.deleteFrom('read_sets').where('read_at', '<', windowStart(windowSeconds)).executeTakeFirst();
  const b = await db.deleteFrom('scope_owners').where('last_used_at', '<', windowStart(windowSeconds)).executeTakeFirst();
  return Number(a.numDeletedRows) + Number(b.numDeletedRows);
}

/** The fields of one record (author, scope) read within the window, at the version last read. */
export function readSet(
  db: Kysely<Database>,
  author: string,
  scope: string,
  cls: string,
  rid: string,
  windowSeconds: number,
): Promise<{ field: string; version: number }[]> {
  return db
    .selectFrom('read_sets')
    .select(['field', 'version'])
    .where('author', '=', author)
    .where('scope', '=', scope)
    .where('class', '=', cls)
    .where('rid', '=', rid)
    .where('read_at', '>', windowStart(windowSeconds))
    .execute();
}
