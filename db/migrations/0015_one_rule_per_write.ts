/**
 * One text per write rule again, on both modes, after 0012 (transactions) and 0014 (Citus)
 * were written side by side. Frozen in time: never edit an applied migration.
 *
 * - 0014 replaced kslate_claim with its own copy of the claim rule (naming the record's
 *   `rid` in every statement), and kept 0012's kslate_decide_claim, which looks the field up
 *   by record id alone, for transactions: two texts of one rule, and a transaction's lookups
 *   not routable to one shard on Citus. Here the rule is kslate_decide_claim(p_rid, ...) (the
 *   0012 text, naming `rid`), and kslate_claim is 0012's again, calling it.
 * - kslate_transact (0012) is replaced, the same text, calling the `rid`-naming deciders of
 *   0014 (kslate_decide_write(p_rid, ...)) and of this migration; the record-id-only deciders
 *   (0010's kslate_decide_write, 0012's kslate_decide_claim) then have no caller and are dropped.
 * - On Citus: the new decider and kslate_transact are distributed by `p_rid`, co-located with
 *   `records` (a transaction is delegated to its record's node in one hop), and 0012's
 *   history trigger function is created on every node.
 * - 0013 (retention) added kslate_write(..., p_ttl_seconds) as a copy of 0010's body plus the
 *   record's expiry. It becomes 0014's body (naming `rid`) plus the expiry, and the
 *   15-argument kslate_write (kept for a gateway of the previous release during a rolling
 *   upgrade) calls it with no ttl, so the write rule has one text. kslate_extend_expiry names
 *   the record's `rid` too.
 */
export const version = 15;
export const name = 'one_rule_per_write';

export const up = /* sql */ `
create function kslate_decide_claim(
  p_rid text, p_rec_id bigint, p_at timestamptz, p_field text, p_author text, p_lease_seconds integer,
  out outcome text, out cur_version bigint, out holder text, out cur_expires timestamptz,
  out previous text, out expires timestamptz)
language plpgsql volatile as $fn$
declare
  cur_owner text;
begin
  select f.version, f.owner, f.lease_expires_at into cur_version, cur_owner, cur_expires
    from fields f where f.rid = p_rid and f.record_id = p_rec_id and f.name = p_field;
  cur_version := coalesce(cur_version, 0);
  holder := case when kslate_lease_held(cur_owner, cur_expires, p_at) then cur_owner end;

  -- 11 HELD: another identity held the lease when the lock was taken.
  if holder is not null and holder <> p_author then
    outcome := 'held';
    return;
  end if;
  if p_lease_seconds = 0 then
    outcome := 'release';
  elsif holder = p_author then
    outcome := 'renew';
  elsif cur_owner is not null and cur_owner <> p_author then
    outcome := 'takeover';
    previous := cur_owner;
  else
    outcome := 'claim';
  end if;
  expires := case when p_lease_seconds = 0 then null else p_at + make_interval(secs => p_lease_seconds) end;
end
$fn$;

create or replace function kslate_claim(
  p_class text, p_rid text, p_field text, p_author text, p_strength text, p_lease_seconds integer, p_invocation text)
returns table (outcome text, version bigint, record_version bigint, created boolean, owner text,
               lease_expires_ms bigint, took_over_from text)
language plpgsql volatile as $fn$
declare
  lk record;
  c record;
  a record;
  seq bigint;
begin
  lk := kslate_lock(p_class, p_rid);
  c := kslate_decide_claim(p_rid, lk.rec_id, lk.locked_at, p_field, p_author, p_lease_seconds);
  if c.outcome = 'held' then
    seq := kslate_add_history(p_class, p_rid, p_field, 'claim', 'held', null, lk.rec_version, null, null, null,
                              p_author, p_strength, null, null, null, p_invocation, null);
    return query select 'held'::text, c.cur_version, lk.rec_version, false, c.holder,
                        floor(extract(epoch from c.cur_expires) * 1000)::bigint, null::text;
    return;
  end if;
  a := kslate_apply(p_class, p_rid, lk.rec_id, null, null, p_field, 'task',
                    case when c.outcome = 'renew' then 'claim' else c.outcome end, c.cur_version + 1, null, p_author,
                    p_strength, null, null, p_invocation, case when c.expires is null then null else p_author end,
                    c.expires, null);
  return query select c.outcome, c.cur_version + 1, a.record_version, a.created,
                      case when c.expires is null then null else p_author end,
                      floor(extract(epoch from c.expires) * 1000)::bigint, c.previous;
end
$fn$;

create or replace function kslate_transact(
  p_class text, p_rid text, p_txn uuid, p_author text, p_strength text, p_writes jsonb,
  p_values text[], p_evidence text[], p_based_on text[], p_invocation text[],
  p_kept text[], p_kept_size integer[], p_kept_sha text[], p_stop integer, p_stop_outcome text)
returns table (outcome text, idx integer, version bigint, record_version bigint, created boolean, cur_author text,
               cur_value json, cur_evidence text, cur_updated_ms bigint, moved json, missing text[], owner text,
               lease_expires_ms bigint, took_over_from text)
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
    return query select r.o, (r.ord - 1)::integer, r.v, stamp_version, was_created, null::text, null::json, null::text,
                        null::bigint, null::json, null::text[], r.ow, floor(extract(epoch from r.e) * 1000)::bigint, r.p
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
                        floor(extract(epoch from fc.cur_expires) * 1000)::bigint, null::text;
  elsif failed_outcome = 'stop' then
    return query select 'stop'::text, failed, null::bigint, lk.rec_version, false, null::text, null::json, null::text,
                        null::bigint, null::json, null::text[], null::text, null::bigint, null::text;
  else
    return query select fd.outcome, failed, fd.cur_version, lk.rec_version, false, fd.cur_author, fd.cur_value,
                        fd.cur_evidence, floor(extract(epoch from fd.cur_updated_at) * 1000)::bigint, fd.moved,
                        fd.missing, null::text, null::bigint, null::text;
  end if;
end
$fn$;

create function kslate_extend_expiry(p_rid text, p_rec_id bigint, p_ttl_seconds integer, p_at timestamptz) returns timestamptz
language plpgsql volatile as $fn$
declare
  e timestamptz;
begin
  -- Sets the record's expiry, or moves it later; a shorter ttl never brings it forward.
  update records r set expires_at = greatest(r.expires_at, p_at + make_interval(secs => p_ttl_seconds))
    where r.rid = p_rid and r.id = p_rec_id returning r.expires_at into e;
  return e;
end
$fn$;

create or replace function kslate_write(
  p_class text, p_rid text, p_field text, p_kind text, p_op text, p_expect bigint, p_premises jsonb, p_gate text[],
  p_author text, p_strength text, p_value text, p_evidence text, p_based_on text, p_invocation text, p_hist_expected bigint,
  p_ttl_seconds integer)
returns table (outcome text, version bigint, record_version bigint, created boolean, cur_author text, cur_value json,
               cur_evidence text, cur_updated_ms bigint, moved json, missing text[], expires_ms bigint)
language plpgsql volatile as $fn$
declare
  lk record;
  d record;
  a record;
  seq bigint;
  e timestamptz;
begin
  lk := kslate_lock(p_class, p_rid);
  d := kslate_decide_write(p_rid, lk.rec_id, lk.locked_at, p_field, p_expect, p_premises, p_gate, p_author);
  if d.outcome is not null then
    if d.outcome <> 'invalid_checkpoint' then
      seq := kslate_add_history(p_class, p_rid, p_field, p_op, d.outcome, null, lk.rec_version, p_value, null, null,
                                p_author, p_strength, p_evidence, p_hist_expected, p_based_on, p_invocation, null);
    end if;
    return query select d.outcome, d.cur_version, lk.rec_version, false, d.cur_author, d.cur_value, d.cur_evidence,
                        floor(extract(epoch from d.cur_updated_at) * 1000)::bigint, d.moved, d.missing, null::bigint;
    return;
  end if;
  a := kslate_apply(p_class, p_rid, lk.rec_id, null, null, p_field, p_kind, p_op, d.cur_version + 1, p_value, p_author,
                    p_strength, p_evidence, p_based_on, p_invocation, null, null, p_hist_expected);
  if p_ttl_seconds is not null then
    e := kslate_extend_expiry(p_rid, a.rec_id, p_ttl_seconds, lk.locked_at);
  end if;
  return query select 'applied'::text, d.cur_version + 1, a.record_version, a.created, null::text, null::json,
                      null::text, null::bigint, null::json, null::text[], floor(extract(epoch from e) * 1000)::bigint;
end
$fn$;

-- The write of a previous release (no ttl): the same text, through the one above.
create or replace function kslate_write(
  p_class text, p_rid text, p_field text, p_kind text, p_op text, p_expect bigint, p_premises jsonb, p_gate text[],
  p_author text, p_strength text, p_value text, p_evidence text, p_based_on text, p_invocation text, p_hist_expected bigint)
returns table (outcome text, version bigint, record_version bigint, created boolean, cur_author text, cur_value json,
               cur_evidence text, cur_updated_ms bigint, moved json, missing text[])
language sql volatile as $fn$
  select w.outcome, w.version, w.record_version, w.created, w.cur_author, w.cur_value, w.cur_evidence,
         w.cur_updated_ms, w.moved, w.missing
    from kslate_write(p_class, p_rid, p_field, p_kind, p_op, p_expect, p_premises, p_gate, p_author, p_strength,
                      p_value, p_evidence, p_based_on, p_invocation, p_hist_expected, null::integer) w
$fn$;

drop function kslate_extend_expiry(bigint, integer, timestamptz);
drop function kslate_decide_claim(bigint, timestamptz, text, text, integer);
drop function kslate_decide_write(bigint, timestamptz, text, bigint, jsonb, text[], text);

do $citus$
begin
  if not exists (select 1 from pg_extension where extname = 'citus') then
    return;
  end if;
  perform create_distributed_function('kslate_history_txn_render()');
  perform create_distributed_function('kslate_decide_claim(text, bigint, timestamptz, text, text, integer)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_extend_expiry(text, bigint, integer, timestamptz)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_write(text, text, text, text, text, bigint, jsonb, text[], text, text, text, text, text, text, bigint, integer)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_transact(text, text, uuid, text, text, jsonb, text[], text[], text[], text[], text[], integer[], text[], integer, text)', 'p_rid', colocate_with => 'records');
end
$citus$;
`;
