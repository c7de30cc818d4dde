/**
 * Autovacuum settings for the tables the sweep deletes from and every write updates (issue 37;
 * docs/worker.md "Reclaiming space"). Frozen in time: never edit an applied migration.
 *
 * Retention deletes history rows, but a deleted row's space is reused only after a VACUUM has
 * removed it. PostgreSQL's default trigger is 50 + 20% of the table's rows dead: on a history
 * table of 10 million rows, 2 million dead rows before autovacuum starts, while new rows go to
 * fresh pages at the end of the table. The 10-minute soak of the retention bench saw exactly
 * that: with `keepLast: 5` the history table kept growing, 26,565 dead tuples and history never
 * autovacuumed in 4 minutes. So the table grew by its whole write rate, retention or not.
 *
 * Per table (storage parameters, so a database-wide setting of the operator's is untouched for
 * other tables and these can be changed again with `alter table ... set (...)`):
 * - history: vacuum at 1,000 + 1% of rows dead (purged) and at 1,000 + 2% of rows inserted
 *   since the last vacuum (an insert-only stretch still gets its visibility map set, so the
 *   history pages' index-only scans stay cheap), analyze at 1,000 + 1% changed (the purge's
 *   walks plan on the row estimates).
 * - history_purged, expired_records, idempotency_keys, entries (rows the sweep deletes) and
 *   records, fields (a row updated by every write: one dead version per write that HOT
 *   pruning does not reclaim): vacuum and analyze at 1,000 + 5% dead.
 *
 * One statement per table, each through EXECUTE in a DO block: on Citus a DDL statement must
 * run alone (see 0019); Citus propagates `alter table ... set (...)` of a distributed table to
 * each of its shards (the tables autovacuum actually works on; the coordinator's shell table
 * is empty); test/citus/retention.test.ts checks every shard.
 */
export const version = 21;
export const name = 'autovacuum';

export const up = /* sql */ `
do $av$
begin
  execute 'alter table history set (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, '
       || 'autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_vacuum_insert_threshold = 1000, '
       || 'autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000)';
end
$av$;
do $av$
declare
  t text;
begin
  foreach t in array array['history_purged', 'expired_records', 'idempotency_keys', 'entries', 'records', 'fields'] loop
    execute format('alter table %I set (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 1000, '
                || 'autovacuum_analyze_scale_factor = 0.05, autovacuum_analyze_threshold = 1000)', t);
  end loop;
end
$av$;
`;
