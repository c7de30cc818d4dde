/**
 * The change log the watch streams read (migration 0007, issue 16): a class's applied changes
 * in `(tx, id)` order, only below the oldest transaction still running, and one record's
 * applied history by record version.
 */
import { sql, type Kysely } from 'kysely';
import { type ChangeRow, type LogPosition, type NodePos } from '../port.js';
import { HISTORY_BYTES } from './conn.js';
import type { Database } from './schema.js';
import { notPurged } from './sweep.js';

/**
 * The node group whose transaction ids a history row's `tx` is in: the node that wrote it
 * (migration 0027), or for a row written before 0027 its id's range (Citus draws each node's
 * ids from `group << 48`). 0 on plain PostgreSQL.
 */
const LOG_GROUP = sql`coalesce(h.log_group, (h.id >> 48)::int)`;

/** The columns of a ChangeRow, from history `h`. */
const CHANGE_COLUMNS = sql`h.tx::text as tx, ${LOG_GROUP}::text as grp, h.id, h.class, h.rid, h.field, h.op, h.version, h.record_version, h.value, h.author,
  h.identity_strength, h.evidence, h.based_on, h.invocation, h.created_at, ${HISTORY_BYTES} as sz`;

/** CHANGE_COLUMNS again, from the subquery `x` that selected them. */
const CHANGE_COLUMNS_OF_X = sql`x.tx, x.grp, x.id, x.class, x.rid, x.field, x.op, x.version, x.record_version, x.value, x.author,
  x.identity_strength, x.evidence, x.based_on, x.invocation, x.created_at, x.sz`;

/** A row of CHANGE_COLUMNS. */
type ChangeColumns = Omit<ChangeRow, 'bytes' | 'group'> & { sz: number; grp: string };

function mapChange({ sz, grp, ...r }: ChangeColumns): ChangeRow {
  return { ...r, group: grp, bytes: sz };
}

/**
 * The oldest transaction of THIS database still running, or the next one to start (xid8): every
 * transaction of the database below it has finished. Only this database's transactions write
 * its change log, so the others' are left out: the snapshot's running ids (`xip`) less those a
 * backend of another database holds (`pg_stat_get_activity`, whose `backend_xid` every role may
 * read) or another database has prepared (`pg_prepared_xact`), else the snapshot's `xmax`
 * (running ids at or above it are not in `xip`). An id not found in either list counts as this
 * database's (a transaction that just ended, a background worker's): it holds the frontier
 * back for one read at most, never lets a row be skipped. With the server-wide
 * `pg_snapshot_xmin`, another database's (or another test file's) long transaction held every
 * watch of this one back for as long as it ran (test/watch/class.test.ts, "another database's").
 * Text, not a fragment: Citus runs it on every node (run_command_on_all_nodes).
 */
export const DB_XMIN_SQL = `(select coalesce(
    (select min(x) from pg_snapshot_xip(s.snap) x
     where xid(x) not in (
       select a.backend_xid from pg_stat_get_activity(null) a where a.datid <> d.oid and a.backend_xid is not null
       union all
       select p.transaction from pg_prepared_xact() p where p.dbid <> d.oid)),
    pg_snapshot_xmax(s.snap))
  from (select pg_current_snapshot() as snap) s, (select oid from pg_database where datname = current_database()) d)`;
const DB_XMIN = sql<string>`${sql.raw(DB_XMIN_SQL)}`;

/** Every transaction of the database below its oldest one running has finished: the frontier is just under it. */
const FRONTIER = sql<string>`(${DB_XMIN}::text::numeric - 1)::text`;

/** A group's frontier component: past any id of a transaction at or below `tx`. */
const top = (tx: string): NodePos => ({ tx, id: Number.MAX_SAFE_INTEGER });

/** Below every row of a group (a position that lacks it). */
const BOTTOM: NodePos = { tx: '0', id: -1 };

/**
 * Citus (issue 35): each node group's oldest running transaction of this database (DB_XMIN_SQL), read on every node with
 * `run_command_on_all_nodes` (and on this one, the coordinator, in case it is not in the
 * metadata). Every transaction of group g below its xmin has finished, so a later read sees
 * all of its rows: read first, then the rows. A node that does not answer fails the read
 * (a frontier guessed without it could skip its rows).
 */
async function nodeXmins(db: Kysely<Database>): Promise<Map<string, bigint>> {
  const res = await sql<{ g: string; xmin: string | null; ok: boolean }>`
    select n.groupid::text as g, r.result as xmin, r.success as ok
    from run_command_on_all_nodes(${'select ' + DB_XMIN_SQL + '::text'}) r
    join pg_dist_node n on n.nodeid = r.nodeid
    where n.noderole = 'primary'
    union all
    select (select groupid from pg_dist_local_group)::text, ${DB_XMIN}::text, true`.execute(db);
  const out = new Map<string, bigint>();
  for (const r of res.rows) {
    if (!r.ok || r.xmin === null || !/^\d+$/.test(r.xmin)) throw new Error(`change log: node group ${r.g} did not give its oldest running transaction (${r.xmin ?? 'no answer'})`);
    const x = BigInt(r.xmin);
    const had = out.get(r.g);
    if (had === undefined || x < had) out.set(r.g, x);
  }
  return out;
}

/**
 * The log's frontier now, past any id (no row of the transaction just under the oldest running
 * one can come after it); on Citus one component per node group.
 */
export async function logHead(db: Kysely<Database>, citus = false): Promise<LogPosition> {
  if (citus) {
    const pos: Record<string, NodePos> = {};
    for (const [g, x] of await nodeXmins(db)) pos[g] = top((x - 1n).toString());
    return pos;
  }
  const res = await sql<{ tx: string }>`select ${FRONTIER} as tx`.execute(db);
  return { '0': top(res.rows[0].tx) };
}

/** A row of readLog: the frontier on every row, a change on each but the one of an empty read. */
type LogRow = { frontier: string; candidates: number } & (ChangeColumns | { id: null });

/**
 * Applied changes of `classes` after `after` (and at most `upTo`), in `(tx, id)` order per node
 * group, only below each group's oldest transaction still running, within `limit` and
 * `maxBytes` (the first always); `frontier` when the read was complete.
 */
export async function readLog(
  db: Kysely<Database>,
  classes: string[],
  after: LogPosition,
  opts: { upTo: LogPosition | null; limit: number; maxBytes: number },
  citus = false,
): Promise<{ rows: ChangeRow[]; frontier: LogPosition | null }> {
  if (citus) return readLogByNode(db, classes, after, opts);
  const from = after['0'] ?? BOTTOM;
  const until = opts.upTo ? opts.upTo['0'] : null;
  if (opts.upTo && !until) return { rows: [], frontier: null };
  const upTo = until ? sql`and (h.tx, h.id) <= (${until.tx}::xid8, ${until.id}::bigint)` : sql``;
  // One index range of history_log per class, merged in (tx, id) order; only rows of
  // transactions below the oldest one still running (they can no longer change). One
  // statement, so one snapshot: the frontier and the rows agree.
  const res = await sql<LogRow>`
    select s.frontier, x.candidates, ${CHANGE_COLUMNS_OF_X} from (
      select (t.xmin::text::numeric - 1)::text as frontier, t.xmin
      from (select ${DB_XMIN} as xmin) t) s
    left join lateral (
      select y.*, sum(y.sz) over w as running, row_number() over w as rn, count(*) over () as candidates
      from (
        select ${CHANGE_COLUMNS}, h.tx as tx_order
        from unnest(${classes}::text[]) as c(name)
        cross join lateral (
          select h.* from history h
          where h.class = c.name and h.outcome = 'applied'
            and (h.tx, h.id) > (${from.tx}::xid8, ${from.id}::bigint) ${upTo}
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
  return { rows, frontier: complete ? { '0': top(res.rows[0].frontier) } : null };
}

/**
 * Citus: each node group's rows read on their own, in that group's `(tx, id)` order below its
 * xmin (read first), then merged: repeatedly the earliest-created head of the groups' rows
 * (ties by group), so each group's rows keep their order and any prefix of the merge is a
 * prefix of every group's. A record lives on one node, so its changes stay in record_version
 * order; changes of records on different nodes come in creation order, to the nodes' clocks.
 */
async function readLogByNode(
  db: Kysely<Database>,
  classes: string[],
  after: LogPosition,
  opts: { upTo: LogPosition | null; limit: number; maxBytes: number },
): Promise<{ rows: ChangeRow[]; frontier: LogPosition | null }> {
  const xmins = await nodeXmins(db);
  const gs = [...xmins.keys()].sort((a, b) => Number(a) - Number(b));
  let complete = true;
  const lists = await Promise.all(
    gs.map(async (g) => {
      const from = after[g] ?? BOTTOM;
      const until = opts.upTo ? opts.upTo[g] : null;
      if (opts.upTo && !until) return [];
      const upTo = until ? sql`and (h.tx, h.id) <= (${until.tx}::xid8, ${until.id}::bigint)` : sql``;
      const res = await sql<ChangeColumns>`
        select ${CHANGE_COLUMNS} from history h
        where h.class = any(${classes}::text[]) and h.outcome = 'applied'
          and ${LOG_GROUP} = ${Number(g)}::int
          and (h.tx, h.id) > (${from.tx}::xid8, ${from.id}::bigint) ${upTo}
          and h.tx < ${xmins.get(g)!.toString()}::xid8
        order by h.tx, h.id
        limit ${opts.limit}`.execute(db);
      if (res.rows.length >= opts.limit) complete = false;
      return res.rows.map(mapChange);
    }),
  );
  const rows: ChangeRow[] = [];
  const at = lists.map(() => 0);
  let bytes = 0;
  for (;;) {
    let best = -1;
    for (let i = 0; i < lists.length; i++) {
      const r = lists[i][at[i]];
      if (r && (best < 0 || r.created_at.getTime() < lists[best][at[best]].created_at.getTime())) best = i;
    }
    if (best < 0) break;
    const r = lists[best][at[best]];
    if (rows.length >= opts.limit || (rows.length > 0 && bytes + r.bytes > opts.maxBytes)) {
      complete = false;
      break;
    }
    rows.push(r);
    bytes += r.bytes;
    at[best]++;
  }
  if (!complete) return { rows, frontier: null };
  const frontier: Record<string, NodePos> = {};
  for (const g of gs) frontier[g] = top((xmins.get(g)! - 1n).toString());
  return { rows, frontier };
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

/**
 * The first change of the class created at or after `since` (database clock), or null: the
 * position just before it (on Citus, per node group: the first of each group that has one).
 */
export async function firstChangeSince(
  db: Kysely<Database>,
  cls: string,
  since: Date,
  citus = false,
): Promise<{ pos: LogPosition; created_at: Date } | null> {
  const gs = citus ? [...(await nodeXmins(db)).keys()] : [null];
  const firsts = await Promise.all(
    gs.map(async (g) => {
      const range = g === null ? sql`` : sql`and ${LOG_GROUP} = ${Number(g)}::int`;
      const res = await sql<{ tx: string; grp: string; id: number; created_at: Date }>`
        select h.tx::text as tx, ${LOG_GROUP}::text as grp, h.id, h.created_at from history h
        where h.class = ${cls} and h.outcome = 'applied' and h.tx is not null and h.created_at >= ${since} ${range}
        order by h.tx, h.id limit 1`.execute(db);
      return res.rows[0];
    }),
  );
  const pos: Record<string, NodePos> = {};
  let first: Date | null = null;
  for (const r of firsts) {
    if (!r) continue;
    // Just before it: its own transaction's earlier rows are in the window too (same created_at).
    pos[r.grp] = { tx: r.tx, id: r.id - 1 };
    if (first === null || r.created_at < first) first = r.created_at;
  }
  return first ? { pos, created_at: first } : null;
}
