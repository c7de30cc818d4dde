/**
 * Transactions on one record (issue 33 item 2): several puts, appends and claims decided and
 * applied all or nothing, with one record version, by one SQL statement. Frozen in time:
 * never edit an applied migration.
 *
 * - `kslate_decide_claim(...)`: the claim's rule under the lock (HELD judged by
 *   kslate_lease_held at `locked_at`; which of claim / renew / takeover / release it is; the new
 *   lease from `locked_at`), taken out of kslate_claim (0010) so that a claim alone and a claim
 *   inside a transaction decide with one text. kslate_claim is replaced (same signature and
 *   results) to call it.
 * - `kslate_transact(...)`: lock the record once (kslate_lock), then per write in index order
 *   decide (kslate_decide_write, kslate_decide_claim: each sees the state the earlier writes of
 *   the transaction left, since those were applied by earlier statements of this function) and
 *   apply (kslate_apply; the first apply raises the record version, the later ones pass its
 *   stamp and share it). The writes run in a block: the first rejection raises inside it, which
 *   rolls back every write already applied, and the handler then writes the attempt's history
 *   rows. `p_stop` is the index of a write the gateway already refused before the lock (scope,
 *   identity strength, evidence, a malformed write…): the writes before it are still decided,
 *   so the first rejection in index order is the answer.
 * - History rows of a transaction carry `txn` (the transaction's id) and `txn_index` (the
 *   write's index); on a rejection the failing write's row has its own outcome and every other
 *   write's row has outcome `not_applied` with `txn_failed`, the index of the write that failed.
 *   The rows are written by kslate_apply / kslate_add_history unchanged: the three columns take
 *   their values from transaction-local settings (`kslate.txn`, `kslate.txn_index`,
 *   `kslate.txn_failed`) that only kslate_transact sets, so every other writer leaves them null.
 *   A rejection that alone leaves no history row (the resolve gate, a malformed or unknown
 *   field: p_stop_outcome null) leaves none for the whole transaction either.
 * - A second render trigger (`history_txn_render`, after 0008's `history_render`) adds
 *   `"transaction":{"id":…,"index":…[,"failed_index":…]}` just before `outcome`, so a stored
 *   row still ends with `outcome`, `based_on`, `created_at` (handlers/history.ts reads it from
 *   the end), and the rendering of the other keys stays one text (0008, 0014).
 */
export const version = 12;
export const name = 'transactions';

export const up = /* sql */ `
alter table history add column txn uuid default nullif(current_setting('kslate.txn', true), '')::uuid,
                    add column txn_index smallint default nullif(current_setting('kslate.txn_index', true), '')::smallint,
                    add column txn_failed smallint default nullif(current_setting('kslate.txn_failed', true), '')::smallint;

-- The transaction of a row, in its rendered text (migration 0008), just before "outcome": a
-- second BEFORE INSERT trigger, after history_render (triggers fire in name order), so the
-- rendering itself stays one text whoever replaces it. The last ',"outcome":"' of a rendered
-- row is its own key: no JSON string holds an unescaped quote, and the premises after it have
-- no such key.
create function kslate_history_txn_render() returns trigger
language plpgsql as $fn$
declare
  at integer;
begin
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

create trigger history_txn_render before insert on history
  for each row when (new.txn is not null) execute function kslate_history_txn_render();
alter table history enable always trigger history_txn_render;

create function kslate_decide_claim(
  p_rec_id bigint, p_at timestamptz, p_field text, p_author text, p_lease_seconds integer,
  out outcome text, out cur_version bigint, out holder text, out cur_expires timestamptz,
  out previous text, out expires timestamptz)
language plpgsql volatile as $fn$
declare
  cur_owner text;
begin
  select f.version, f.owner, f.lease_expires_at into cur_version, cur_owner, cur_expires
    from fields f where f.record_id = p_rec_id and f.name = p_field;
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
  c := kslate_decide_claim(lk.rec_id, lk.locked_at, p_field, p_author, p_lease_seconds);
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

-- p_writes: one JSON object per write, in index order: {op, field, kind, expect, premises, gate,
-- hist_expected, lease}; the texts stored as sent (JSON values kept byte for byte, as a single
-- write keeps them) come in arrays of the same length: p_values (the value or entry),
-- p_evidence, p_based_on, p_invocation, and the value a refused or not-applied row keeps
-- (p_kept: the value up to 64 KiB, else null with p_kept_size and p_kept_sha).
create function kslate_transact(
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
        c := kslate_decide_claim(rid_id, lk.locked_at, w->>'field', p_author, (w->>'lease')::integer);
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
        d := kslate_decide_write(rid_id, lk.locked_at, w->>'field', (w->>'expect')::bigint,
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
`;
