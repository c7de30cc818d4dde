/**
 * History ids that keep rising for a record across a shard move, on Citus (issue 35,
 * docs/scale-out.md). Frozen in time: never edit an applied migration.
 *
 * A record's history is read newest first by id (`history_record (class, rid, id desc)`),
 * and the class change log orders rows of one transaction id by id. On Citus the id is the
 * identity value drawn on the node holding the shard, from that node's own range
 * (group << 48). When the rebalancer moves a record's shard to a node of a LOWER group, the
 * record's new rows drew ids below its old ones: its newest write sorted under older ones
 * in GET /history, and in the change log a row sharing its transaction id with an older row
 * of the record (the record's `log_tx` is the greatest seen) came before it.
 *
 * Only when the `citus` extension is in the database: a BEFORE INSERT trigger on `history`
 * makes the id `greatest(drawn, newest id of the record + 1)`. Every history row is written
 * by kslate_add_history under the record's lock (kslate_lock: its row lock, or the advisory
 * lock of a record not yet created), so the record's newest id cannot change between the
 * look-up and the insert. The look-up is one descent of `history_record` on the shard (the
 * same node: the trigger fires on the shard). While the record stays on its node the drawn
 * value is always the greater and nothing changes; after a move to a lower range the record
 * goes on from its own newest id. Ids stay unique per record (the key is `(rid, id)`).
 *
 * Chosen over a time-based id (as records have, 0017): a clock is not strictly rising — two
 * writes to one record in one 64-µs tick, or a move to a node whose clock is behind, could
 * still go backwards, so a time-based id would need this same look-up too. Cost: measured
 * in docs/scale-out.md ("History ids across a shard move").
 * On plain PostgreSQL nothing of this exists: one identity sequence rises for every record.
 *
 * A shard move (citus_move_shard_placement, the rebalancer) copies a shard to its new node by
 * logical replication, and the new node's apply worker inserts every history row written in
 * the meantime. The render triggers are ENABLE ALWAYS (0008, 0012), so they fired there, with
 * the apply worker's empty search_path: `kslate_history_render_row` was not found, the apply
 * failed and was retried every 5 s, the move never caught up, and the writes it holds back
 * for its switch-over timed out (issue 35: the rebalance that "did not finish" and the failed
 * writes under it). Both modes, replacing the two functions (bodies otherwise as in 0014 and
 * 0012): under `session_replication_role = replica` a row that arrives already rendered (a
 * copy of a row rendered where it was written) is kept as it is; a bulk load under that role
 * without `rendered` is still rendered, as 0008 says. The id trigger above fires on the origin
 * only, so a copied row keeps its id.
 */
export const version = 24;
export const name = 'citus_history_ids';

export const up = /* sql */ `
create or replace function kslate_history_render() returns trigger
language plpgsql as $fn$
begin
  if new.rendered is not null and current_setting('session_replication_role') = 'replica' then
    return new;
  end if;
  new.rendered := kslate_history_render_row(new.id, new.field, new.op, new.version, new.record_version, new.value,
    new.value_size, new.value_sha256, new.author, new.identity_strength, new.evidence, new.expected_version,
    new.invocation, new.outcome, new.based_on, new.created_at);
  return new;
end
$fn$;

create or replace function kslate_history_txn_render() returns trigger
language plpgsql as $fn$
declare
  at integer;
begin
  -- A replicated row's rendering already holds its transaction (history_render kept it).
  if current_setting('session_replication_role') = 'replica' and strpos(new.rendered, ',"transaction":{"id":"') > 0 then
    return new;
  end if;
  if new.txn is not null and new.rendered is not null then
    at := length(new.rendered) - strpos(reverse(new.rendered), reverse(',"outcome":"')) - length(',"outcome":"') + 1;
    new.rendered := left(new.rendered, at)
      || ',"transaction":{"id":"' || new.txn::text || '","index":' || coalesce(new.txn_index, 0)
      || coalesce(',"failed_index":' || new.txn_failed, '') || '}'
      || substr(new.rendered, at + 1);
  end if;
  return new;
end
$fn$;

do $citus$
begin
  if not exists (select 1 from pg_extension where extname = 'citus') then
    return;
  end if;
  create function kslate_history_rising_id() returns trigger
  language plpgsql as $fn$
  declare
    newest bigint;
  begin
    select h.id into newest from history h
      where h.class = new.class and h.rid = new.rid order by h.id desc limit 1;
    if newest is not null and newest >= new.id then
      new.id := newest + 1;
    end if;
    return new;
  end
  $fn$;
  perform create_distributed_function('kslate_history_rising_id()');
  perform set_config('citus.enable_unsafe_triggers', 'on', true);
  create trigger history_rising_id before insert on history for each row execute function kslate_history_rising_id();
end
$citus$;
`;
