/**
 * The change log the watch streams read (migration 0007, issue 16): a class's applied changes
 * in `(tx, id)` order, only below the oldest transaction still running, and one record's
 * applied history by record version.
 */
import { sql, type Kysely } from 'kysely';
import type { ChangeRow, LogPosition } from '../port.js';
import { HISTORY_BYTES } from './conn.js';
import type { Database } from './schema.js';
import { notPurged } from './sweep.js';

/** The columns of a ChangeRow, from history `h`. */
const CHANGE_COLUMNS = sql`h.tx::text as tx, h.id, h.class, h.rid, h.field, h.op, h.version, h.record_version, h.value, h.author,
  h.identity_strength, h.evidence, h.based_on, h.invocation, h.created_at, ${HISTORY_BYTES} as sz`;

/** CHANGE_COLUMNS again, from the subquery `x` that selected them. */
const CHANGE_COLUMNS_OF_X = sql`x.tx, x.id, x.class, x.rid, x.field, x.op, x.version, x.record_version, x.value, x.author,
  x.identity_strength, x.evidence, x.based_on, x.invocation, x.created_at, x.sz`;

/** A row of CHANGE_COLUMNS. */
type ChangeColumns = Omit<ChangeRow, 'bytes'> & { sz: number };

function mapChange({ sz, ...r }: ChangeColumns): ChangeRow {
  return { ...r, bytes: sz };
}

/** Every transaction below the oldest one running has finished: the frontier is just under it. */
const FRONTIER = sql<string>`(pg_snapshot_xmin(pg_current_snapshot())::text::numeric - 1)::text`;

/**
 * The log's frontier now, past any id (no row of the transaction just under the oldest running
 * one can come after it).
 */
export async function logHead(db: Kysely<Database>): Promise<LogPosition> {
  const res = await sql<{ tx: string }>`select ${FRONTIER} as tx`.execute(db);
  return { tx: res.rows[0].tx, id: Number.MAX_SAFE_INTEGER };
}

/** A row of readLog: the frontier on every row, a change on each but the one of an empty read. */
type LogRow = { frontier: string; candidates: number } & (ChangeColumns | { id: null });

/**
 * Applied changes of `classes` after `after` (and at most `upTo`), in `(tx, id)` order, only
 * below the oldest transaction still running, within `limit` and `maxBytes` (the first always);
 * `frontier` when the read was complete.
 */
export async function readLog(
  db: Kysely<Database>,
  classes: string[],
  after: LogPosition,
  opts: { upTo: LogPosition | null; limit: number; maxBytes: number },
): Promise<{ rows: ChangeRow[]; frontier: LogPosition | null }> {
  const upTo = opts.upTo ? sql`and (h.tx, h.id) <= (${opts.upTo.tx}::xid8, ${opts.upTo.id}::bigint)` : sql``;
  // One index range of history_log per class, merged in (tx, id) order; only rows of
  // transactions below the oldest one still running (they can no longer change). One
  // statement, so one snapshot: the frontier and the rows agree.
  const res = await sql<LogRow>`
    select s.frontier, x.candidates, ${CHANGE_COLUMNS_OF_X} from (
      select ${FRONTIER} as frontier,
             pg_snapshot_xmin(pg_current_snapshot()) as xmin) s
    left join lateral (
      select y.*, sum(y.sz) over w as running, row_number() over w as rn, count(*) over () as candidates
      from (
        select ${CHANGE_COLUMNS}, h.tx as tx_order
        from unnest(${classes}::text[]) as c(name)
        cross join lateral (
          select h.* from history h
          where h.class = c.name and h.outcome = 'applied'
            and (h.tx, h.id) > (${after.tx}::xid8, ${after.id}::bigint) ${upTo}
            and h.tx < s.xmin
          order by h.tx, h.id
          limit ${opts.limit}) h
        order by h.tx, h.id
        limit ${opts.limit}) y
      window w as (order by y.tx_order, y.id)) x on true
    where x.id is null or x.running <= ${opts.maxBytes} or x.rn = 1
    order by x.tx_order, x.id`.execute(db);
  const changes = res.rows.filter((r): r is LogRow & ChangeColumns => r.id !== null);
  const rows = changes.map(({ frontier: _f, candidates: _c, ...r }) => mapChange(r));
  const candidates = changes.length > 0 ? changes[0].candidates : 0;
  const complete = candidates < opts.limit && rows.length === candidates;
  return { rows, frontier: complete ? { tx: res.rows[0].frontier, id: Number.MAX_SAFE_INTEGER } : null };
}

/** Applied changes of one record with record_version above `afterRecordVersion`, in that order (rows of an expired record left out). */
export async function readRecordChanges(
  db: Kysely<Database>,
  cls: string,
  rid: string,
  afterRecordVersion: number,
  opts: { limit: number; maxBytes: number },
): Promise<ChangeRow[]> {
  const res = await sql<ChangeColumns>`
    select ${CHANGE_COLUMNS_OF_X} from (
      select y.*, sum(y.sz) over w as running, dense_rank() over w as rn
      from (
        select ${CHANGE_COLUMNS}
        from history h
        where h.class = ${cls} and h.rid = ${rid} and h.outcome = 'applied'
          and h.record_version > ${afterRecordVersion} and ${notPurged(cls, rid, sql`h.id`)}
          -- Whole record versions only: a transaction's changes share one (issue 33), and a
          -- page never ends inside it (the window's peers count together).
          and h.record_version in (
            select h2.record_version from history h2
            where h2.class = ${cls} and h2.rid = ${rid} and h2.outcome = 'applied'
              and h2.record_version > ${afterRecordVersion}
            group by h2.record_version order by h2.record_version limit ${opts.limit})) y
      window w as (order by y.record_version)) x
    where x.running <= ${opts.maxBytes} or x.rn = 1
    order by x.record_version, x.id`.execute(db);
  return res.rows.map(mapChange);
}

/** The first change of the class created at or after `since` (database clock), or null. */
export async function firstChangeSince(db: Kysely<Database>, cls: string, since: Date): Promise<{ pos: LogPosition; created_at: Date } | null> {
  const res = await sql<{ tx: string; id: number; created_at: Date }>`
    select h.tx::text as tx, h.id, h.created_at from history h
    where h.class = ${cls} and h.outcome = 'applied' and h.tx is not null and h.created_at >= ${since}
    order by h.tx, h.id limit 1`.execute(db);
  const r = res.rows[0];
  return r ? { pos: { tx: r.tx, id: r.id }, created_at: r.created_at } : null;
}
