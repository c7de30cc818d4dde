/**
 * History retention by record, so that it runs on Citus too (issue 35). Frozen in time: never
 * edit an applied migration.
 *
 * Migration 0013's `kslate_history_kept(h history)` takes a whole `history` row, and the sweep
 * judged it inside multi-record DELETEs: on Citus a shard's row is not of type `history`, a
 * function reading other tables cannot run inside a statement on a shard (a distributed query
 * from a query on a shard), and the purge's boundary table `history_purged` was a table of
 * the coordinator alone.
 *
 * - `kslate_history_kept(p_class, p_rid, p_field, p_id, p_outcome, p_version, p_record_version)`:
 *   the rule of 0013, the same text, from the row's columns, every statement naming the
 *   record's `rid` (on Citus: its shard only). PL/pgSQL, not SQL: Citus cannot plan a SQL
 *   function's statements that read distributed tables with its parameters. The 0013
 *   signature stays, calling it (one text of the rule).
 * - `kslate_purge_history(p_class, p_rid, p_ids, p_fields, p_keep_last, p_max_age_seconds,
 *   p_rejected_max_age_seconds, p_limit)`: one record's purge, in one call. With `p_ids`: those
 *   rows (the age walks pick them by age). With `p_fields`: each field's rows the rules purge
 *   (older than the field's `p_keep_last` newest, older than `p_max_age_seconds`, or not
 *   applied and older than `p_rejected_max_age_seconds`), at most `p_limit`. Either way only
 *   rows `kslate_history_kept` does not keep, judged under the record's row lock (the same lock
 *   a write takes: no write of the record moves between judging and deleting), the boundary
 *   moved in `history_purged`. Returns how many it deleted and the newest (created_at, id)
 *   among them.
 * - On Citus: `history_purged` distributed by `rid` and co-located with `records` (a record's
 *   boundary on its node), `history_retention` (per class: small) a reference table,
 *   `kslate_purge_history` and `kslate_history_kept` distributed by `p_rid`: a call is
 *   delegated to the record's node in one hop and runs there whole.
 */
export const version = 18;
export const name = 'retention_by_record';

export const up = /* sql */ `
create function kslate_history_kept(
  p_class text, p_rid text, p_field text, p_id bigint, p_outcome text, p_version bigint, p_record_version bigint)
returns boolean
language plpgsql stable as $fn$
begin
  return not exists (select 1 from history n where n.rid = p_rid and n.class = p_class and n.field = p_field and n.id > p_id)
      or (p_outcome = 'applied' and exists (
            select 1 from records r join fields f on f.rid = r.rid and f.record_id = r.id and f.name = p_field
            where r.rid = p_rid and r.class = p_class
              and (f.version = p_version
                   or p_record_version > (select min(c.record_version) from checkpoints c
                                          where c.rid = p_rid and c.record_id = r.id))));
end
$fn$;

create or replace function kslate_history_kept(h history) returns boolean
language sql stable as $fn$
  select kslate_history_kept(h.class, h.rid, h.field, h.id, h.outcome, h.version, h.record_version)
$fn$;

create function kslate_purge_history(
  p_class text, p_rid text, p_ids bigint[], p_fields text[], p_keep_last integer, p_max_age_seconds integer,
  p_rejected_max_age_seconds integer, p_limit integer,
  out purged integer, out last_at timestamptz, out last_id bigint)
language plpgsql volatile as $fn$
declare
  c_id bigint[] := '{}';
  c_field text[] := '{}';
  c_outcome text[] := '{}';
  c_version bigint[] := '{}';
  c_rv bigint[] := '{}';
  t_id bigint[];
  t_field text[];
  t_outcome text[];
  t_version bigint[];
  t_rv bigint[];
  fld text;
  keep_from bigint;
  doomed bigint[] := '{}';
  i integer;
begin
  purged := 0;
  -- The record's row lock, as a write takes it (kslate_lock): judging and deleting see one state.
  perform 1 from records r where r.rid = p_rid and r.class = p_class for update;
  -- The candidates first, whole, each statement simple and on the record's shard (each is
  -- judged by statements of its own after: on Citus a statement on a shard may not run others).
  if p_ids is not null then
    select coalesce(array_agg(y.id order by y.id), '{}'), coalesce(array_agg(y.field order by y.id), '{}'),
           coalesce(array_agg(y.outcome order by y.id), '{}'), coalesce(array_agg(y.version order by y.id), '{}'),
           coalesce(array_agg(y.record_version order by y.id), '{}')
      into c_id, c_field, c_outcome, c_version, c_rv
      from history y where y.rid = p_rid and y.class = p_class and y.id = any(p_ids);
  end if;
  foreach fld in array coalesce(p_fields, '{}'::text[]) loop
    keep_from := 0;
    if p_keep_last is not null then
      select k.id into keep_from from history k where k.rid = p_rid and k.class = p_class and k.field = fld
        order by k.id desc offset p_keep_last - 1 limit 1;
      keep_from := coalesce(keep_from, 0);
    end if;
    select coalesce(array_agg(y.id order by y.id), '{}'), coalesce(array_agg(y.field order by y.id), '{}'),
           coalesce(array_agg(y.outcome order by y.id), '{}'), coalesce(array_agg(y.version order by y.id), '{}'),
           coalesce(array_agg(y.record_version order by y.id), '{}')
      into t_id, t_field, t_outcome, t_version, t_rv
      from (select x.id, x.field, x.outcome, x.version, x.record_version from history x
            where x.rid = p_rid and x.class = p_class and x.field = fld
              and (x.id < keep_from
                   or (p_max_age_seconds is not null and x.created_at < now() - make_interval(secs => p_max_age_seconds))
                   or (p_rejected_max_age_seconds is not null and x.outcome <> 'applied'
                       and x.created_at < now() - make_interval(secs => p_rejected_max_age_seconds)))
            order by x.id
            limit p_limit) y;
    c_id := c_id || t_id;
    c_field := c_field || t_field;
    c_outcome := c_outcome || t_outcome;
    c_version := c_version || t_version;
    c_rv := c_rv || t_rv;
  end loop;
  for i in 1 .. coalesce(cardinality(c_id), 0) loop
    exit when cardinality(doomed) >= p_limit;
    if not kslate_history_kept(p_class, p_rid, c_field[i], c_id[i], c_outcome[i], c_version[i], c_rv[i]) then
      doomed := doomed || c_id[i];
    end if;
  end loop;
  if cardinality(doomed) = 0 then
    return;
  end if;
  with del as (
    delete from history x where x.rid = p_rid and x.id = any(doomed) returning x.id, x.created_at
  )
  select count(*)::integer, max(del.created_at), max(del.id) into purged, last_at, last_id from del;
  insert into history_purged as p (class, rid, before, before_id) values (p_class, p_rid, last_at, last_id)
  on conflict (class, rid) do update set before = greatest(p.before, excluded.before),
                                         before_id = greatest(p.before_id, excluded.before_id);
end
$fn$;

do $citus$
begin
  if not exists (select 1 from pg_extension where extname = 'citus') then
    return;
  end if;
  perform create_reference_table('history_retention');
  perform create_distributed_table('history_purged', 'rid', colocate_with => 'records');
  perform create_distributed_function('kslate_history_kept(text, text, text, bigint, text, bigint, bigint)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_purge_history(text, text, bigint[], text[], integer, integer, integer, integer)', 'p_rid', colocate_with => 'records');
end
$citus$;
`;
