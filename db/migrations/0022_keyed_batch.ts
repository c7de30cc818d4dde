/**
 * Keyed writes in the write batches (issue 38 item 1; docs/performance.md "Coalesced writes",
 * docs/decisions.md "Keyed writes in a batch"). Frozen in time: never edit an applied migration.
 *
 * Migration 0016's keyed functions each wrote out the same frame around their write function:
 * take the key (`kslate_idempotency_begin`: IN_USE without waiting, or the live answer: replay,
 * REUSED), run the write, keep its result rows under the key (`kslate_idempotency_keep`). Here
 * that frame is one function, `kslate_keyed`, which the keyed functions (same signatures,
 * same answers) and the batch call per write:
 *
 * - `kslate_write_call(a text[])`: one write as a batch carries it, `[letter, argument 1, ...]`
 *   as text (an SQL array argument as a JSON array, decoded by `kslate_text_array`), run by
 *   its function, the rows it answers as one JSON array (`json_agg`). `w` kslate_write, `c`
 *   kslate_claim, `x` kslate_transact (as in migration 0020), `k` kslate_save_checkpoint, and
 *   `h` the history row of a refusal the gateway decided (kslate_add_history, with the
 *   record's version; no row answered).
 * - `kslate_keyed(rid, author, key, digest, key ttl, write text[], status, body)`: the frame,
 *   one row (state, status, body, result).
 *   Fresh: runs the write (`kslate_write_call`), keeps its result rows under the key (a
 *   transaction's as {txn, rows}; an `h` write keeps `status` and `body`, the answer as sent)
 *   and answers them; otherwise answers the key's state and a replay's stored answer.
 * - `kslate_write_keyed`, `kslate_claim_keyed`, `kslate_save_checkpoint_keyed`,
 *   `kslate_transact_keyed`, `kslate_idempotency_answer`: their arguments as such a write,
 *   through `kslate_keyed`.
 * - `kslate_write_batch(p_writes json)` (0020's, replaced): an element is a write as before, or
 *   a keyed write `["key", rid, author, key, digest, key ttl, write]`, answered with one row:
 *   `kslate_keyed`'s (state, status, body, result) as JSON, the row the keyed statement alone
 *   answers.
 *
 * The key's lock is transaction-scoped: in a batch it is held until the batch's one commit,
 * and the key and its kept result commit with the write. Two writes of one batch with the same
 * key: the lock is re-entrant within the transaction, so the second finds the first's kept
 * result, as it would had it been sent after the first committed (a replay if its digest is
 * the same, REUSED if not).
 *
 * Every create-or-replace runs alone (EXECUTE in a DO block): on Citus the keyed functions are
 * distributed, and Citus cannot forward a DDL statement that shares its query string with
 * others (as in 0019). On Citus the new functions are distributed too (`kslate_keyed` by its
 * record, co-located with `records`, like 0016's begin and keep; the others only carried to
 * every node), so a keyed function delegated to the record's node finds them there. Batches are
 * not sent on Citus (a batch spans shards).
 */
export const version = 22;
export const name = 'keyed_batch';

export const up = /* sql */ `
do $ddl$
begin
  -- An SQL array argument sent as a JSON array. In PL/pgSQL: 0020's kslate_batch_array, an SQL
  -- function, is inlined into each statement calling it, which then cost about 70 µs more per
  -- call (measured: a put through kslate_write_call 285 µs of backend CPU with it, 210 with
  -- this, 210 for kslate_write called directly).
  execute $q$
create function kslate_text_array(p_json text) returns text[]
language plpgsql immutable parallel safe as $fn$
begin
  if p_json is null then
    return null;
  end if;
  return array(select json_array_elements_text(p_json::json));
end
$fn$
  $q$;

  execute $q$
create function kslate_write_call(a text[]) returns json
language plpgsql volatile as $fn$
declare
  r json;
begin
  if a[1] = 'w' then
    select coalesce(json_agg(k), '[]') into r from kslate_write(
      a[2], a[3], a[4], a[5], a[6], a[7]::bigint, a[8]::jsonb, kslate_text_array(a[9]), a[10], a[11], a[12], a[13],
      a[14], a[15], a[16]::bigint, a[17]::integer) k;
  elsif a[1] = 'c' then
    select coalesce(json_agg(k), '[]') into r from kslate_claim(a[2], a[3], a[4], a[5], a[6], a[7]::integer, a[8]) k;
  elsif a[1] = 'x' then
    select coalesce(json_agg(k), '[]') into r from kslate_transact(
      a[2], a[3], a[4]::uuid, a[5], a[6], a[7]::jsonb, kslate_text_array(a[8]), kslate_text_array(a[9]),
      kslate_text_array(a[10]), kslate_text_array(a[11]), kslate_text_array(a[12]),
      kslate_text_array(a[13])::integer[], kslate_text_array(a[14]), a[15]::integer, a[16], a[17]::integer) k;
  elsif a[1] = 'k' then
    select coalesce(json_agg(k), '[]') into r from kslate_save_checkpoint(a[2], a[3], a[4], a[5], a[6]) k;
  elsif a[1] = 'h' then
    perform kslate_add_history(a[2], a[3], a[4], a[5], a[6], a[7]::bigint,
                               (select x.record_version from records x where x.class = a[2] and x.rid = a[3]),
                               a[8], a[9]::integer, a[10], a[11], a[12], a[13], a[14]::bigint, a[15], a[16], null);
  else
    raise exception 'kslate_write_call: unknown write function %', a[1];
  end if;
  return r;
end
$fn$
  $q$;

  execute $q$
create function kslate_keyed(p_rid text, p_author text, p_key text, p_digest text, p_key_ttl integer, a text[],
  p_status integer default null, p_body text default null,
  out state text, out status integer, out body text, out result json)
language plpgsql volatile as $fn$
declare
  k record;
begin
  k := kslate_idempotency_begin(p_rid, p_author, p_key, p_digest);
  state := k.state;
  status := k.status;
  body := k.body;
  result := k.result;
  if k.state <> 'fresh' then
    return;
  end if;
  if a is not null then
    result := kslate_write_call(a);
    -- A transaction's answer names its transaction id, drawn by the gateway: kept with its rows.
    if a[1] = 'x' then
      result := json_build_object('txn', a[4]::uuid, 'rows', result);
    end if;
  end if;
  perform kslate_idempotency_keep(p_rid, p_author, p_key, p_digest, p_key_ttl, p_status, p_body, result);
end
$fn$
  $q$;

  execute $q$
create or replace function kslate_write_keyed(
  p_class text, p_rid text, p_field text, p_kind text, p_op text, p_expect bigint, p_premises jsonb, p_gate text[],
  p_author text, p_strength text, p_value text, p_evidence text, p_based_on text, p_invocation text, p_hist_expected bigint,
  p_ttl_seconds integer, p_key text, p_digest text, p_key_ttl integer)
returns table (state text, status integer, body text, result json)
language plpgsql volatile as $fn$
declare
  k record;
begin
  k := kslate_keyed(p_rid, p_author, p_key, p_digest, p_key_ttl,
    array['w', p_class, p_rid, p_field, p_kind, p_op, p_expect::text, p_premises::text, to_json(p_gate)::text, p_author,
          p_strength, p_value, p_evidence, p_based_on, p_invocation, p_hist_expected::text, p_ttl_seconds::text]);
  return query select k.state, k.status, k.body, k.result;
end
$fn$
  $q$;

  execute $q$
create or replace function kslate_claim_keyed(
  p_class text, p_rid text, p_field text, p_author text, p_strength text, p_lease_seconds integer, p_invocation text,
  p_key text, p_digest text, p_key_ttl integer)
returns table (state text, status integer, body text, result json)
language plpgsql volatile as $fn$
declare
  k record;
begin
  k := kslate_keyed(p_rid, p_author, p_key, p_digest, p_key_ttl,
    array['c', p_class, p_rid, p_field, p_author, p_strength, p_lease_seconds::text, p_invocation]);
  return query select k.state, k.status, k.body, k.result;
end
$fn$
  $q$;

  execute $q$
create or replace function kslate_save_checkpoint_keyed(
  p_class text, p_rid text, p_role text, p_document text, p_author text, p_key text, p_digest text, p_key_ttl integer)
returns table (state text, status integer, body text, result json)
language plpgsql volatile as $fn$
declare
  k record;
begin
  -- No row: the record does not exist (NOT_FOUND), an answer too.
  k := kslate_keyed(p_rid, p_author, p_key, p_digest, p_key_ttl,
    array['k', p_class, p_rid, p_role, p_document, p_author]);
  return query select k.state, k.status, k.body, k.result;
end
$fn$
  $q$;

  execute $q$
create or replace function kslate_transact_keyed(
  p_class text, p_rid text, p_txn uuid, p_author text, p_strength text, p_writes jsonb,
  p_values text[], p_evidence text[], p_based_on text[], p_invocation text[],
  p_kept text[], p_kept_size integer[], p_kept_sha text[], p_stop integer, p_stop_outcome text, p_ttl_seconds integer,
  p_key text, p_digest text, p_key_ttl integer)
returns table (state text, status integer, body text, result json)
language plpgsql volatile as $fn$
declare
  k record;
begin
  k := kslate_keyed(p_rid, p_author, p_key, p_digest, p_key_ttl,
    array['x', p_class, p_rid, p_txn::text, p_author, p_strength, p_writes::text, to_json(p_values)::text,
          to_json(p_evidence)::text, to_json(p_based_on)::text, to_json(p_invocation)::text, to_json(p_kept)::text,
          to_json(p_kept_size)::text, to_json(p_kept_sha)::text, p_stop::text, p_stop_outcome, p_ttl_seconds::text]);
  return query select k.state, k.status, k.body, k.result;
end
$fn$
  $q$;

  execute $q$
create or replace function kslate_idempotency_answer(
  p_rid text, p_author text, p_key text, p_digest text, p_key_ttl integer, p_status integer, p_body text,
  p_class text, p_field text, p_op text, p_outcome text, p_version bigint, p_value text, p_value_size integer,
  p_value_sha256 text, p_strength text, p_evidence text, p_expected bigint, p_based_on text, p_invocation text)
returns table (state text, status integer, body text, result json)
language plpgsql volatile as $fn$
declare
  k record;
begin
  -- The refusal's history row when it leaves one (p_outcome not null), with the answer as sent.
  k := kslate_keyed(p_rid, p_author, p_key, p_digest, p_key_ttl,
    case when p_outcome is null then null
         else array['h', p_class, p_rid, p_field, p_op, p_outcome, p_version::text, p_value, p_value_size::text,
                    p_value_sha256, p_author, p_strength, p_evidence, p_expected::text, p_based_on, p_invocation] end,
    p_status, p_body);
  return query select k.state, k.status, k.body, k.result;
end
$fn$
  $q$;

  execute $q$
create or replace function kslate_write_batch(p_writes json)
returns table (i integer, r json)
language plpgsql volatile as $fn$
declare
  e record;
begin
  for e in select x.w, (x.n - 1)::integer as n from json_array_elements(p_writes) with ordinality as x(w, n) loop
    if e.w ->> 0 = 'key' then
      return query select e.n, to_json(k) from kslate_keyed(
        e.w ->> 1, e.w ->> 2, e.w ->> 3, e.w ->> 4, (e.w ->> 5)::integer, array(select json_array_elements_text(e.w -> 6))) k;
    else
      return query select e.n, w from json_array_elements(kslate_write_call(array(select json_array_elements_text(e.w)))) w;
    end if;
  end loop;
end
$fn$
  $q$;
end
$ddl$;

do $citus$
begin
  if not exists (select 1 from pg_extension where extname = 'citus') then
    return;
  end if;
  perform create_distributed_function('kslate_text_array(text)');
  perform create_distributed_function('kslate_write_call(text[])');
  perform create_distributed_function('kslate_keyed(text, text, text, text, integer, text[], integer, text)', 'p_rid', colocate_with => 'records');
end
$citus$;
`;
