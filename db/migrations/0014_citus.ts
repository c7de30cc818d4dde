/**
 * Records distributed by record on Citus (issue 35, docs/scale-out.md). Frozen in time: never
 * edit an applied migration.
 *
 * Every kslate operation touches one record, so on Citus every per-record table is sharded
 * by the record's id `rid` and co-located with `records`: a record's row, fields, entries,
 * checkpoints, history, read-set rows and expiry-queue row live in shards of the same node,
 * and each write function runs there whole, delegated by the coordinator in one hop.
 *
 * In both modes (one schema, one text of every write function):
 * - `rid` on `fields`, `entries` and `checkpoints` (the tables keyed by record id alone),
 *   filled from `records` (an entry of a record already expired, from its queue row; an entry
 *   neither names is unreachable — record ids are never reused — and is deleted), then NOT
 *   NULL. On plain PostgreSQL this is the in-place upgrade: one pass over each of the three
 *   tables inside the migration's transaction.
 * - A row inserted without `rid` on plain PostgreSQL gets its record's from a trigger that
 *   fires only then (`when (new.rid is null)`).
 * - Every statement of a write function names the record's `rid`, so on Citus it reaches the
 *   record's shard only (a statement on a shard may not fan out); on plain PostgreSQL the extra
 *   equality is checked on the row the primary key found.
 * - The history row's rendering (migration 0008) takes columns, not a whole `history` row: a
 *   shard's row is of the shard's own type. `kslate_history_text(history)` stays, the same
 *   text, for readers of a previous release.
 * - Upserts name their constraint (`on conflict on constraint fields_pkey`), whose columns
 *   differ by mode (Citus needs the distribution column in every unique constraint).
 * - kslate_try_write (0005) and kslate_lock_record (0002), unused since 0010, are dropped:
 *   they write fields without `rid`.
 *
 * Only when the `citus` extension is in the database (`--database-mode citus` creates it
 * first; its absence then is an error):
 * - primary keys and foreign keys lead with `rid`;
 * - `records` distributed by `rid`, the other per-record tables co-located with it;
 *   `kslate_meta`, `classes`, `sweep_lease`, `console_sessions`, `scope_owners` reference
 *   tables (small; read everywhere, or from any node);
 * - `kslate_write`, `kslate_claim`, `kslate_save_checkpoint` distributed by their `p_rid`
 *   argument, co-located with `records` (delegated in one hop); the helpers they call
 *   distributed too, so every node has them.
 * - `citus.enable_unsafe_triggers` for the history render trigger: it reads only the row it
 *   fills, which is what makes a trigger on a shard safe.
 */
export const version = 14;
export const name = 'citus';

export const up = /* sql */ `
drop function if exists kslate_try_write(text, text, text, text, bigint, jsonb, text, text, text, text, text, text, text, bigint);
drop function if exists kslate_lock_record(text, text, text[]);

alter table fields add column rid text;
alter table entries add column rid text;
alter table checkpoints add column rid text;
update fields f set rid = r.rid from records r where r.id = f.record_id;
update checkpoints c set rid = r.rid from records r where r.id = c.record_id;
update entries e set rid = r.rid from records r where r.id = e.record_id;
update entries e set rid = x.rid from expired_records x where x.record_id = e.record_id and e.rid is null;
delete from entries where rid is null;
alter table fields alter column rid set not null;
alter table entries alter column rid set not null;
alter table checkpoints alter column rid set not null;

-- On plain PostgreSQL a writer that does not name rid (a bulk load, a tool of the previous
-- release) gets its record's: the WHEN is checked before any function call, so the write
-- functions, which always name it, pay nothing. On Citus rid is the distribution column and
-- must be named (the triggers are dropped there).
create function kslate_fill_rid() returns trigger
language plpgsql as $fn$
begin
  select r.rid into new.rid from records r where r.id = new.record_id;
  if new.rid is null then
    select x.rid into new.rid from expired_records x where x.record_id = new.record_id;
  end if;
  return new;
end
$fn$;
create trigger fields_fill_rid before insert on fields for each row when (new.rid is null) execute function kslate_fill_rid();
create trigger entries_fill_rid before insert on entries for each row when (new.rid is null) execute function kslate_fill_rid();
create trigger checkpoints_fill_rid before insert on checkpoints for each row when (new.rid is null) execute function kslate_fill_rid();

-- The one rendering of a history row (migration 0008), from its columns.
create function kslate_history_render_row(
  p_id bigint, p_field text, p_op text, p_version bigint, p_record_version bigint, p_value json, p_value_size integer,
  p_value_sha256 text, p_author text, p_strength text, p_evidence text, p_expected bigint, p_invocation json,
  p_outcome text, p_based_on jsonb, p_created_at timestamptz) returns text
language sql stable parallel safe as $fn$
  select '{"seq":' || p_id
    || ',"field":' || to_json(p_field)::text
    || ',"op":' || to_json(p_op)::text
    || coalesce(',"version":' || p_version, '')
    || coalesce(',"record_version":' || p_record_version, '')
    || case
         when p_value_sha256 is not null
           then coalesce(',"value_size":' || p_value_size, '') || ',"value_sha256":' || to_json(p_value_sha256)::text
         when p_value is not null and json_typeof(p_value) <> 'null' then ',"value":' || p_value::text
         else '' end
    || ',"author":' || to_json(p_author)::text
    || coalesce(',"identity_strength":' || to_json(p_strength)::text, '')
    || coalesce(',"evidence":' || to_json(p_evidence)::text, '')
    || coalesce(',"expected_version":' || p_expected, '')
    || case when p_invocation is not null and json_typeof(p_invocation) <> 'null'
         then ',"invocation":' || p_invocation::text else '' end
    || ',"outcome":' || to_json(p_outcome)::text
    || case when p_based_on is not null and jsonb_typeof(p_based_on) <> 'null'
         then ',"based_on":' || p_based_on::text else '' end
    || ',"created_at":"'
    || to_char((p_created_at + interval '500 microseconds') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS')
    || '+00:00"}'
$fn$;

create or replace function kslate_history_text(h history) returns text
language sql stable parallel safe as $fn$
  select kslate_history_render_row(h.id, h.field, h.op, h.version, h.record_version, h.value, h.value_size,
    h.value_sha256, h.author, h.identity_strength, h.evidence, h.expected_version, h.invocation, h.outcome,
    h.based_on, h.created_at)
$fn$;

create or replace function kslate_history_render() returns trigger
language plpgsql as $fn$
begin
  new.rendered := kslate_history_render_row(new.id, new.field, new.op, new.version, new.record_version, new.value,
    new.value_size, new.value_sha256, new.author, new.identity_strength, new.evidence, new.expected_version,
    new.invocation, new.outcome, new.based_on, new.created_at);
  return new;
end
$fn$;

-- The apply of migration 0010, every statement naming the record's rid.
create or replace function kslate_apply(
  p_class text, p_rid text, p_rec_id bigint, p_stamp_version bigint, p_stamp_tx xid8,
  p_field text, p_kind text, p_op text, p_version bigint, p_value text, p_author text, p_strength text,
  p_evidence text, p_based_on text, p_invocation text, p_owner text, p_expires timestamptz, p_expected bigint,
  out rec_id bigint, out record_version bigint, out log_tx xid8, out created boolean)
language plpgsql volatile as $fn$
declare
  keeps boolean := p_kind in ('versioned', 'soft');
  vbytes bigint := coalesce(octet_length(p_value), 0);
  mbytes bigint := coalesce(octet_length(p_evidence), 0) + coalesce(octet_length(p_based_on), 0) + coalesce(octet_length(p_invocation), 0);
  seq bigint;
begin
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
      where r.rid = p_rid and r.id = p_rec_id returning r.id, r.record_version, r.log_tx into rec_id, record_version, log_tx;
  end if;

  insert into fields as f (rid, record_id, class, name, kind, value, version, record_version, author,
                           identity_strength, evidence, based_on, invocation, updated_at, owner, lease_expires_at, bytes)
  values (p_rid, rec_id, p_class, p_field, p_kind, case when keeps then p_value::json end, p_version, record_version,
          p_author, p_strength, p_evidence, p_based_on::jsonb, p_invocation::json, now(), p_owner, p_expires,
          case when keeps then vbytes + mbytes else mbytes end)
  on conflict on constraint fields_pkey do update set
    value = excluded.value, version = excluded.version, record_version = excluded.record_version,
    author = excluded.author, identity_strength = excluded.identity_strength,
    evidence = excluded.evidence, based_on = excluded.based_on, invocation = excluded.invocation,
    updated_at = excluded.updated_at, owner = excluded.owner, lease_expires_at = excluded.lease_expires_at,
    lease_lapsed = false, bytes = excluded.bytes;

  if p_kind = 'append' then
    insert into entries (rid, record_id, field, seq, value, author, identity_strength, evidence, based_on, invocation, bytes)
    values (p_rid, rec_id, p_field, p_version, p_value::json, p_author, p_strength, p_evidence, p_based_on::jsonb,
            p_invocation::json, vbytes + mbytes);
  end if;

  seq := kslate_add_history(p_class, p_rid, p_field, p_op, 'applied', p_version, record_version, p_value, null, null,
                            p_author, p_strength, p_evidence, p_expected, p_based_on, p_invocation, log_tx);
end
$fn$;

-- The checks of migration 0010, reading the record's rows by its rid (a new argument, first).
create function kslate_decide_write(
  p_rid text, p_rec_id bigint, p_at timestamptz, p_field text, p_expect bigint, p_premises jsonb, p_gate text[], p_author text,
  out outcome text, out cur_version bigint, out cur_author text, out cur_value json, out cur_evidence text,
  out cur_updated_at timestamptz, out moved json, out missing text[])
language plpgsql volatile as $fn$
begin
  select f.version, f.author into cur_version, cur_author
    from fields f where f.rid = p_rid and f.record_id = p_rec_id and f.name = p_field;
  cur_version := coalesce(cur_version, 0);

  if p_expect is not null and cur_version <> p_expect then
    outcome := 'stale';
    select f.value, f.evidence, f.updated_at into cur_value, cur_evidence, cur_updated_at
      from fields f where f.rid = p_rid and f.record_id = p_rec_id and f.name = p_field;
    return;
  end if;

  if p_gate is not null then
    missing := array(
      select g.role from unnest(p_gate) with ordinality as g(role, ord)
      where not exists (select 1 from checkpoints c where c.rid = p_rid and c.record_id = p_rec_id and c.role = g.role)
      order by g.ord);
    if cardinality(missing) > 0 then
      outcome := 'invalid_checkpoint';
      return;
    end if;
    missing := null;
  end if;

  if p_premises is not null and jsonb_array_length(p_premises) > 0 then
    select json_agg(json_build_array(q.p->>'field', (q.p->>'version')::bigint, coalesce(f.version, 0), f.author, f.evidence)
                    order by q.ord)
      into moved
      from jsonb_array_elements(p_premises) with ordinality as q(p, ord)
      left join fields f on f.rid = p_rid and f.record_id = p_rec_id and f.name = q.p->>'field'
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

-- The 0010 kslate_decide_write(p_rec_id, ...) stays as it was, for a transaction composed by a
-- caller of the previous release on plain PostgreSQL (it reads by record id alone).

create or replace function kslate_write(
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
  d := kslate_decide_write(p_rid, lk.rec_id, lk.locked_at, p_field, p_expect, p_premises, p_gate, p_author);
  if d.outcome is not null then
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
      from fields f where f.rid = p_rid and f.record_id = lk.rec_id and f.name = p_field;
    cur_version := coalesce(cur_version, 0);
  end if;
  holder := case when kslate_lease_held(cur_owner, cur_expires, lk.locked_at) then cur_owner end;

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

create or replace function kslate_save_checkpoint(p_class text, p_rid text, p_role text, p_document text, p_author text)
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
  insert into checkpoints as c (rid, record_id, role, checkpoint_id, document, record_version, author, saved_at)
  values (p_rid, lk.rec_id, p_role, 1, p_document::json, lk.rec_version, p_author, now())
  on conflict on constraint checkpoints_pkey do update set
    checkpoint_id = c.checkpoint_id + 1, document = excluded.document,
    record_version = excluded.record_version, author = excluded.author, saved_at = excluded.saved_at
  returning c.checkpoint_id into cid;
  return query select cid, lk.rec_version;
end
$fn$;

do $citus$
begin
  if not exists (select 1 from pg_extension where extname = 'citus') then
    return;
  end if;
  perform set_config('citus.enable_unsafe_triggers', 'on', true);
  drop trigger fields_fill_rid on fields;
  drop trigger entries_fill_rid on entries;
  drop trigger checkpoints_fill_rid on checkpoints;

  -- Unique constraints and foreign keys lead with the distribution column.
  alter table fields drop constraint fields_record_id_fkey;
  alter table checkpoints drop constraint checkpoints_record_id_fkey;
  alter table records drop constraint records_pkey;
  alter table records add constraint records_pkey primary key (rid, id);
  alter table fields drop constraint fields_pkey;
  alter table fields add constraint fields_pkey primary key (rid, record_id, name);
  alter table entries drop constraint entries_pkey;
  alter table entries add constraint entries_pkey primary key (rid, record_id, field, seq);
  alter table checkpoints drop constraint checkpoints_pkey;
  alter table checkpoints add constraint checkpoints_pkey primary key (rid, record_id, role);
  alter table history drop constraint history_pkey;
  alter table history add constraint history_pkey primary key (rid, id);
  alter table expired_records drop constraint expired_records_pkey;
  alter table expired_records add constraint expired_records_pkey primary key (rid, record_id);
  alter table fields add constraint fields_record_fkey foreign key (rid, record_id) references records (rid, id) on delete cascade;
  alter table checkpoints add constraint checkpoints_record_fkey foreign key (rid, record_id) references records (rid, id) on delete cascade;

  perform create_reference_table('kslate_meta');
  perform create_reference_table('classes');
  perform create_reference_table('sweep_lease');
  perform create_reference_table('console_sessions');
  perform create_reference_table('scope_owners');

  perform create_distributed_table('records', 'rid');
  perform create_distributed_table('fields', 'rid', colocate_with => 'records');
  perform create_distributed_table('entries', 'rid', colocate_with => 'records');
  perform create_distributed_table('checkpoints', 'rid', colocate_with => 'records');
  perform create_distributed_table('history', 'rid', colocate_with => 'records');
  perform create_distributed_table('expired_records', 'rid', colocate_with => 'records');
  perform create_distributed_table('read_sets', 'rid', colocate_with => 'records');

  -- Helpers on every node; the write functions delegated by their record.
  perform create_distributed_function('kslate_lease_held(text, timestamptz, timestamptz)');
  perform create_distributed_function('kslate_history_render_row(bigint, text, text, bigint, bigint, json, integer, text, text, text, text, bigint, json, text, jsonb, timestamptz)');
  perform create_distributed_function('kslate_history_render()');
  perform create_distributed_function('kslate_lock(text, text)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_add_history(text, text, text, text, text, bigint, bigint, text, integer, text, text, text, text, bigint, text, text, xid8)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_apply(text, text, bigint, bigint, xid8, text, text, text, bigint, text, text, text, text, text, text, text, timestamptz, bigint)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_decide_write(text, bigint, timestamptz, text, bigint, jsonb, text[], text)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_write(text, text, text, text, text, bigint, jsonb, text[], text, text, text, text, text, text, bigint)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_claim(text, text, text, text, text, integer, text)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_save_checkpoint(text, text, text, text, text)', 'p_rid', colocate_with => 'records');
end
$citus$;
`;
