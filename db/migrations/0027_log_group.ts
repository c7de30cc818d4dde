/**
 * The class change log after a shard move, on Citus (issue 35, docs/scale-out.md "Class watch
 * after a shard move"). Frozen in time: never edit an applied migration.
 *
 * The class log is read per node group, each group's rows in `(tx, id)` order below that
 * node's oldest running transaction (0007, db/kysely/change-log.ts). Until now a row's group
 * was its history id's high bits (`id >> 48`, Citus's per-node identity ranges) and its `tx`
 * the record's `log_tx`, the greatest transaction id that wrote the record. Both broke when the
 * rebalancer moved a record's shard to another node:
 * - the record's `log_tx` came from the old node's transaction ids, and `greatest` kept it
 *   while the new node's ids were lower: its next changes were held back until the new node's
 *   ids passed the old ones (on a worker added fresh, millions of transactions later);
 * - after a move to a lower group, 0024 continues the record's ids in the old group's range
 *   (so `GET /history` stays newest first), so a change written on the new node was read as
 *   the old node's, at `(log_tx, id)` behind the old group's cursor: never delivered.
 *
 * Here, in both modes (one text of every write function):
 * - `kslate_local_group()`: the node group this statement runs on, 0 on plain PostgreSQL (an
 *   immutable constant, so a plain write pays nothing), `pg_dist_local_group` on Citus.
 * - `history.log_group`: the group of the node that wrote the row, whose transaction ids its
 *   `tx` is in (kslate_add_history sets it). Null on rows written before this migration: a
 *   reader takes `id >> 48` for them, as before.
 * - `records.log_group`: the group whose transaction id `log_tx` is. A write on another group's
 *   node (the record moved) starts `log_tx` over from its own transaction id instead of the
 *   greatest; null (a record not written since this migration) counts as this node's.
 * kslate_add_history (0010) and kslate_apply (0014) are replaced, their bodies otherwise as
 * there. Both columns are added without a default (no table rewrite).
 */
export const version = 27;
export const name = 'log_group';

export const up = /* sql */ `
do $mode$
begin
  if exists (select 1 from pg_extension where extname = 'citus') then
    -- plpgsql, not sql: its statement's plan is kept for the session, where a SQL function
    -- that cannot be inlined is planned again in every write that calls it.
    create function kslate_local_group() returns integer
    language plpgsql stable parallel safe as $fn$ begin return (select groupid from pg_dist_local_group); end $fn$;
    -- On every node (the write functions call it on the record's worker).
    perform create_distributed_function('kslate_local_group()');
  else
    create function kslate_local_group() returns integer
    language sql immutable parallel safe as $fn$ select 0 $fn$;
  end if;
end
$mode$;

alter table records add column log_group integer;
alter table history add column log_group integer;

create or replace function kslate_add_history(
  p_class text, p_rid text, p_field text, p_op text, p_outcome text, p_version bigint, p_record_version bigint,
  p_value text, p_value_size integer, p_value_sha256 text, p_author text, p_strength text, p_evidence text,
  p_expected bigint, p_based_on text, p_invocation text, p_tx xid8)
returns bigint
language plpgsql volatile as $fn$
declare
  seq bigint;
  g integer := kslate_local_group();
begin
  -- bytes as in migration 0003 (the texts the row stores); a rejection's tx is its own.
  insert into history as h (class, rid, field, op, version, record_version, value, value_size, value_sha256, author,
                            identity_strength, evidence, expected_version, based_on, invocation, outcome, bytes, tx,
                            log_group)
  values (p_class, p_rid, p_field, p_op, p_version, p_record_version, p_value::json, p_value_size, p_value_sha256,
          p_author, p_strength, p_evidence, p_expected, p_based_on::jsonb, p_invocation::json, p_outcome,
          coalesce(octet_length(p_value), 0) + coalesce(octet_length(p_evidence), 0)
            + coalesce(octet_length(p_based_on), 0) + coalesce(octet_length(p_invocation), 0),
          coalesce(p_tx, pg_current_xact_id()), g)
  returning h.id into seq;
  return seq;
end
$fn$;

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
  g integer := kslate_local_group();
  me xid8;
begin
  created := false;
  if p_stamp_version is not null then
    rec_id := p_rec_id;
    record_version := p_stamp_version;
    log_tx := p_stamp_tx;
  elsif p_rec_id is null then
    insert into records as r (class, rid, record_version, log_tx, log_group) values (p_class, p_rid, 1, pg_current_xact_id(), g)
      returning r.id, r.record_version, r.log_tx into rec_id, record_version, log_tx;
    created := true;
  else
    -- log_tx is the greatest id that wrote the record on this node; one of another node's
    -- (the record's shard moved here) is of another id space and starts over. The id is a
    -- variable: Citus refuses a function that is not immutable inside CASE or COALESCE.
    me := pg_current_xact_id();
    update records r set record_version = r.record_version + 1, last_write_at = now(),
                         log_tx = case when coalesce(r.log_group, g) = g then greatest(r.log_tx, me) else me end,
                         log_group = g
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
`;
