/**
 * One creation order across nodes, and the sweep per record, on Citus (issue 35,
 * docs/scale-out.md, docs/decisions.md). Frozen in time: never edit an applied migration.
 *
 * Query answers oldest first by creation time, in record id order (the query indexes end in
 * `record_id`, so a page is one ordered index range per shard). On Citus a record's id is
 * drawn on the worker that holds it (the write function is delegated there) from that node's
 * own range of the identity sequence (group << 48), so id order grouped records by worker.
 *
 * Only when the `citus` extension is in the database:
 * - A record's id is made from its creation time: `kslate_record_order_id(created_at, drawn)`
 *   = base + (64-µs ticks of `created_at` since this migration) * 256 + 4 bits of the drawing
 *   node's group + the low 4 bits of the identity value it drew. `created_at` is the creating
 *   transaction's `now()` on the node that created it, so id order is creation-time order
 *   across nodes (to the nodes' clock agreement; records created within one tick on two
 *   nodes are concurrent and either order is right). The node's group and its own counter
 *   keep ids unique: two ids collide only if one node creates more than 16 records in one
 *   64-µs tick, or two nodes whose groups agree modulo 16 create in one tick with counters
 *   agreeing modulo 16. 53 bits (a JavaScript number) hold 2^45 ticks: 71 years from here.
 *   `base` is one past the greatest id already present, so new records follow old ones.
 * - A BEFORE INSERT trigger on `records` (identity columns cannot be altered on a distributed
 *   table) replaces the drawn identity value with that id. It fires on the shard, reads only
 *   the row it fills, and runs once per record created (never on an update).
 * On plain PostgreSQL nothing of this exists: the identity alone is creation order there.
 *
 * The sweep per record (both modes, so one text; the gateway calls them only on Citus, where
 * `FOR UPDATE` across shards is refused): each takes the record's `rid` first and, on
 * Citus, is distributed by it (co-located with `records`), so a call is delegated to the
 * record's node in one hop and locks and deletes there, as the plain-PostgreSQL statements
 * of db/kysely/sweep.ts do for a batch:
 * - `kslate_expire_record`: the record if it is still due (re-checked under its row lock,
 *   SKIP LOCKED: a writer holding it renews it), queued for the purge and deleted;
 * - `kslate_purge_expired_record`: up to a limit of a queued record's history rows (at or
 *   below its watermark) and entries; its queue row goes when none are left;
 * - `kslate_flag_lapsed_lease`: a task field's lease flagged lapsed if it still is (SKIP
 *   LOCKED: a field being claimed right now is that writer's to decide);
 * - and each again for several records of one shard in one call (`..._records`,
 *   `kslate_flag_lapsed_leases`): the gateway groups a batch's candidates by shard, so a
 *   batch of a thousand records costs one delegated call per shard, not one per record.
 */
export const version = 17;
export const name = 'citus_order_sweep';

export const up = /* sql */ `
create function kslate_expire_record(p_rid text, p_rec_id bigint, p_class text, p_ttl_seconds double precision) returns integer
language plpgsql volatile as $fn$
declare
  r_class text;
  watermark bigint;
begin
  -- p_ttl_seconds null: the record's own expiry (ttl_seconds) passed; else the class ttl,
  -- for records without their own expiry.
  select r.class into r_class from records r
    where r.rid = p_rid and r.id = p_rec_id
      and case when p_ttl_seconds is null then r.expires_at <= now()
               else r.class = p_class and r.expires_at is null
                    and r.last_write_at < now() - make_interval(secs => p_ttl_seconds) end
    for update skip locked;
  if not found then
    return 0;
  end if;
  -- Two statements: Citus takes no subquery in an INSERT's values.
  select coalesce(max(h.id), 0) into watermark from history h where h.class = r_class and h.rid = p_rid;
  insert into expired_records (rid, record_id, class, max_history_id) values (p_rid, p_rec_id, r_class, watermark)
  on conflict on constraint expired_records_pkey do nothing;
  delete from records r where r.rid = p_rid and r.id = p_rec_id;
  return 1;
end
$fn$;

create function kslate_purge_expired_record(p_rid text, p_rec_id bigint, p_limit integer,
  out history_rows integer, out entries integer, out finished boolean)
language plpgsql volatile as $fn$
declare
  q record;
begin
  history_rows := 0;
  entries := 0;
  finished := false;
  select x.class, x.max_history_id into q from expired_records x where x.rid = p_rid and x.record_id = p_rec_id;
  if not found then
    finished := true;
    return;
  end if;
  delete from history h where h.rid = p_rid and h.id = any(array(
    select k.id from history k where k.class = q.class and k.rid = p_rid and k.id <= q.max_history_id limit p_limit));
  get diagnostics history_rows = row_count;
  delete from entries e where e.rid = p_rid and e.record_id = p_rec_id and (e.field, e.seq) in (
    select k.field, k.seq from entries k where k.rid = p_rid and k.record_id = p_rec_id limit p_limit);
  get diagnostics entries = row_count;
  if history_rows < p_limit and entries < p_limit
     and not exists (select 1 from history h where h.class = q.class and h.rid = p_rid and h.id <= q.max_history_id)
     and not exists (select 1 from entries e where e.rid = p_rid and e.record_id = p_rec_id) then
    delete from expired_records x where x.rid = p_rid and x.record_id = p_rec_id;
    finished := true;
  end if;
end
$fn$;

create function kslate_flag_lapsed_lease(p_rid text, p_rec_id bigint, p_field text) returns integer
language plpgsql volatile as $fn$
begin
  perform 1 from fields f
    where f.rid = p_rid and f.record_id = p_rec_id and f.name = p_field
      and f.owner is not null and not f.lease_lapsed and f.lease_expires_at <= now()
    for update skip locked;
  if not found then
    return 0;
  end if;
  update fields f set lease_lapsed = true where f.rid = p_rid and f.record_id = p_rec_id and f.name = p_field;
  return 1;
end
$fn$;

-- The same for several records of one shard in one call (the gateway groups a batch's
-- candidates by shard; on Citus the call is delegated by its first record, and every record
-- of the call is on that node).
create function kslate_expire_records(p_rid text, p_rids text[], p_ids bigint[], p_class text, p_ttl_seconds double precision)
returns integer
language plpgsql volatile as $fn$
declare
  n integer := 0;
begin
  for i in 1 .. coalesce(cardinality(p_rids), 0) loop
    n := n + kslate_expire_record(p_rids[i], p_ids[i], p_class, p_ttl_seconds);
  end loop;
  return n;
end
$fn$;

create function kslate_purge_expired_records(p_rid text, p_rids text[], p_ids bigint[], p_limit integer,
  out history_rows integer, out entries integer, out finished integer)
language plpgsql volatile as $fn$
declare
  r record;
begin
  history_rows := 0;
  entries := 0;
  finished := 0;
  for i in 1 .. coalesce(cardinality(p_rids), 0) loop
    exit when greatest(history_rows, entries) >= p_limit;
    r := kslate_purge_expired_record(p_rids[i], p_ids[i], p_limit - greatest(history_rows, entries));
    history_rows := history_rows + r.history_rows;
    entries := entries + r.entries;
    if r.finished then
      finished := finished + 1;
    end if;
  end loop;
end
$fn$;

create function kslate_flag_lapsed_leases(p_rid text, p_rids text[], p_ids bigint[], p_fields text[]) returns integer
language plpgsql volatile as $fn$
declare
  n integer := 0;
begin
  for i in 1 .. coalesce(cardinality(p_rids), 0) loop
    n := n + kslate_flag_lapsed_lease(p_rids[i], p_ids[i], p_fields[i]);
  end loop;
  return n;
end
$fn$;

do $citus$
declare
  base bigint;
  epoch numeric;
begin
  if not exists (select 1 from pg_extension where extname = 'citus') then
    return;
  end if;
  perform create_distributed_function('kslate_expire_record(text, bigint, text, double precision)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_purge_expired_record(text, bigint, integer)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_flag_lapsed_lease(text, bigint, text)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_expire_records(text, text[], bigint[], text, double precision)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_purge_expired_records(text, text[], bigint[], integer)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_flag_lapsed_leases(text, text[], bigint[], text[])', 'p_rid', colocate_with => 'records');

  select coalesce(max(id), 0) + 1 into base from records;
  -- A day before now: a node whose clock is somewhat behind still makes ticks above zero.
  epoch := floor(extract(epoch from now())) - 86400;
  execute format($f$
    create function kslate_record_order_id(p_created_at timestamptz, p_drawn bigint) returns bigint
    language sql immutable parallel safe as $b$
      select %s::bigint
             + (greatest(0, floor((extract(epoch from p_created_at) - %s) * 15625))::bigint << 8)
             + ((p_drawn >> 48) & 15) * 16 + (p_drawn & 15)
    $b$$f$, base, epoch);
  perform create_distributed_function('kslate_record_order_id(timestamptz, bigint)');
  create function kslate_records_order() returns trigger
  language plpgsql as $fn$
  begin
    new.id := kslate_record_order_id(new.created_at, new.id);
    return new;
  end
  $fn$;
  perform create_distributed_function('kslate_records_order()');
  perform set_config('citus.enable_unsafe_triggers', 'on', true);
  create trigger records_order before insert on records for each row execute function kslate_records_order();
end
$citus$;
`;
