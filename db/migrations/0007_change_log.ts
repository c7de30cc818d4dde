/**
 * The change log the watch streams read (issue 16). Frozen in time: never edit an applied
 * migration.
 *
 * Every applied change is already a history row (outcome `applied`), written in the same
 * statement as the change itself (kslate_try_write, kslate_claim, PgWriteTx.applyField). What
 * a watcher of a whole class needs on top is an order in which no row can appear behind a
 * position already read: history ids are taken at insert, so a transaction that took id 10
 * and commits after the one that took id 11 would be skipped by an id cursor.
 *
 * - `tx xid8`: the writing transaction's id, `pg_current_xact_id()` by default, so every
 *   insert path (the plpgsql functions, the write transaction, the rejection inserts) sets it
 *   without naming it. Added without a default first (instant, no table rewrite), then the
 *   default is set, which applies to new rows only; rows written before this migration keep
 *   a null `tx` and are not part of the class log (history still shows them).
 * - A watcher reads `(tx, id) > cursor and tx < pg_snapshot_xmin(pg_current_snapshot())`, in
 *   `(tx, id)` order: every transaction below the oldest one still running has finished, so
 *   nothing can later appear at or below a position read that way (the event-store
 *   technique). A transaction held open delays the log behind it; it never loses a row.
 * - `history_log (class, tx, id)` over applied rows: a class's log in that order; the poller
 *   reads one index range per watched class.
 * - A BRIN index on `created_at` (a few pages; next to nothing per insert, the table grows in
 *   time order): finds where the retained window starts, for the 410 EXPIRED answer.
 */
export const version = 7;
export const name = 'change_log';

export const up = /* sql */ `
alter table history add column tx xid8;
alter table history alter column tx set default pg_current_xact_id();
create index history_log on history (class, tx, id) where outcome = 'applied';
create index history_created_brin on history using brin (created_at);
`;
