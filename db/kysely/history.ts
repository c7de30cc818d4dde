/**
 * History: a record's page of rows (stored rendered, migration 0008), newest first, within the
 * response's byte budget, and whether a record has any.
 */
import { sql, type Kysely } from 'kysely';
import type { HistoryMark, HistoryPage } from '../port.js';
import { HISTORY_BYTES, type Conn } from './conn.js';
import type { Database } from './schema.js';
import { notPurged } from './sweep.js';

/** About how many bytes of history rows one text of a page holds (readHistory). */
const HISTORY_RUN_BYTES = 32 * 1024;

/** One run of a history page: its rows joined, and what the page needs to know of them. */
interface HistoryRun {
  /** Rows the run covered, kept or not. */
  n: number;
  kept: number;
  /** The seq of its oldest kept row. */
  last: number | null;
  rows: string | null;
}

/**
 * History newest first, restricted to `fields` (null = all), rows with seq < beforeSeq: at
 * most `limit` rows, fewer when their running size passes `maxBytes` (the first row always).
 */
export async function readHistory(
  c: Conn,
  cls: string,
  rid: string,
  opts: { fields: string[] | null; beforeSeq: number | null; limit: number; maxBytes: number; mark: HistoryMark },
): Promise<HistoryPage> {
  const { fields, beforeSeq, limit, maxBytes, mark } = opts;
  // One field uses history_record_field; otherwise history_record, filtering rows.
  // The page (limit + 1 rows, to see whether more remain) keeps the newest rows whose
  // running size stays within maxBytes (the first row always, so a page always
  // advances); the others pass the window with their values still TOASTed and are not
  // aggregated. Each row comes as the JSON it was rendered to when written (`rendered`,
  // migration 0008) and the page as ONE text (HistoryPage.rows), which the reader sends
  // as it is unless it asked for rows marked: rendering the columns at read time cost ~8
  // ms of CPU per 1,000 rows, and building 1,000 row objects in the driver ~3x a single
  // text. Rows older than 0008 are rendered here by the same function, from the row's columns
  // (migration 0014; coalesce evaluates it only for them). Not from a whole-row reference: one
  // in the scan itself cost ~0.3 ms a page, and on Citus a shard's row is not a `history`.
  // Rows of an expired record's earlier life (notPurged) are left out after the LIMIT, not
  // inside it: they are that record's oldest rows (every id at most the purge mark), so the
  // newest rows past them are the same, and as a condition on `id` inside, where its value
  // is unknown when planning, it made the primary key look cheaper than the record's index:
  // a backward scan of every newer row of the whole table, filtered by record (after the
  // bench's puts, 180,000 rows skipped per page: 38 ms of PostgreSQL CPU instead of 4).
  // The record's key reaches the page through a LATERAL over `k` (`offset 0` keeps it from
  // being folded into constants): planned with the record's value known, a record holding
  // a tenth of the table looked dense enough for that same backward walk (with wider rows
  // it won on PostgreSQL 15 and 18 alike); as an outer reference it is estimated as an
  // average record, for which only the record's index makes sense.
  const marked =
    mark === 'all' ? sql`chr(30) || doc || chr(31)` : mark === 'premises' ? sql`case when based_on is null then doc else chr(30) || doc || chr(31) end` : sql`doc`;
  // A named statement per shape (fields, cursor, marks): planning this one cost ~0.4 ms
  // of PostgreSQL CPU per page, a third of its execution.
  // On Citus the record's shard is found from the parameters themselves: it cannot prune by
  // k's columns (the opaque subquery below that keeps plain PostgreSQL on the record's index).
  const citus = await c.citus();
  const shape = `${fields === null ? 'all' : fields.length === 1 ? 'one' : 'some'}_${beforeSeq === null ? 'first' : 'before'}_${mark}${citus ? '_citus' : ''}`;
  // The page comes in runs of rows of about HISTORY_RUN_BYTES each, not as one text: a
  // string over ~128 KB is a large object to V8, and a page's worth of them per request
  // drove a mark-compact every ~30 pages under the chart's heap cap (2x the CPU per page).
  const q = sql<HistoryRun>`
    select count(*) as n, count(*) filter (where keep) as kept, min(id) filter (where keep) as last,
           string_agg(${marked}, ',' order by id desc) filter (where keep) as rows
    from (
      select page.*, n <= ${limit} and (running <= ${maxBytes} or n = 1) as keep
      from (
        select page.*, sum(page.sz) over w as running, row_number() over w as n
        from (select ${cls}::text as class, ${rid}::text as rid offset 0) k
        cross join lateral (
          select h.id, h.based_on,
                 coalesce(h.rendered, kslate_history_render_row(h.id, h.field, h.op, h.version, h.record_version, h.value,
                   h.value_size, h.value_sha256, h.author, h.identity_strength, h.evidence, h.expected_version, h.invocation,
                   h.outcome, h.based_on, h.created_at)) as doc,
                 ${HISTORY_BYTES} as sz
          from history h
          where ${citus ? sql`h.class = ${cls} and h.rid = ${rid}` : sql`h.class = k.class and h.rid = k.rid`}
            ${fields && fields.length === 1 ? sql`and h.field = ${fields[0]}` : sql``}
            ${fields && fields.length !== 1 ? sql`and h.field = any(${fields}::text[])` : sql``}
            ${beforeSeq !== null ? sql`and h.id < ${beforeSeq}` : sql``}
          order by h.id desc
          limit ${limit + 1}) page
        where ${notPurged(cls, rid, sql`page.id`)}
        window w as (order by page.id desc)) page) x
    group by (running - sz) / ${sql.lit(HISTORY_RUN_BYTES)}
    order by (running - sz) / ${sql.lit(HISTORY_RUN_BYTES)}`.compile(c.kysely);
  const res = await c.exec<HistoryRun>(`kslate_history_${shape}`, q.sql, q.parameters);
  let n = 0;
  let count = 0;
  let lastSeq: number | null = null;
  const runs: string[] = [];
  for (const r of res.rows) {
    n += r.n;
    count += r.kept;
    if (r.last !== null) lastSeq = lastSeq === null ? r.last : Math.min(lastSeq, r.last);
    if (r.rows !== null && r.rows !== '') runs.push(r.rows);
  }
  return { runs, count, lastSeq, more: n > count };
}

/** True when the record exists or any history row names it (rows of its expired earlier life aside). */
export async function recordOrHistoryExists(db: Kysely<Database>, cls: string, rid: string): Promise<boolean> {
  const res = await sql<{ e: boolean }>`
    select exists (select 1 from records where class = ${cls} and rid = ${rid})
        or exists (select 1 from history h where h.class = ${cls} and h.rid = ${rid} and ${notPurged(cls, rid, sql`h.id`)}) as e`.execute(db);
  return res.rows[0]?.e ?? false;
}
