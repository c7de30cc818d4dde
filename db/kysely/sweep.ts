/**
 * The sweep's statements (decisions §5) over PostgreSQL. Every time is the database clock,
 * so replicas and the worker agree whatever their own clocks say. See migration 0004 for
 * the lease row, the purge queue and why entries no longer cascade.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { RetentionRules, RetentionWalk, RoleSubjects, WorkerGauges } from '../port.js';
import type { Database } from './schema.js';

/**
 * History rows of (class, rid) at or below the newest expiry watermark belong to an expired
 * record whose purge is not finished: every reader leaves them out.
 */
export function notPurged(cls: unknown, rid: unknown, id: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`${id} > coalesce((select max(x.max_history_id) from expired_records x where x.class = ${cls} and x.rid = ${rid}), 0)`;
}

export async function acquireLease(db: Kysely<Database>, name: string, holder: string, ttlSeconds: number): Promise<boolean> {
  // Renewed when ours, taken when expired, created when absent. Two statements, not an upsert
  // whose ON CONFLICT WHERE reads now(): Citus refuses a function that is not IMMUTABLE there
  // (sweep_lease is a reference table on Citus, migration 0014). Two takers racing: the row
  // lock orders their updates and the second re-checks the condition on the new row (READ
  // COMMITTED), or the insert of one meets the other's row and does nothing.
  const expires = sql<Date>`now() + make_interval(secs => ${ttlSeconds})`;
  const renewed = await db
    .updateTable('sweep_lease')
    .set({ holder, expires_at: expires })
    .where('name', '=', name)
    .where(({ eb, or }) => or([eb('expires_at', '<=', sql<Date>`now()`), eb('holder', '=', holder)]))
    .returning('holder')
    .executeTakeFirst();
  if (renewed) return true;
  const taken = await db
    .insertInto('sweep_lease')
    .values({ name, holder, expires_at: expires })
    .onConflict((oc) => oc.column('name').doNothing())
    .returning('holder')
    .executeTakeFirst();
  return taken !== undefined;
}

export async function releaseLease(db: Kysely<Database>, name: string, holder: string): Promise<void> {
  await db.deleteFrom('sweep_lease').where('name', '=', name).where('holder', '=', holder).execute();
}

/** Whether `db` is on Citus, asked once per Kysely instance (PgDb passes what its pool knows). */
const citusOf = new WeakMap<object, Promise<boolean>>();
export function isCitus(db: Kysely<Database>): Promise<boolean> {
  let p = citusOf.get(db);
  if (!p) {
    p = sql<{ c: boolean }>`select exists (select 1 from pg_extension where extname = 'citus') as c`
      .execute(db)
      .then((r) => r.rows[0]?.c === true);
    citusOf.set(db, p);
    p.catch(() => citusOf.delete(db));
  }
  return p;
}

/**
 * On Citus (migration 0014) the sweep's batch statements are refused: `FOR UPDATE` across
 * shards, and a function of a shard's row called from a statement over many shards. There
 * the batch's candidates are found without a lock, grouped by shard, and each group handled
 * by a function of migration 0017 called alone, so Citus delegates it to the shard's node,
 * where it re-checks, locks (SKIP LOCKED) and changes each record as the batch statement does
 * here. A batch costs one call per shard it touches; the sweep's budget bounds the step
 * between batches as on plain PostgreSQL.
 */
export async function expireRecords(
  db: Kysely<Database>,
  cls: string,
  ttlSeconds: number | null,
  limit: number,
  citus?: boolean,
): Promise<number> {
  if (citus ?? (await isCitus(db))) return expireRecordsEach(db, cls, ttlSeconds, limit);
  // One statement, so one transaction: a record is either wholly live or wholly gone to
  // every reader. SKIP LOCKED passes over a record a writer holds (its write renews it);
  // a record renewed after this statement's snapshot is re-checked under the lock
  // (READ COMMITTED re-evaluates the condition on the newest row version) and kept.
  // ttlSeconds null: the records whose own expiry (ttl_seconds, migration 0013) has passed,
  // whatever their class, by records_expires. A record with its own expiry is not expired
  // by its class ttl: the class ttl is the default for the others.
  const due =
    ttlSeconds === null
      ? sql`r.expires_at <= now()`
      : sql`r.class = ${cls} and r.expires_at is null and r.last_write_at < now() - make_interval(secs => ${ttlSeconds})`;
  const order = ttlSeconds === null ? sql`r.expires_at` : sql`r.last_write_at`;
  const res = await sql<{ n: number }>`
    with doomed as (
      select r.id, r.class, r.rid from records r
      where ${due}
      order by ${order}
      limit ${limit}
      for update skip locked
    ), queued as (
      insert into expired_records (record_id, class, rid, max_history_id)
      select d.id, d.class, d.rid,
             coalesce((select max(h.id) from history h where h.class = d.class and h.rid = d.rid), 0)
      from doomed d
      on conflict on constraint expired_records_pkey do nothing
    ), gone as (
      delete from records r using doomed d where r.id = d.id returning r.id
    )
    select count(*)::int as n from gone`.execute(db);
  return res.rows[0]?.n ?? 0;
}

/** Rows grouped by their shard (`shard`), in first-seen order: one delegated call each. */
function byShard<T extends { shard: string }>(rows: T[]): T[][] {
  const groups = new Map<string, T[]>();
  for (const r of rows) {
    const g = groups.get(r.shard);
    if (g) g.push(r);
    else groups.set(r.shard, [r]);
  }
  return [...groups.values()];
}

/** expireRecords on Citus: the due records found without a lock, then expired on their nodes, one call per shard. */
async function expireRecordsEach(db: Kysely<Database>, cls: string, ttlSeconds: number | null, limit: number): Promise<number> {
  const due =
    ttlSeconds === null
      ? sql`r.expires_at <= now()`
      : sql`r.class = ${cls} and r.expires_at is null and r.last_write_at < now() - make_interval(secs => ${ttlSeconds})`;
  const order = ttlSeconds === null ? sql`r.expires_at` : sql`r.last_write_at`;
  const cand = await sql<{ rid: string; id: number; shard: string }>`
    select r.rid, r.id, get_shard_id_for_distribution_column('records', r.rid)::text as shard
    from records r where ${due} order by ${order} limit ${limit}`.execute(db);
  let n = 0;
  for (const g of byShard(cand.rows)) {
    const rids = g.map((r) => r.rid);
    const res = await sql<{ n: number }>`
      select kslate_expire_records(${rids[0]}, ${rids}::text[], ${g.map((r) => r.id)}::bigint[], ${cls},
                                   ${ttlSeconds}::double precision) as n`.execute(db);
    n += res.rows[0]?.n ?? 0;
  }
  return n;
}

/** The queue is worked oldest expiry first, this many records at a time. */
const PURGE_WINDOW = 1000;

export async function purgeExpired(
  db: Kysely<Database>,
  limit: number,
  citus?: boolean,
): Promise<{ historyRows: number; entries: number; finished: number; more: boolean }> {
  if (citus ?? (await isCitus(db))) return purgeExpiredEach(db, limit);
  const chunk = await sql<{ h: number; e: number }>`
    with q as (
      select record_id, class, rid, max_history_id from expired_records order by record_id limit ${PURGE_WINDOW}
    ), hd as (
      delete from history where id = any(array(
        select h.id from q cross join lateral (
          select h.id from history h
          where h.class = q.class and h.rid = q.rid and h.id <= q.max_history_id
          limit ${limit}) h
        limit ${limit}))
      returning 1
    ), ed as (
      delete from entries where ctid = any(array(
        select e.ctid from q cross join lateral (
          select e.ctid from entries e where e.record_id = q.record_id limit ${limit}) e
        limit ${limit}))
      returning 1
    )
    select (select count(*) from hd)::int as h, (select count(*) from ed)::int as e`.execute(db);
  const { h, e } = chunk.rows[0] ?? { h: 0, e: 0 };
  // A queued record whose history and entries are all gone leaves the queue (its watermark
  // no longer hides anything).
  const done = await sql<{ n: number; left: boolean }>`
    with fin as (
      delete from expired_records x
      where x.record_id = any(array(select record_id from expired_records order by record_id limit ${PURGE_WINDOW}))
        and not exists (select 1 from history h where h.class = x.class and h.rid = x.rid and h.id <= x.max_history_id)
        and not exists (select 1 from entries e where e.record_id = x.record_id)
      returning 1
    )
    select (select count(*) from fin)::int as n,
           (select count(*) from expired_records) > (select count(*) from fin) as left`.execute(db);
  const fin = done.rows[0] ?? { n: 0, left: false };
  return { historyRows: h, entries: e, finished: fin.n, more: fin.left };
}

/** purgeExpired on Citus: queued records' rows purged on their nodes, one call per shard, up to `limit` rows in all. */
async function purgeExpiredEach(db: Kysely<Database>, limit: number): Promise<{ historyRows: number; entries: number; finished: number; more: boolean }> {
  const q = await sql<{ rid: string; record_id: number; shard: string }>`
    select rid, record_id, get_shard_id_for_distribution_column('records', rid)::text as shard
    from expired_records order by record_id limit ${PURGE_WINDOW}`.execute(db);
  let historyRows = 0;
  let entries = 0;
  let finished = 0;
  for (const g of byShard(q.rows)) {
    const left = limit - Math.max(historyRows, entries);
    if (left <= 0) break;
    const rids = g.map((x) => x.rid);
    const res = await sql<{ history_rows: number; entries: number; finished: number }>`
      select * from kslate_purge_expired_records(${rids[0]}, ${rids}::text[], ${g.map((x) => x.record_id)}::bigint[],
                                                 ${left}::integer)`.execute(db);
    const r = res.rows[0];
    if (!r) continue;
    historyRows += r.history_rows;
    entries += r.entries;
    finished += r.finished;
  }
  // A full window may have more queued behind it.
  return { historyRows, entries, finished, more: q.rows.length > finished || q.rows.length === PURGE_WINDOW };
}

export async function flagLapsedLeases(db: Kysely<Database>, limit: number, citus?: boolean): Promise<number> {
  if (citus ?? (await isCitus(db))) {
    // On Citus (see expireRecords): the due fields without a lock, then flagged on their nodes, one call per shard.
    const due = await sql<{ rid: string; record_id: number; name: string; shard: string }>`
      select rid, record_id, name, get_shard_id_for_distribution_column('records', rid)::text as shard from fields
      where owner is not null and not lease_lapsed and lease_expires_at <= now()
      order by lease_expires_at
      limit ${limit}`.execute(db);
    let n = 0;
    for (const g of byShard(due.rows)) {
      const rids = g.map((f) => f.rid);
      const res = await sql<{ n: number }>`
        select kslate_flag_lapsed_leases(${rids[0]}, ${rids}::text[], ${g.map((f) => f.record_id)}::bigint[],
                                         ${g.map((f) => f.name)}::text[]) as n`.execute(db);
      n += res.rows[0]?.n ?? 0;
    }
    return n;
  }
  const res = await sql<{ n: number }>`
    with due as (
      select record_id, name from fields
      where owner is not null and not lease_lapsed and lease_expires_at <= now()
      order by lease_expires_at
      limit ${limit}
      for update skip locked
    ), flagged as (
      update fields f set lease_lapsed = true from due
      where f.record_id = due.record_id and f.name = due.name
      returning 1
    )
    select count(*)::int as n from flagged`.execute(db);
  return res.rows[0]?.n ?? 0;
}

/**
 * The authors a role's subjects name, as SQL over `h.author`: exact subjects compared by
 * equality (one array lookup, whatever their number), `ns/*` wildcards as a prefix with no
 * further slash (one namespace's service accounts).
 */
export function authorIn(subjects: string[], author: RawBuilder<unknown>): RawBuilder<unknown> {
  const exact = subjects.filter((s) => !s.endsWith('/*'));
  const prefixes = subjects.filter((s) => s.endsWith('/*')).map((s) => s.slice(0, -1));
  const parts = [sql`${author} = any(${exact}::text[])`];
  for (const p of prefixes) {
    parts.push(sql`(starts_with(${author}, ${p}) and strpos(substr(${author}, ${p.length + 1}), '/') = 0)`);
  }
  return sql`(${sql.join(parts, sql` or `)})`;
}

export async function gauges(db: Kysely<Database>, classes: string[], roles: RoleSubjects[], citus = false): Promise<WorkerGauges> {
  const records = new Map<string, number>(classes.map((c) => [c, 0]));
  const historyRows = new Map<string, number>(classes.map((c) => [c, 0]));
  const rec = await sql<{ class: string; n: number }>`
    select class, count(*)::bigint as n from records where class = any(${classes}::text[]) group by class`.execute(db);
  for (const r of rec.rows) records.set(r.class, r.n);
  const hist = await sql<{ class: string; n: number }>`
    select class, count(*)::bigint as n from history where class = any(${classes}::text[]) group by class`.execute(db);
  for (const r of hist.rows) historyRows.set(r.class, r.n);
  // Rows of expired records still being purged are not history any more.
  const pending = await sql<{ class: string; n: number }>`
    select w.class, sum((select count(*) from history h where h.class = w.class and h.rid = w.rid and h.id <= w.m))::bigint as n
    from (select class, rid, max(max_history_id) as m from expired_records group by class, rid) w
    where w.class = any(${classes}::text[])
    group by w.class`.execute(db);
  for (const r of pending.rows) historyRows.set(r.class, (historyRows.get(r.class) ?? 0) - r.n);
  const lapsed = await sql<{ n: number }>`select count(*)::bigint as n from fields where lease_lapsed`.execute(db);
  const roleWroteNothing = new Map<string, number>();
  for (const r of roles) {
    const res = await sql<{ n: number }>`
      select count(*)::bigint as n from records rec
      where rec.class = ${r.class} and not exists (
        select 1 from history h
        where h.class = rec.class and h.rid = rec.rid and h.outcome = 'applied'
          and ${authorIn(r.subjects, sql`h.author`)}
          and ${notPurged(sql`rec.class`, sql`rec.rid`, sql`h.id`)})`.execute(db);
    roleWroteNothing.set(`${r.class}/${r.role}`, res.rows[0]?.n ?? 0);
  }
  return { records, historyRows, leasesLapsed: lapsed.rows[0]?.n ?? 0, roleWroteNothing, oldestHistory: await oldestHistory(db, classes, citus) };
}


/**
 * The end of a purge statement, after its `del` step: each record's purged boundary recorded
 * (`history_purged`, what readers see), then how many rows `scanned` (the statement's scan
 * step) read, how many were deleted, and the last row read (where the walk resumes).
 */
const purgeEnd = (cls: string, scanned: 'cand' | 'scan') => sql`mark as (
        insert into history_purged as p (class, rid, before, before_id)
        select ${cls}, rid, max(created_at), max(id) from del group by rid
        on conflict (class, rid) do update set before = greatest(p.before, excluded.before),
                                               before_id = greatest(p.before_id, excluded.before_id)
      ), last as (select created_at, id from ${sql.raw(scanned)} order by created_at desc, id desc limit 1)
      select (select count(*) from ${sql.raw(scanned)})::int as scanned, (select count(*) from del)::int as purged,
             (select created_at::text from last) as last_at, (select id from last) as last_id`;

/**
 * One bounded batch of a class's history retention (migration 0013): reads at most `limit`
 * rows past the walk's cursor, deletes those the rules purge and `kslate_history_kept` does
 * not keep, records the boundary readers see (`history_purged`), and moves the cursor. A
 * changed spec restarts the walk from the oldest row. `more`: the walk has rows left.
 */
export async function purgeHistoryBatch(
  db: Kysely<Database>,
  cls: string,
  walk: RetentionWalk,
  r: RetentionRules,
  limit: number,
): Promise<{ purged: number; scanned: number; more: boolean }> {
  // Times travel as text: a JS Date would drop the microseconds and the walk would read rows twice.
  // On Citus (history_retention a reference table, migration 0018) RETURNING may not cast a
  // time to text (not IMMUTABLE): the cursor is read back by a second statement there.
  const citus = await isCitus(db);
  const upsert = sql`
    insert into history_retention as t (class, rule, spec) values (${cls}, ${walk}, ${r.spec})
    on conflict (class, rule) do update set
      at = case when t.spec = excluded.spec then t.at end,
      id = case when t.spec = excluded.spec then t.id else 0 end,
      spec = excluded.spec`;
  const cur = citus
    ? (await upsert.execute(db),
      await sql<{ at: string | null; id: number }>`
        select at::text as at, id from history_retention where class = ${cls} and rule = ${walk}`.execute(db))
    : await sql<{ at: string | null; id: number }>`${upsert} returning t.at::text as at, t.id`.execute(db);
  const { at, id } = cur.rows[0]!;
  // The checkpoints walk (migration 0019) follows checkpoints_saved's (saved_at, record_id);
  // the others follow history's (created_at, id).
  const after = at === null
    ? sql`true`
    : walk === 'checkpoints'
      ? sql`(c.saved_at, c.record_id) > (${at}::timestamptz, ${id}::bigint)`
      : sql`(h.created_at, h.id) > (${at}::timestamptz, ${id}::bigint)`;
  let res;
  if (citus) {
    res = { rows: [await purgeByRecord(db, cls, walk, r, limit, after)] };
  } else if (walk === 'age' || walk === 'rejected') {
    const secs = walk === 'age' ? r.maxAgeSeconds : r.rejectedMaxAgeSeconds;
    if (secs === null) return { purged: 0, scanned: 0, more: false };
    const rejected = walk === 'rejected' ? sql`and h.outcome <> 'applied'` : sql``;
    res = await sql<{ scanned: number; purged: number; last_at: string | null; last_id: number | null }>`
      with cand as (
        select h.id, h.created_at from history h
        where h.class = ${cls} and h.created_at < now() - make_interval(secs => ${secs}) and ${after} ${rejected}
        order by h.created_at, h.id
        limit ${limit}
        for update skip locked
      ), del as (
        delete from history h using cand c where h.id = c.id and not kslate_history_kept(h)
        returning h.id, h.rid, h.created_at
      ), ${purgeEnd(cls, 'cand')}`.execute(db);
  } else {
    const beyond = r.keepLast === null ? sql`false` : sql`h.id < coalesce((
        select k.id from history k where k.class = ${cls} and k.rid = p.rid and k.field = p.field
        order by k.id desc offset ${r.keepLast - 1} limit 1), 0)`;
    const old = r.maxAgeSeconds === null ? sql`false` : sql`h.created_at < now() - make_interval(secs => ${r.maxAgeSeconds})`;
    const rej = r.rejectedMaxAgeSeconds === null
      ? sql`false`
      : sql`(h.outcome <> 'applied' and h.created_at < now() - make_interval(secs => ${r.rejectedMaxAgeSeconds}))`;
    // fields: the (record, field)s written since the cursor. checkpoints: every field of the
    // records whose checkpoints were saved since the cursor (issue 37: a row kept only by a
    // checkpoint is not revisited by the other walks once their cursors passed it, and a
    // re-save writes no history); its scan names saved_at and record_id as the cursor's columns.
    const scan = walk === 'checkpoints'
      ? sql`
        select c.rid, c.saved_at as created_at, c.record_id as id from checkpoints c
        join records rec on rec.rid = c.rid and rec.id = c.record_id
        where rec.class = ${cls} and ${after}
        order by c.saved_at, c.record_id
        limit ${limit}`
      : sql`
        select h.rid, h.field, h.created_at, h.id from history h
        where h.class = ${cls} and ${after}
        order by h.created_at, h.id
        limit ${limit}`;
    const pairs = walk === 'checkpoints'
      ? sql`select distinct f.rid, f.name as field from scan s join fields f on f.rid = s.rid and f.record_id = s.id`
      : sql`select distinct rid, field from scan`;
    res = await sql<{ scanned: number; purged: number; last_at: string | null; last_id: number | null }>`
      with scan as (${scan}), pairs as (${pairs}), doomed as (
        select x.id from pairs p cross join lateral (
          select h.id from history h
          where h.class = ${cls} and h.rid = p.rid and h.field = p.field and (${beyond} or ${old} or ${rej})
            and not kslate_history_kept(h)
          order by h.id
          limit ${limit}) x
        limit ${limit}
      ), del as (
        delete from history h where h.id in (select id from doomed) returning h.id, h.rid, h.created_at
      ), ${purgeEnd(cls, 'scan')}`.execute(db);
  }
  const row = res.rows[0]!;
  // The per-field walk stays where it is while a batch deletes its whole limit (the same
  // (record, field)s have more to purge); otherwise it moves past what it read.
  const stay = (walk === 'fields' || walk === 'checkpoints') && row.purged >= limit;
  if (row.last_id !== null && !stay) {
    await sql`update history_retention set at = ${row.last_at}::timestamptz, id = ${row.last_id}
              where class = ${cls} and rule = ${walk} and spec = ${r.spec}`.execute(db);
  }
  return { purged: row.purged, scanned: row.scanned, more: row.scanned >= limit || stay };
}

/**
 * One batch of purgeHistoryBatch on Citus (migration 0018): the walk's rows are read across
 * shards without locks (Citus refuses FOR UPDATE across shards), then each record's purge is
 * one kslate_purge_history call, delegated to the record's node, which judges
 * kslate_history_kept there under the record's lock and moves its history_purged boundary.
 */
export async function purgeByRecord(
  db: Kysely<Database>,
  cls: string,
  walk: RetentionWalk,
  r: RetentionRules,
  limit: number,
  after: RawBuilder<unknown>,
): Promise<{ scanned: number; purged: number; last_at: string | null; last_id: number | null }> {
  const none = { scanned: 0, purged: 0, last_at: null, last_id: null };
  let rows: { rid: string; field: string; id: number; at: string }[];
  if (walk === 'age' || walk === 'rejected') {
    const secs = walk === 'age' ? r.maxAgeSeconds : r.rejectedMaxAgeSeconds;
    if (secs === null) return none;
    const rejected = walk === 'rejected' ? sql`and h.outcome <> 'applied'` : sql``;
    rows = (await sql<{ rid: string; field: string; id: number; at: string }>`
      select h.rid, h.field, h.id, h.created_at::text as at from history h
      where h.class = ${cls} and h.created_at < now() - make_interval(secs => ${secs}) and ${after} ${rejected}
      order by h.created_at, h.id
      limit ${limit}`.execute(db)).rows;
  } else if (walk === 'fields') {
    rows = (await sql<{ rid: string; field: string; id: number; at: string }>`
      select h.rid, h.field, h.id, h.created_at::text as at from history h
      where h.class = ${cls} and ${after}
      order by h.created_at, h.id
      limit ${limit}`.execute(db)).rows;
  } else if (walk === 'checkpoints') {
    // The records whose checkpoints were saved since the cursor: every field of each
    rows = (await sql<{ rid: string; field: string; id: number; at: string }>`
      select s.rid, f.name as field, s.record_id as id, s.saved_at::text as at from (
        select c.rid, c.record_id, c.saved_at from checkpoints c
        join records rec on rec.rid = c.rid and rec.id = c.record_id
        where rec.class = ${cls} and ${after}
        order by c.saved_at, c.record_id
        limit ${limit}) s
      join fields f on f.rid = s.rid and f.record_id = s.record_id
      order by s.saved_at, s.record_id`.execute(db)).rows;
  } else {
    // A walk added later needs its Citus shape here (this fails to compile until it has one).
    const unknown: never = walk;
    throw new Error(`retention walk ${String(unknown)} has no Citus form`);
  }
  if (rows.length === 0) return none;
  const byRecord = new Map<string, { ids: number[]; fields: Set<string> }>();
  for (const row of rows) {
    const e = byRecord.get(row.rid) ?? { ids: [], fields: new Set<string>() };
    e.ids.push(Number(row.id));
    e.fields.add(row.field);
    byRecord.set(row.rid, e);
  }
  let purged = 0;
  for (const [rid, e] of byRecord) {
    if (purged >= limit) break;
    const byIds = walk === 'age' || walk === 'rejected';
    const res = await sql<{ purged: number }>`
      select purged from kslate_purge_history(${cls}, ${rid}, ${byIds ? e.ids : null}::bigint[],
        ${byIds ? null : [...e.fields]}::text[], ${byIds ? null : r.keepLast}::integer,
        ${byIds ? null : r.maxAgeSeconds}::integer, ${byIds ? null : r.rejectedMaxAgeSeconds}::integer,
        ${limit - purged}::integer)`.execute(db);
    purged += Number(res.rows[0]?.purged ?? 0);
  }
  const last = rows[rows.length - 1]!;
  return { scanned: rows.length, purged, last_at: last.at, last_id: Number(last.id) };
}

/** The oldest retained history row per class (the `kslate_history_oldest_row_age_seconds` gauge): one index probe each. */
export async function oldestHistory(db: Kysely<Database>, classes: string[], citus = false): Promise<Map<string, Date>> {
  // Citus takes no correlated subquery beside unnest: there, one grouped statement every shard
  // answers from its history_class_age.
  const res = citus
    ? await sql<{ class: string; at: Date | null }>`
    select h.class, min(h.created_at) as at from history h where h.class = any(${classes}::text[]) group by h.class`.execute(db)
    : await sql<{ class: string; at: Date | null }>`
    select c as class, (select min(h.created_at) from history h where h.class = c) as at
    from unnest(${classes}::text[]) as c`.execute(db);
  return new Map(res.rows.filter((r) => r.at !== null).map((r) => [r.class, r.at!]));
}

/** Where a record's history was cut by retention (migration 0013): the newest time and greatest seq purged. */
export async function historyTruncation(db: Kysely<Database>, cls: string, rid: string): Promise<{ before: Date; beforeSeq: number } | null> {
  const res = await sql<{ before: Date; before_id: number }>`
    select before, before_id from history_purged where class = ${cls} and rid = ${rid}`.execute(db);
  const r = res.rows[0];
  return r ? { before: r.before, beforeSeq: Number(r.before_id) } : null;
}
