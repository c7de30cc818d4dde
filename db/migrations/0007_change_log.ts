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
 * - `tx xid8`: the log position's first part. Added without a default first (instant, no
 *   table rewrite), then `pg_current_xact_id()` as the default for new rows (rejections take
 *   it); rows written before this migration keep a null `tx` and are not part of the class
 *   log (history still shows them).
 * - An applied row's `tx` is the record's `log_tx`: the greatest of the writing
 *   transaction's id and the record's previous `log_tx`, kept on the record row every applied
 *   write already updates under the row lock. Transaction ids are taken before the lock
 *   wait, so a writer that waited for a record's lock can hold a SMALLER id than the one it
 *   waited for; ordered by its own id, record_version 36 came before 35 in a class stream
 *   (the two-process test saw it). With the greatest, a record's rows follow its
 *   record_version, and a row's `tx` is still at least its own transaction's id, so the read
 *   rule below stays sound. kslate_try_write and kslate_claim are replaced here to write it
 *   (their bodies otherwise as in 0005 and 0006); PgWriteTx.applyField does the same.
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
alter table records add column log_tx xid8;
alter table history add column tx xid8;
alter table history alter column tx set default pg_current_xact_id();
create index history_log on history (class, tx, id) where outcome = 'applied';
create index history_created_brin on history using brin (created_at);

create or replace function kslate_try_write(
  p_class text, p_rid text, p_field text, p_kind text, p_expect bigint, p_premises jsonb,
  p_author text, p_strength text, p_value text, p_evidence text, p_based_on text, p_invocation text,
  p_op text, p_hist_expected bigint)
returns table (applied boolean, version bigint, record_version bigint, created boolean)
language plpgsql volatile as $fn$
declare
  r_id bigint;
  r_version bigint;
  r_tx xid8;
  cur bigint;
  nv bigint;
  was_new boolean := false;
  keeps boolean := p_kind in ('versioned', 'soft');
  vbytes bigint := coalesce(octet_length(p_value), 0);
  mbytes bigint := coalesce(octet_length(p_evidence), 0) + coalesce(octet_length(p_based_on), 0) + coalesce(octet_length(p_invocation), 0);
begin
  select r.id, r.record_version into r_id, r_version
    from records r where r.class = p_class and r.rid = p_rid for update;
  if not found then
    perform pg_advisory_xact_lock(hashtextextended(p_class || '/' || p_rid, 0));
    select r.id, r.record_version into r_id, r_version
      from records r where r.class = p_class and r.rid = p_rid for update;
  end if;

  select f.version into cur from fields f where f.record_id = r_id and f.name = p_field;
  cur := coalesce(cur, 0);
  if p_expect is not null and cur <> p_expect then
    return query select false, cur, r_version, false;
    return;
  end if;

  if p_premises is not null and jsonb_array_length(p_premises) > 0 and exists (
      select 1 from jsonb_to_recordset(p_premises) as q(field text, version bigint, kind text)
      left join fields f on f.record_id = r_id and f.name = q.field
      where coalesce(f.version, 0) <> q.version
         or (q.kind = 'fence' and not (f.owner is not distinct from p_author and f.lease_expires_at > now()))) then
    return query select false, cur, r_version, false;
    return;
  end if;

  nv := cur + 1;
  if r_id is null then
    insert into records (class, rid, record_version, log_tx) values (p_class, p_rid, 1, pg_current_xact_id())
      returning id, records.record_version, records.log_tx into r_id, r_version, r_tx;
    was_new := true;
  else
    update records set record_version = records.record_version + 1, last_write_at = now(),
                       log_tx = greatest(records.log_tx, pg_current_xact_id())
      where id = r_id returning records.record_version, records.log_tx into r_version, r_tx;
  end if;

  insert into fields (record_id, class, name, kind, value, version, record_version, author,
                      identity_strength, evidence, based_on, invocation, updated_at, owner, lease_expires_at, bytes)
  values (r_id, p_class, p_field, p_kind, case when keeps then p_value::json end, nv, r_version,
          p_author, p_strength, p_evidence, p_based_on::jsonb, p_invocation::json, now(), null, null,
          case when keeps then vbytes + mbytes else mbytes end)
  on conflict (record_id, name) do update set
    value = excluded.value, version = excluded.version, record_version = excluded.record_version,
    author = excluded.author, identity_strength = excluded.identity_strength,
    evidence = excluded.evidence, based_on = excluded.based_on, invocation = excluded.invocation,
    updated_at = excluded.updated_at, owner = excluded.owner, lease_expires_at = excluded.lease_expires_at,
    lease_lapsed = false, bytes = excluded.bytes;

  if p_kind = 'append' then
    insert into entries (record_id, field, seq, value, author, identity_strength, evidence, based_on, invocation, bytes)
    values (r_id, p_field, nv, p_value::json, p_author, p_strength, p_evidence, p_based_on::jsonb, p_invocation::json,
            vbytes + mbytes);
  end if;

  insert into history (class, rid, field, op, version, record_version, value, author, identity_strength,
                       evidence, expected_version, based_on, invocation, outcome, bytes, tx)
  values (p_class, p_rid, p_field, p_op, nv, r_version, p_value::json, p_author, p_strength, p_evidence,
          p_hist_expected, p_based_on::jsonb, p_invocation::json, 'applied', vbytes + mbytes, r_tx);

  return query select true, nv, r_version, was_new;
end
$fn$;

create or replace function kslate_claim(
  p_class text, p_rid text, p_field text, p_author text, p_strength text, p_lease_seconds integer, p_invocation text)
returns table (outcome text, version bigint, record_version bigint, created boolean, owner text,
               lease_expires_ms bigint, took_over_from text)
language plpgsql volatile as $fn$
declare
  r_id bigint;
  r_version bigint;
  r_tx xid8;
  cur_version bigint := 0;
  cur_owner text;
  cur_expires timestamptz;
  holder text;
  result text;
  previous text;
  nv bigint;
  expires timestamptz;
  was_new boolean := false;
  mbytes bigint := coalesce(octet_length(p_invocation), 0);
begin
  select r.id, r.record_version into r_id, r_version
    from records r where r.class = p_class and r.rid = p_rid for update;
  if not found then
    perform pg_advisory_xact_lock(hashtextextended(p_class || '/' || p_rid, 0));
    select r.id, r.record_version into r_id, r_version
      from records r where r.class = p_class and r.rid = p_rid for update;
  end if;

  if r_id is not null then
    select f.version, f.owner, f.lease_expires_at into cur_version, cur_owner, cur_expires
      from fields f where f.record_id = r_id and f.name = p_field;
    cur_version := coalesce(cur_version, 0);
  end if;
  holder := case when cur_owner is not null and cur_expires > now() then cur_owner end;

  if holder is not null and holder <> p_author then
    insert into history (class, rid, field, op, version, record_version, value, author, identity_strength,
                         evidence, expected_version, based_on, invocation, outcome, bytes)
    values (p_class, p_rid, p_field, 'claim', null, r_version, null, p_author, p_strength,
            null, null, null, p_invocation::json, 'held', mbytes);
    return query select 'held'::text, cur_version, r_version, false, holder,
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
  expires := case when p_lease_seconds = 0 then null else now() + make_interval(secs => p_lease_seconds) end;

  if r_id is null then
    insert into records (class, rid, record_version, log_tx) values (p_class, p_rid, 1, pg_current_xact_id())
      returning id, records.record_version, records.log_tx into r_id, r_version, r_tx;
    was_new := true;
  else
    update records set record_version = records.record_version + 1, last_write_at = now(),
                       log_tx = greatest(records.log_tx, pg_current_xact_id())
      where id = r_id returning records.record_version, records.log_tx into r_version, r_tx;
  end if;

  insert into fields (record_id, class, name, kind, value, version, record_version, author,
                      identity_strength, evidence, based_on, invocation, updated_at, owner, lease_expires_at, bytes)
  values (r_id, p_class, p_field, 'task', null, nv, r_version, p_author, p_strength, null, null,
          p_invocation::json, now(), case when expires is null then null else p_author end, expires, mbytes)
  on conflict (record_id, name) do update set
    value = excluded.value, version = excluded.version, record_version = excluded.record_version,
    author = excluded.author, identity_strength = excluded.identity_strength,
    evidence = excluded.evidence, based_on = excluded.based_on, invocation = excluded.invocation,
    updated_at = excluded.updated_at, owner = excluded.owner, lease_expires_at = excluded.lease_expires_at,
    lease_lapsed = false, bytes = excluded.bytes;

  insert into history (class, rid, field, op, version, record_version, value, author, identity_strength,
                       evidence, expected_version, based_on, invocation, outcome, bytes, tx)
  values (p_class, p_rid, p_field, case when result = 'renew' then 'claim' else result end, nv, r_version, null,
          p_author, p_strength, null, null, null, p_invocation::json, 'applied', mbytes, r_tx);

  return query select result, nv, r_version, was_new,
                      case when expires is null then null else p_author end,
                      floor(extract(epoch from expires) * 1000)::bigint, previous;
end
$fn$;
`;
