/**
 * The retention sweep's `checkpoints` walk (issue 37, migration 0019): a history row kept
 * only because a saved checkpoint's `changed_fields` still needed it (`kslate_history_kept`,
 * migration 0013) is not revisited by the other walks once their cursors passed it, and a
 * checkpoint re-save writes no history. This walk follows the checkpoints saved since its
 * cursor `(saved_at, record_id)` over `checkpoints_saved`, and for each of those records runs
 * the per-field rule of the `fields` walk over every field: so such a row is purged on the
 * next sweep after the re-save moved the oldest checkpoint past it.
 */
import { sql, type Kysely } from 'kysely';
import type { RetentionRules } from '../port.js';
import type { Database } from './schema.js';
import { isCitus, purgeByRecord } from './sweep.js';

export async function purgeCheckpointedBatch(
  db: Kysely<Database>,
  cls: string,
  r: RetentionRules,
  limit: number,
): Promise<{ purged: number; scanned: number; more: boolean }> {
  // Times travel as text, as in the other walks: a JS Date drops the microseconds. On Citus
  // (history_retention a reference table) RETURNING may not cast a time to text: the cursor
  // is read back by a second statement there, as sweep.ts purgeHistoryBatch does.
  const citus = await isCitus(db);
  const upsert = sql`
    insert into history_retention as t (class, rule, spec) values (${cls}, 'checkpoints', ${r.spec})
    on conflict (class, rule) do update set
      at = case when t.spec = excluded.spec then t.at end,
      id = case when t.spec = excluded.spec then t.id else 0 end,
      spec = excluded.spec`;
  const cur = citus
    ? (await upsert.execute(db),
      await sql<{ at: string | null; id: number }>`
        select at::text as at, id from history_retention where class = ${cls} and rule = 'checkpoints'`.execute(db))
    : await sql<{ at: string | null; id: number }>`${upsert} returning t.at::text as at, t.id`.execute(db);
  const { at, id } = cur.rows[0]!;
  const after = at === null ? sql`true` : sql`(c.saved_at, c.record_id) > (${at}::timestamptz, ${id}::bigint)`;
  const beyond = r.keepLast === null ? sql`false` : sql`h.id < coalesce((
      select k.id from history k where k.class = ${cls} and k.rid = p.rid and k.field = p.field
      order by k.id desc offset ${r.keepLast - 1} limit 1), 0)`;
  const old = r.maxAgeSeconds === null ? sql`false` : sql`h.created_at < now() - make_interval(secs => ${r.maxAgeSeconds})`;
  const rej = r.rejectedMaxAgeSeconds === null
    ? sql`false`
    : sql`(h.outcome <> 'applied' and h.created_at < now() - make_interval(secs => ${r.rejectedMaxAgeSeconds}))`;
  // On Citus each record's purge is one call delegated to its node (sweep.ts purgeByRecord).
  const res = citus
    ? { rows: [await purgeByRecord(db, cls, 'checkpoints', r, limit, after)] }
    : await sql<{ scanned: number; purged: number; last_at: string | null; last_id: number | null }>`
    with saved as (
      select c.rid, c.record_id, c.saved_at from checkpoints c
      join records rec on rec.rid = c.rid and rec.id = c.record_id
      where rec.class = ${cls} and ${after}
      order by c.saved_at, c.record_id
      limit ${limit}
    ), pairs as (
      select distinct f.rid, f.name as field from saved s join fields f on f.rid = s.rid and f.record_id = s.record_id
    ), doomed as (
      select x.id from pairs p cross join lateral (
        select h.id from history h
        where h.class = ${cls} and h.rid = p.rid and h.field = p.field and (${beyond} or ${old} or ${rej})
          and not kslate_history_kept(h)
        order by h.id
        limit ${limit}) x
      limit ${limit}
    ), del as (
      delete from history h where h.id in (select id from doomed) returning h.id, h.rid, h.created_at
    ), mark as (
      insert into history_purged as p (class, rid, before, before_id)
      select ${cls}, rid, max(created_at), max(id) from del group by rid
      on conflict (class, rid) do update set before = greatest(p.before, excluded.before),
                                             before_id = greatest(p.before_id, excluded.before_id)
    ), last as (select saved_at, record_id from saved order by saved_at desc, record_id desc limit 1)
    select (select count(*) from saved)::int as scanned, (select count(*) from del)::int as purged,
           (select saved_at::text from last) as last_at, (select record_id from last) as last_id`.execute(db);
  const row = res.rows[0]!;
  // As the fields walk: stay while a batch deletes its whole limit (those records have more).
  const stay = row.purged >= limit;
  if (row.last_id !== null && !stay) {
    await sql`update history_retention set at = ${row.last_at}::timestamptz, id = ${row.last_id}
              where class = ${cls} and rule = 'checkpoints' and spec = ${r.spec}`.execute(db);
  }
  return { purged: row.purged, scanned: row.scanned, more: row.scanned >= limit || stay };
}
