/**
 * `ttl_seconds` on transactions (issue 37). Frozen in time once applied: never edit it.
 *
 * - kslate_transact gains `p_ttl_seconds` (a new overload) and answers `expires_ms` on each
 *   row: when every write applied, the record's own expiry is set or extended once, under the
 *   record's lock and in the same statement, exactly as kslate_write does for a single write
 *   (kslate_extend_expiry: never brought forward). A refused transaction leaves it alone. The
 *   body is 0015's otherwise. The 15-argument kslate_transact (a gateway of the previous
 *   release during a rolling upgrade) calls it with no ttl, so the transaction has one text.
 * - `checkpoints_saved (saved_at, record_id)`: the retention sweep's `checkpoints` walk finds
 *   the records whose checkpoints were saved since its cursor, so a row kept only by a
 *   checkpoint is purged on the next sweep after a re-save moved the checkpoint past it.
 * - On Citus the new kslate_transact is distributed by `p_rid`, co-located with `records`.
 */
export const version = 19;
export const name = 'transaction_ttl';

export const up = /* sql */ `
create function kslate_transact(
  p_class text, p_rid text, p_txn uuid, p_author text, p_strength text, p_writes jsonb,
  p_values text[], p_evidence text[], p_based_on text[], p_invocation text[],
  p_kept text[], p_kept_size integer[], p_kept_sha text[], p_stop integer, p_stop_outcome text, p_ttl_seconds integer)
returns table (outcome text, idx integer, version bigint, record_version bigint, created boolean, cur_author text,
               cur_value json, cur_evidence text, cur_updated_ms bigint, moved json, missing text[], owner text,
               lease_expires_ms bigint, took_over_from text, expires_ms bigint)
language plpgsql volatile as $fn$
declare
  lk record;
  d record;
  c record;
  a record;
  w jsonb;
  n integer := jsonb_array_length(p_writes);
  i integer;
  rid_id bigint;
  stamp_version bigint;
  stamp_tx xid8;
  was_created boolean := false;
  failed integer;
  failed_outcome text;
  fd record;
  fc record;
  r_outcome text[] := '{}';
  r_version bigint[] := '{}';
  r_owner text[] := '{}';
  r_expires timestamptz[] := '{}';
  r_previous text[] := '{}';
  seq bigint;
  whole boolean;
  rec_expires timestamptz;
begin
  lk := kslate_lock(p_class, p_rid);
  rid_id := lk.rec_id;
  perform set_config('kslate.txn', p_txn::text, true);
  begin
    for i in 0 .. n - 1 loop
      if i = p_stop then
        failed := i;
        failed_outcome := 'stop';
        raise exception using errcode = 'KS001';
      end if;
      w := p_writes -> i;
      perform set_config('kslate.txn_index', i::text, true);
      if w->>'op' = 'claim' then
        c := kslate_decide_claim(p_rid, rid_id, lk.locked_at, w->>'field', p_author, (w->>'lease')::integer);
        if c.outcome = 'held' then
          failed := i;
          failed_outcome := 'held';
          fc := c;
          raise exception using errcode = 'KS001';
        end if;
        a := kslate_apply(p_class, p_rid, rid_id, stamp_version, stamp_tx, w->>'field', 'task',
                          case when c.outcome = 'renew' then 'claim' else c.outcome end, c.cur_version + 1, null,
                          p_author, p_strength, null, null, p_invocation[i + 1],
                          case when c.expires is null then null else p_author end, c.expires, null);
        r_outcome := r_outcome || c.outcome;
        r_version := r_version || (c.cur_version + 1);
        r_owner := r_owner || case when c.expires is null then null else p_author end;
        r_expires := r_expires || c.expires;
        r_previous := r_previous || c.previous;
      else
        d := kslate_decide_write(p_rid, rid_id, lk.locked_at, w->>'field', (w->>'expect')::bigint,
                                 case when jsonb_typeof(w->'premises') = 'array' then w->'premises' end,
                                 case when jsonb_typeof(w->'gate') = 'array'
                                      then array(select jsonb_array_elements_text(w->'gate')) end,
                                 p_author);
        if d.outcome is not null then
          failed := i;
          failed_outcome := d.outcome;
          fd := d;
          raise exception using errcode = 'KS001';
        end if;
        a := kslate_apply(p_class, p_rid, rid_id, stamp_version, stamp_tx, w->>'field', w->>'kind', w->>'op',
                          d.cur_version + 1, p_values[i + 1], p_author, p_strength, p_evidence[i + 1],
                          p_based_on[i + 1], p_invocation[i + 1], null, null, (w->>'hist_expected')::bigint);
        r_outcome := r_outcome || 'applied'::text;
        r_version := r_version || (d.cur_version + 1);
        r_owner := r_owner || null::text;
        r_expires := r_expires || null::timestamptz;
        r_previous := r_previous || null::text;
      end if;
      -- The first apply raised the record version (or created the record); the others share it.
      if stamp_version is null then
        stamp_version := a.record_version;
        stamp_tx := a.log_tx;
        rid_id := a.rec_id;
        was_created := a.created;
      end if;
    end loop;
  exception when sqlstate 'KS001' then
    -- Every write of the block is rolled back; PL/pgSQL variables keep what the loop found.
    null;
  end;

  if failed is null then
    perform set_config('kslate.txn_index', '', true);
    perform set_config('kslate.txn', '', true);
    -- The record's own expiry, set or extended once for the whole transaction (as a single write does).
    if p_ttl_seconds is not null then
      rec_expires := kslate_extend_expiry(p_rid, rid_id, p_ttl_seconds, lk.locked_at);
    end if;
    return query select r.o, (r.ord - 1)::integer, r.v, stamp_version, was_created, null::text, null::json, null::text,
                        null::bigint, null::json, null::text[], r.ow, floor(extract(epoch from r.e) * 1000)::bigint, r.p,
                        floor(extract(epoch from rec_expires) * 1000)::bigint
      from unnest(r_outcome, r_version, r_owner, r_expires, r_previous) with ordinality as r(o, v, ow, e, p, ord);
    return;
  end if;

  -- The attempt's history: one row per write, the failing one with its outcome, the others
  -- not applied because of it (none when the failing write alone would leave none).
  if not (failed_outcome = 'invalid_checkpoint' or (failed_outcome = 'stop' and p_stop_outcome is null)) then
    for i in 0 .. n - 1 loop
      w := p_writes -> i;
      perform set_config('kslate.txn_index', i::text, true);
      perform set_config('kslate.txn_failed', case when i = failed then '' else failed::text end, true);
      -- A STALE or STALE_PREMISE row keeps the whole value, as a single write's does.
      whole := i = failed and failed_outcome in ('stale', 'stale_premise');
      seq := kslate_add_history(
        p_class, p_rid, w->>'field', case when w->>'op' = 'claim' then 'claim' else w->>'op' end,
        case when i <> failed then 'not_applied' when failed_outcome = 'stop' then p_stop_outcome else failed_outcome end,
        null, lk.rec_version,
        case when whole then p_values[i + 1] else p_kept[i + 1] end,
        case when whole then null else p_kept_size[i + 1] end,
        case when whole then null else p_kept_sha[i + 1] end,
        p_author, p_strength, p_evidence[i + 1], (w->>'hist_expected')::bigint, p_based_on[i + 1],
        p_invocation[i + 1], null);
    end loop;
  end if;
  perform set_config('kslate.txn_index', '', true);
  perform set_config('kslate.txn_failed', '', true);
  perform set_config('kslate.txn', '', true);

  if failed_outcome = 'held' then
    return query select 'held'::text, failed, fc.cur_version, lk.rec_version, false, null::text, null::json, null::text,
                        null::bigint, null::json, null::text[], fc.holder,
                        floor(extract(epoch from fc.cur_expires) * 1000)::bigint, null::text, null::bigint;
  elsif failed_outcome = 'stop' then
    return query select 'stop'::text, failed, null::bigint, lk.rec_version, false, null::text, null::json, null::text,
                        null::bigint, null::json, null::text[], null::text, null::bigint, null::text, null::bigint;
  else
    return query select fd.outcome, failed, fd.cur_version, lk.rec_version, false, fd.cur_author, fd.cur_value,
                        fd.cur_evidence, floor(extract(epoch from fd.cur_updated_at) * 1000)::bigint, fd.moved,
                        fd.missing, null::text, null::bigint, null::text, null::bigint;
  end if;
end
$fn$;

-- The transaction of a previous release (no ttl): the same text, through the one above.
-- This statement and the index below each run alone (EXECUTE in a DO block): on Citus the
-- function is distributed and the table too, and Citus cannot forward a DDL statement that
-- shares its query string with others ("cannot insert multiple commands into a prepared
-- statement"). On plain PostgreSQL it is the same statement.
do $ddl$
begin
  execute $q$
create or replace function kslate_transact(
  p_class text, p_rid text, p_txn uuid, p_author text, p_strength text, p_writes jsonb,
  p_values text[], p_evidence text[], p_based_on text[], p_invocation text[],
  p_kept text[], p_kept_size integer[], p_kept_sha text[], p_stop integer, p_stop_outcome text)
returns table (outcome text, idx integer, version bigint, record_version bigint, created boolean, cur_author text,
               cur_value json, cur_evidence text, cur_updated_ms bigint, moved json, missing text[], owner text,
               lease_expires_ms bigint, took_over_from text)
language sql volatile as $fn$
  select t.outcome, t.idx, t.version, t.record_version, t.created, t.cur_author, t.cur_value, t.cur_evidence,
         t.cur_updated_ms, t.moved, t.missing, t.owner, t.lease_expires_ms, t.took_over_from
    from kslate_transact(p_class, p_rid, p_txn, p_author, p_strength, p_writes, p_values, p_evidence, p_based_on,
                         p_invocation, p_kept, p_kept_size, p_kept_sha, p_stop, p_stop_outcome, null::integer) t
$fn$
  $q$;
  execute 'create index checkpoints_saved on checkpoints (saved_at, record_id)';
end
$ddl$;

do $citus$
begin
  if not exists (select 1 from pg_extension where extname = 'citus') then
    return;
  end if;
  perform create_distributed_function('kslate_transact(text, text, uuid, text, text, jsonb, text[], text[], text[], text[], text[], integer[], text[], integer, text, integer)', 'p_rid', colocate_with => 'records');
end
$citus$;
`;
