/**
 * Every write decided and applied by one SQL statement, each rule written once (issue 32).
 * Frozen in time: never edit an applied migration.
 *
 * Until this, a claim was decided and applied inside kslate_claim (0006) but a put or append
 * was not: kslate_try_write (0005) checked the version and the premises and declined, and the
 * gateway then decided the same STALE / STALE_PREMISE / fence rules again in TypeScript inside
 * a transaction and applied the write with a third text of the apply. Now the rules after the
 * lock live here, once, in small helpers every write function calls:
 *
 * - `kslate_lock(class, rid)`: the record lock preamble — the record's row lock or, when the
 *   record does not exist yet, a transaction advisory lock on its name (creators are
 *   serialised) — and `locked_at`, the database clock read AFTER the lock is held. Each later
 *   statement of a VOLATILE function takes a fresh snapshot (READ COMMITTED), so what the
 *   caller reads next is read under the lock.
 * - `kslate_lease_held(owner, expires, at)`: "a lease is held", the one text of that rule.
 *   Writers judge it at `locked_at`, never at now() (the start of the transaction): a lease
 *   that expires while a writer waits for the record's lock is not held when it decides.
 *   Reads judge it at now(); a SQL function, so it is inlined into their statements.
 * - `kslate_decide_write(...)`: the checks of a put or append under the lock, in the order of
 *   the specification — STALE (13), the resolve gate (INVALID_CHECKPOINT, between 13 and 14),
 *   STALE_PREMISE (14; a fence premise also needs the writer's lease held) — reading only. It
 *   returns the first rejection with what its error body needs (the field's current version
 *   and author; for STALE its value, evidence and time; the moved premises; the roles that
 *   have not checkpointed), or outcome null when every check holds.
 * - `kslate_apply(...)`: the one apply — the record version raised (the record created when
 *   new) with the change-log stamp `log_tx` (migration 0007), the field upserted, the entry of
 *   an append field, the applied history row.
 * - `kslate_add_history(...)`: the one insert of a history row, applied or refused.
 *
 * Write functions, each called as one autocommitted statement:
 * - `kslate_write(...)` (put and append): lock, decide, then either the rejection's history
 *   row (STALE and STALE_PREMISE keep the whole value; the resolve gate leaves none) or the
 *   apply. A rejection is returned, never raised: the caller gets the applied result or the
 *   rejection with everything its error body needs, in one round trip.
 * - `kslate_claim(...)`, replaced with the same signature and results: HELD judged by
 *   kslate_lease_held at `locked_at`; a new lease runs from `locked_at`.
 * - `kslate_save_checkpoint(...)`: a role's checkpoint on an existing record, under its lock.
 *
 * Built to be composed: a transaction of several writes on one record calls kslate_lock once,
 * then per write kslate_decide_write (which sees the earlier writes of the transaction) and
 * kslate_apply, passing the stamp the first apply returned to the later ones so that all share
 * one record version. A batch of writes across records calls a write function per element,
 * in record order; a rejection is a returned row and leaves the other writes untouched.
 * Helpers are called by assignment (`x := f(...)`), which PL/pgSQL evaluates as a simple
 * expression, not as a query (PERFORM plans and runs a SELECT: several times the cost).
 *
 * kslate_try_write (0005, 0007) and kslate_lock_record (0002) are no longer called; they stay
 * for one release, so that a gateway of the previous release still writes during a rolling
 * upgrade.
 */
export const version = 10;
export const name = 'write_functions';

export const up = /* sql */ `
create function kslate_lease_held(p_owner text, p_expires timestamptz, p_at timestamptz) returns boolean
language sql immutable parallel safe as $fn$
  select coalesce(p_owner is not null and p_expires > p_at, false)
$fn$;

create function kslate_lock(p_class text, p_rid text, out rec_id bigint, out rec_version bigint, out locked_at timestamptz)
language plpgsql volatile as $fn$
begin
  select r.id, r.record_version into rec_id, rec_version
    from records r where r.class = p_class and r.rid = p_rid for update;
  if not found then
    perform pg_advisory_xact_lock(hashtextextended(p_class || '/' || p_rid, 0));
    select r.id, r.record_version into rec_id, rec_version
      from records r where r.class = p_class and r.rid = p_rid for update;
  end if;
  locked_at := clock_timestamp();
end
$fn$;

create function kslate_add_history(
  p_class text, p_rid text, p_field text, p_op text, p_outcome text, p_version bigint, p_record_version bigint,
  p_value text, p_value_size integer, p_value_sha256 text, p_author text, p_strength text, p_evidence text,
  p_expected bigint, p_based_on text, p_invocation text, p_tx xid8)
returns bigint
language plpgsql volatile as $fn$
declare
  seq bigint;
begin
  -- bytes as in migration 0003 (the texts the row stores); a rejection's tx is its own.
  insert into history as h (class, rid, field, op, version, record_version, value, value_size, value_sha256, author,
                            identity_strength, evidence, expected_version, based_on, invocation, outcome, bytes, tx)
  values (p_class, p_rid, p_field, p_op, p_version, p_record_version, p_value::json, p_value_size, p_value_sha256,
          p_author, p_strength, p_evidence, p_expected, p_based_on::jsonb, p_invocation::json, p_outcome,
          coalesce(octet_length(p_value), 0) + coalesce(octet_length(p_evidence), 0)
            + coalesce(octet_length(p_based_on), 0) + coalesce(octet_length(p_invocation), 0),
          coalesce(p_tx, pg_current_xact_id()))
  returning h.id into seq;
  return seq;
end
$fn$;

create function kslate_apply(
  p_class text, p_rid text, p_rec_id bigint, p_stamp_version bigint, p_stamp_tx xid8,
  p_field text, p_kind text, p_op text, p_version bigint, p_value text, p_author text, p_strength text,
  p_evidence text, p_based_on text, p_invocation text, p_owner text, p_expires timestamptz, p_expected bigint,
  out rec_id bigint, out record_version bigint, out log_tx xid8, out created boolean)
language plpgsql volatile as $fn$
declare
  -- Only versioned and soft fields keep their value on the field row; an append field's value
  -- is its new entry, a task field's state is its lease. Sizes as in migration 0003.
  keeps boolean := p_kind in ('versioned', 'soft');
  vbytes bigint := coalesce(octet_length(p_value), 0);
  mbytes bigint := coalesce(octet_length(p_evidence), 0) + coalesce(octet_length(p_based_on), 0) + coalesce(octet_length(p_invocation), 0);
  seq bigint;
begin
  -- The record version and the change-log stamp, once per transaction: p_stamp_version null
  -- raises the version (creating the record when p_rec_id is null); a later write of the same
  -- transaction passes the stamp the first one returned and shares its record version.
  created := false;
  if p_stamp_version is not null then
    rec_id := p_rec_id;
    record_version := p_stamp_version;
    log_tx := p_stamp_tx;
  elsif p_rec_id is null then
    insert into records as r (class, rid, record_version, log_tx) values (p_class, p_rid, 1, pg_current_xact_id())
      returning r.id, r.record_version, r.log_tx into rec_id, record_version, log_tx;
    created := true;
  else
    update records r set record_version = r.record_version + 1, last_write_at = now(),
                         log_tx = greatest(r.log_tx, pg_current_xact_id())
      where r.id = p_rec_id returning r.id, r.record_version, r.log_tx into rec_id, record_version, log_tx;
  end if;

  insert into fields as f (record_id, class, name, kind, value, version, record_version, author,
                           identity_strength, evidence, based_on, invocation, updated_at, owner, lease_expires_at, bytes)
  values (rec_id, p_class, p_field, p_kind, case when keeps then p_value::json end, p_version, record_version,
          p_author, p_strength, p_evidence, p_based_on::jsonb, p_invocation::json, now(), p_owner, p_expires,
          case when keeps then vbytes + mbytes else mbytes end)
  on conflict (record_id, name) do update set
    value = excluded.value, version = excluded.version, record_version = excluded.record_version,
    author = excluded.author, identity_strength = excluded.identity_strength,
    evidence = excluded.evidence, based_on = excluded.based_on, invocation = excluded.invocation,
    updated_at = excluded.updated_at, owner = excluded.owner, lease_expires_at = excluded.lease_expires_at,
    lease_lapsed = false, bytes = excluded.bytes;

  if p_kind = 'append' then
    insert into entries (record_id, field, seq, value, author, identity_strength, evidence, based_on, invocation, bytes)
    values (rec_id, p_field, p_version, p_value::json, p_author, p_strength, p_evidence, p_based_on::jsonb,
            p_invocation::json, vbytes + mbytes);
  end if;

  -- The applied row's log position is the record's (migration 0007).
  seq := kslate_add_history(p_class, p_rid, p_field, p_op, 'applied', p_version, record_version, p_value, null, null,
                            p_author, p_strength, p_evidence, p_expected, p_based_on, p_invocation, log_tx);
end
$fn$;

create function kslate_decide_write(
  p_rec_id bigint, p_at timestamptz, p_field text, p_expect bigint, p_premises jsonb, p_gate text[], p_author text,
  out outcome text, out cur_version bigint, out cur_author text, out cur_value json, out cur_evidence text,
  out cur_updated_at timestamptz, out moved json, out missing text[])
language plpgsql volatile as $fn$
begin
  select f.version, f.author into cur_version, cur_author
    from fields f where f.record_id = p_rec_id and f.name = p_field;
  cur_version := coalesce(cur_version, 0);

  -- 13 STALE: a versioned put names the version it read.
  if p_expect is not null and cur_version <> p_expect then
    outcome := 'stale';
    select f.value, f.evidence, f.updated_at into cur_value, cur_evidence, cur_updated_at
      from fields f where f.record_id = p_rec_id and f.name = p_field;
    return;
  end if;

  -- The resolve gate, between STALE and STALE_PREMISE: the roles (in the order given) that
  -- have not saved a checkpoint on the record.
  if p_gate is not null then
    missing := array(
      select g.role from unnest(p_gate) with ordinality as g(role, ord)
      where not exists (select 1 from checkpoints c where c.record_id = p_rec_id and c.role = g.role)
      order by g.ord);
    if cardinality(missing) > 0 then
      outcome := 'invalid_checkpoint';
      return;
    end if;
    missing := null;
  end if;

  -- 14 STALE_PREMISE: premises whose field moved, in the order sent, each as
  -- [field, your_version, current_version, current_author, current_evidence]; a fence premise
  -- also needs the writer to hold the task's lease when the lock was taken.
  if p_premises is not null and jsonb_array_length(p_premises) > 0 then
    select json_agg(json_build_array(q.p->>'field', (q.p->>'version')::bigint, coalesce(f.version, 0), f.author, f.evidence)
                    order by q.ord)
      into moved
      from jsonb_array_elements(p_premises) with ordinality as q(p, ord)
      left join fields f on f.record_id = p_rec_id and f.name = q.p->>'field'
      where coalesce(f.version, 0) <> (q.p->>'version')::bigint
         or (q.p->>'kind' = 'fence'
             and not (f.owner is not distinct from p_author and kslate_lease_held(f.owner, f.lease_expires_at, p_at)));
    if moved is not null then
      outcome := 'stale_premise';
      return;
    end if;
  end if;
end
$fn$;

create function kslate_write(
  p_class text, p_rid text, p_field text, p_kind text, p_op text, p_expect bigint, p_premises jsonb, p_gate text[],
  p_author text, p_strength text, p_value text, p_evidence text, p_based_on text, p_invocation text, p_hist_expected bigint)
returns table (outcome text, version bigint, record_version bigint, created boolean, cur_author text, cur_value json,
               cur_evidence text, cur_updated_ms bigint, moved json, missing text[])
language plpgsql volatile as $fn$
declare
  lk record;
  d record;
  a record;
  seq bigint;
begin
  lk := kslate_lock(p_class, p_rid);
  d := kslate_decide_write(lk.rec_id, lk.locked_at, p_field, p_expect, p_premises, p_gate, p_author);
  if d.outcome is not null then
    -- The rejection and its history row are one transaction (the resolve gate leaves none).
    if d.outcome <> 'invalid_checkpoint' then
      seq := kslate_add_history(p_class, p_rid, p_field, p_op, d.outcome, null, lk.rec_version, p_value, null, null,
                                p_author, p_strength, p_evidence, p_hist_expected, p_based_on, p_invocation, null);
    end if;
    return query select d.outcome, d.cur_version, lk.rec_version, false, d.cur_author, d.cur_value, d.cur_evidence,
                        floor(extract(epoch from d.cur_updated_at) * 1000)::bigint, d.moved, d.missing;
    return;
  end if;
  a := kslate_apply(p_class, p_rid, lk.rec_id, null, null, p_field, p_kind, p_op, d.cur_version + 1, p_value, p_author,
                    p_strength, p_evidence, p_based_on, p_invocation, null, null, p_hist_expected);
  return query select 'applied'::text, d.cur_version + 1, a.record_version, a.created, null::text, null::json,
                      null::text, null::bigint, null::json, null::text[];
end
$fn$;

create or replace function kslate_claim(
  p_class text, p_rid text, p_field text, p_author text, p_strength text, p_lease_seconds integer, p_invocation text)
returns table (outcome text, version bigint, record_version bigint, created boolean, owner text,
               lease_expires_ms bigint, took_over_from text)
language plpgsql volatile as $fn$
declare
  lk record;
  a record;
  seq bigint;
  cur_version bigint := 0;
  cur_owner text;
  cur_expires timestamptz;
  holder text;
  result text;
  previous text;
  nv bigint;
  expires timestamptz;
begin
  lk := kslate_lock(p_class, p_rid);
  if lk.rec_id is not null then
    select f.version, f.owner, f.lease_expires_at into cur_version, cur_owner, cur_expires
      from fields f where f.record_id = lk.rec_id and f.name = p_field;
    cur_version := coalesce(cur_version, 0);
  end if;
  holder := case when kslate_lease_held(cur_owner, cur_expires, lk.locked_at) then cur_owner end;

  -- 11 HELD: another identity held the lease when the lock was taken.
  if holder is not null and holder <> p_author then
    seq := kslate_add_history(p_class, p_rid, p_field, 'claim', 'held', null, lk.rec_version, null, null, null,
                              p_author, p_strength, null, null, null, p_invocation, null);
    return query select 'held'::text, cur_version, lk.rec_version, false, holder,
                        floor(extract(epoch from cur_expires) * 1000)::bigint, null::text;
    return;
  end if;

  if p_lease_seconds = 0 then
    result := 'release';
  elsif holder = p_author then
    result := 'renew';
  elsif cur_owner is not null and cur_owner <> p_author then
    result := 'takeover';
    previous := cur_owner;
  else
    result := 'claim';
  end if;
  nv := cur_version + 1;
  expires := case when p_lease_seconds = 0 then null else lk.locked_at + make_interval(secs => p_lease_seconds) end;

  a := kslate_apply(p_class, p_rid, lk.rec_id, null, null, p_field, 'task',
                    case when result = 'renew' then 'claim' else result end, nv, null, p_author, p_strength,
                    null, null, p_invocation, case when expires is null then null else p_author end, expires, null);

  return query select result, nv, a.record_version, a.created,
                      case when expires is null then null else p_author end,
                      floor(extract(epoch from expires) * 1000)::bigint, previous;
end
$fn$;

create function kslate_save_checkpoint(p_class text, p_rid text, p_role text, p_document text, p_author text)
returns table (checkpoint_id bigint, record_version bigint)
language plpgsql volatile as $fn$
declare
  lk record;
  cid bigint;
begin
  lk := kslate_lock(p_class, p_rid);
  if lk.rec_id is null then
    return;
  end if;
  -- A checkpoint does not raise the record version; it records the one it was saved at.
  insert into checkpoints as c (record_id, role, checkpoint_id, document, record_version, author, saved_at)
  values (lk.rec_id, p_role, 1, p_document::json, lk.rec_version, p_author, now())
  on conflict (record_id, role) do update set
    checkpoint_id = c.checkpoint_id + 1, document = excluded.document,
    record_version = excluded.record_version, author = excluded.author, saved_at = excluded.saved_at
  returning c.checkpoint_id into cid;
  return query select cid, lk.rec_version;
end
$fn$;
`;
