/**
 * A keyed write in one statement (issue 33's Idempotency-Key, issue 35 on Citus;
 * docs/decisions.md "A keyed write is one statement"). Frozen in time: never edit an applied
 * migration.
 *
 * Until now a write sent with an Idempotency-Key ran in a transaction the gateway held open
 * over five round trips (take the key, read its answer, write, store the rendered answer,
 * commit); on Citus that transaction block ran the write function on the coordinator instead
 * of delegating it to the record's node. Here each write function has a keyed variant that
 * does all of it in one call, on the record's node:
 *
 * - `kslate_idempotency_begin`: the key's transaction-scoped advisory lock without waiting
 *   (`in_use`; the lock of migration 0011, so a gateway of the previous release and this one
 *   exclude each other on a key), then its live row: `fresh`, `replay` (same digest) or
 *   `reused` (another digest).
 * - `kslate_write_keyed`, `kslate_claim_keyed`, `kslate_save_checkpoint_keyed`,
 *   `kslate_transact_keyed`: the write function's arguments plus (key, digest, ttl). Fresh:
 *   the write function runs and its result rows (json: the rows as the write function
 *   returns them; a transaction's with its transaction id) are stored under the key in the
 *   same statement. Otherwise the state, and a replay's stored answer. The gateway renders the
 *   answer from the result rows, the first time and on every replay alike.
 * - `kslate_idempotency_answer`: the answer to a keyed write refused before the write
 *   function (a 4xx the gateway decided), stored rendered (`status`, `body`), with the
 *   refusal's history row when it leaves one (scope, identity strength, evidence), in one
 *   statement: the rejection's history row and its key commit or vanish together.
 * - `idempotency_keys`: `rid` (the record the key wrote; null on rows stored before this
 *   migration), `result` (the result rows); `status` and `body` now only for an answer stored
 *   rendered (a row holds one or the other).
 *
 * Plain PostgreSQL: a key is the author's, across records (primary key (author, key), as in
 * 0011): the same key sent for another record finds the other record's answer, whose digest
 * differs: IDEMPOTENCY_KEY_REUSED. Rows stored before this migration keep replaying.
 *
 * Citus: `idempotency_keys` is distributed by `rid`, co-located with `records` (primary key
 * (rid, author, key); rows without a record, stored before this migration, are deleted:
 * keyed writes were not usable on Citus then), and a key is looked up on its record's shard
 * (kslate_idempotency_find is replaced by one naming `rid`): the same key sent for another
 * record is a new key there. The keyed functions are distributed by `p_rid` with
 * `force_delegation`: the gateway sends each as `begin; select ...; commit` in one round trip
 * (the commit is what tells the gateway the write is durable), and a call inside a
 * transaction block is delegated only when forced.
 */
export const version = 16;
export const name = 'keyed_writes';

export const up = /* sql */ `
alter table idempotency_keys add column rid text;
alter table idempotency_keys add column result json;
alter table idempotency_keys alter column status drop not null;
alter table idempotency_keys alter column body drop not null;
alter table idempotency_keys add constraint idempotency_keys_answer check (body is not null or result is not null);

-- The live row of a key (plain PostgreSQL: the author's key, whatever its record). Volatile: it
-- is called after the key's lock is taken and must see an answer committed before that.
create function kslate_idempotency_find(p_rid text, p_author text, p_key text,
  out digest text, out status integer, out body text, out result json)
language sql volatile as $fn$
  select k.digest, k.status, k.body, k.result from idempotency_keys k
   where k.author = p_author and k.key = p_key and k.expires_at > now()
$fn$;

-- 'in_use' (another statement holds the key), 'fresh' (no live answer), 'replay' (same digest:
-- its status and body, or its result rows), 'reused' (another digest).
create function kslate_idempotency_begin(p_rid text, p_author text, p_key text, p_digest text,
  out state text, out status integer, out body text, out result json)
language plpgsql volatile as $fn$
declare
  stored text;
begin
  if not pg_try_advisory_xact_lock(hashtextextended(p_author || chr(10) || p_key, 11)) then
    state := 'in_use';
    return;
  end if;
  select f.digest, f.status, f.body, f.result into stored, status, body, result
    from kslate_idempotency_find(p_rid, p_author, p_key) f;
  if stored is null then
    state := 'fresh';
    status := null;
    body := null;
    result := null;
  elsif stored = p_digest then
    state := 'replay';
  else
    status := null;
    body := null;
    result := null;
    state := 'reused';
  end if;
end
$fn$;

-- Store an answer under a key taken by kslate_idempotency_begin (no live row exists; an
-- expired one the sweep has not purged yet is replaced).
create function kslate_idempotency_keep(p_rid text, p_author text, p_key text, p_digest text, p_ttl_seconds integer,
  p_status integer, p_body text, p_result json) returns void
language sql volatile as $fn$
  insert into idempotency_keys as k (rid, author, key, digest, status, body, result, expires_at)
  values (p_rid, p_author, p_key, p_digest, p_status, p_body, p_result, now() + make_interval(secs => p_ttl_seconds))
  on conflict on constraint idempotency_keys_pkey do update set digest = excluded.digest, status = excluded.status,
    body = excluded.body, result = excluded.result, created_at = excluded.created_at, expires_at = excluded.expires_at
$fn$;

create function kslate_write_keyed(
  p_class text, p_rid text, p_field text, p_kind text, p_op text, p_expect bigint, p_premises jsonb, p_gate text[],
  p_author text, p_strength text, p_value text, p_evidence text, p_based_on text, p_invocation text, p_hist_expected bigint,
  p_ttl_seconds integer, p_key text, p_digest text, p_key_ttl integer)
returns table (state text, status integer, body text, result json)
language plpgsql volatile as $fn$
declare
  k record;
  r json;
begin
  k := kslate_idempotency_begin(p_rid, p_author, p_key, p_digest);
  if k.state <> 'fresh' then
    return query select k.state, k.status, k.body, k.result;
    return;
  end if;
  select coalesce(json_agg(w), '[]') into r
    from kslate_write(p_class, p_rid, p_field, p_kind, p_op, p_expect, p_premises, p_gate, p_author, p_strength,
                      p_value, p_evidence, p_based_on, p_invocation, p_hist_expected, p_ttl_seconds) w;
  perform kslate_idempotency_keep(p_rid, p_author, p_key, p_digest, p_key_ttl, null, null, r);
  return query select 'fresh'::text, null::integer, null::text, r;
end
$fn$;

create function kslate_claim_keyed(
  p_class text, p_rid text, p_field text, p_author text, p_strength text, p_lease_seconds integer, p_invocation text,
  p_key text, p_digest text, p_key_ttl integer)
returns table (state text, status integer, body text, result json)
language plpgsql volatile as $fn$
declare
  k record;
  r json;
begin
  k := kslate_idempotency_begin(p_rid, p_author, p_key, p_digest);
  if k.state <> 'fresh' then
    return query select k.state, k.status, k.body, k.result;
    return;
  end if;
  select coalesce(json_agg(w), '[]') into r
    from kslate_claim(p_class, p_rid, p_field, p_author, p_strength, p_lease_seconds, p_invocation) w;
  perform kslate_idempotency_keep(p_rid, p_author, p_key, p_digest, p_key_ttl, null, null, r);
  return query select 'fresh'::text, null::integer, null::text, r;
end
$fn$;

create function kslate_save_checkpoint_keyed(
  p_class text, p_rid text, p_role text, p_document text, p_author text, p_key text, p_digest text, p_key_ttl integer)
returns table (state text, status integer, body text, result json)
language plpgsql volatile as $fn$
declare
  k record;
  r json;
begin
  k := kslate_idempotency_begin(p_rid, p_author, p_key, p_digest);
  if k.state <> 'fresh' then
    return query select k.state, k.status, k.body, k.result;
    return;
  end if;
  -- No row: the record does not exist (NOT_FOUND), an answer too.
  select coalesce(json_agg(w), '[]') into r from kslate_save_checkpoint(p_class, p_rid, p_role, p_document, p_author) w;
  perform kslate_idempotency_keep(p_rid, p_author, p_key, p_digest, p_key_ttl, null, null, r);
  return query select 'fresh'::text, null::integer, null::text, r;
end
$fn$;

-- A transaction's answer names its transaction id, drawn by the gateway: stored with its rows.
-- It calls the kslate_transact that takes the record's ttl (migration 0019, reserved before
-- this one was written and applied first on databases that had it; PL/pgSQL binds the call
-- when it first runs).
create function kslate_transact_keyed(
  p_class text, p_rid text, p_txn uuid, p_author text, p_strength text, p_writes jsonb,
  p_values text[], p_evidence text[], p_based_on text[], p_invocation text[],
  p_kept text[], p_kept_size integer[], p_kept_sha text[], p_stop integer, p_stop_outcome text, p_ttl_seconds integer,
  p_key text, p_digest text, p_key_ttl integer)
returns table (state text, status integer, body text, result json)
language plpgsql volatile as $fn$
declare
  k record;
  r json;
begin
  k := kslate_idempotency_begin(p_rid, p_author, p_key, p_digest);
  if k.state <> 'fresh' then
    return query select k.state, k.status, k.body, k.result;
    return;
  end if;
  select json_build_object('txn', p_txn, 'rows', coalesce(json_agg(w), '[]')) into r
    from kslate_transact(p_class, p_rid, p_txn, p_author, p_strength, p_writes, p_values, p_evidence, p_based_on,
                         p_invocation, p_kept, p_kept_size, p_kept_sha, p_stop, p_stop_outcome, p_ttl_seconds) w;
  perform kslate_idempotency_keep(p_rid, p_author, p_key, p_digest, p_key_ttl, null, null, r);
  return query select 'fresh'::text, null::integer, null::text, r;
end
$fn$;

-- A keyed write refused before its write function: the answer as sent, and the refusal's
-- history row when it leaves one (p_outcome not null; as kslate_add_history writes it for
-- the gateway's rejections, with the record's version when it exists).
create function kslate_idempotency_answer(
  p_rid text, p_author text, p_key text, p_digest text, p_key_ttl integer, p_status integer, p_body text,
  p_class text, p_field text, p_op text, p_outcome text, p_version bigint, p_value text, p_value_size integer,
  p_value_sha256 text, p_strength text, p_evidence text, p_expected bigint, p_based_on text, p_invocation text)
returns table (state text, status integer, body text, result json)
language plpgsql volatile as $fn$
declare
  k record;
  seq bigint;
begin
  k := kslate_idempotency_begin(p_rid, p_author, p_key, p_digest);
  if k.state <> 'fresh' then
    return query select k.state, k.status, k.body, k.result;
    return;
  end if;
  if p_outcome is not null then
    seq := kslate_add_history(p_class, p_rid, p_field, p_op, p_outcome, p_version,
                              (select r.record_version from records r where r.class = p_class and r.rid = p_rid),
                              p_value, p_value_size, p_value_sha256, p_author, p_strength, p_evidence, p_expected,
                              p_based_on, p_invocation, null);
  end if;
  perform kslate_idempotency_keep(p_rid, p_author, p_key, p_digest, p_key_ttl, p_status, p_body, null);
  return query select 'fresh'::text, null::integer, null::text, null::json;
end
$fn$;

do $citus$
begin
  if not exists (select 1 from pg_extension where extname = 'citus') then
    return;
  end if;
  delete from idempotency_keys where rid is null;
  alter table idempotency_keys alter column rid set not null;
  alter table idempotency_keys drop constraint idempotency_keys_pkey;
  alter table idempotency_keys add constraint idempotency_keys_pkey primary key (rid, author, key);
  perform create_distributed_table('idempotency_keys', 'rid', colocate_with => 'records');

  -- A key lives on its record's shard.
  create or replace function kslate_idempotency_find(p_rid text, p_author text, p_key text,
    out digest text, out status integer, out body text, out result json)
  language sql volatile as $fn$
    select k.digest, k.status, k.body, k.result from idempotency_keys k
     where k.rid = p_rid and k.author = p_author and k.key = p_key and k.expires_at > now()
  $fn$;

  perform create_distributed_function('kslate_idempotency_find(text, text, text)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_idempotency_begin(text, text, text, text)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_idempotency_keep(text, text, text, text, integer, integer, text, json)', 'p_rid', colocate_with => 'records');
  perform create_distributed_function('kslate_write_keyed(text, text, text, text, text, bigint, jsonb, text[], text, text, text, text, text, text, bigint, integer, text, text, integer)', 'p_rid', colocate_with => 'records', force_delegation => true);
  perform create_distributed_function('kslate_claim_keyed(text, text, text, text, text, integer, text, text, text, integer)', 'p_rid', colocate_with => 'records', force_delegation => true);
  perform create_distributed_function('kslate_save_checkpoint_keyed(text, text, text, text, text, text, text, integer)', 'p_rid', colocate_with => 'records', force_delegation => true);
  perform create_distributed_function('kslate_transact_keyed(text, text, uuid, text, text, jsonb, text[], text[], text[], text[], text[], integer[], text[], integer, text, integer, text, text, integer)', 'p_rid', colocate_with => 'records', force_delegation => true);
  perform create_distributed_function('kslate_idempotency_answer(text, text, text, text, integer, integer, text, text, text, text, text, bigint, text, integer, text, text, text, bigint, text, text)', 'p_rid', colocate_with => 'records', force_delegation => true);
end
$citus$;
`;
