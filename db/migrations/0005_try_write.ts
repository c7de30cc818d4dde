/**
 * kslate_try_write: the common write (an applied put or append) in ONE round trip. Frozen in
 * time: never edit an applied migration.
 *
 * Until this, every applied write took four round trips while the record's row lock was
 * held (BEGIN, kslate_lock_record, the write statement, COMMIT), each statement parsed and
 * planned anew. This function is called on its own, so it is its own transaction: it takes
 * the same locks as kslate_lock_record (the record's row lock, or for a record that does not
 * exist yet a transaction advisory lock on its name, so creators are serialised with the
 * slow path too), then re-reads under the lock what the checks after the lock need (each
 * statement of a VOLATILE plpgsql function takes a fresh snapshot under READ COMMITTED):
 *
 * - the field's version, compared with `p_expect` when that is not null (STALE);
 * - every premise's field version, and for a fence premise that `p_author` holds its lease,
 *   unexpired by now() (STALE_PREMISE).
 *
 * When every check holds it applies the write exactly as PgWriteTx.applyField does (record
 * version raised or the record created, the field upserted, the entry of an append field,
 * the history row) and returns applied = true with the new version. When any check fails it
 * writes nothing and returns applied = false: the gateway then runs the full write
 * transaction, which decides the exact rejection (and writes its history row) under a fresh
 * lock, or applies if the state moved back. So a write this function declines is never lost
 * or misjudged; it only costs the slow path.
 */
export const version = 5;
export const name = 'try_write';

export const up = /* sql */ `
create function kslate_try_write(
  p_class text, p_rid text, p_field text, p_kind text, p_expect bigint, p_premises jsonb,
  p_author text, p_strength text, p_value text, p_evidence text, p_based_on text, p_invocation text,
  p_op text, p_hist_expected bigint)
returns table (applied boolean, version bigint, record_version bigint, created boolean)
language plpgsql volatile as $fn$
declare
  r_id bigint;
  r_version bigint;
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
    insert into records (class, rid, record_version) values (p_class, p_rid, 1)
      returning id, records.record_version into r_id, r_version;
    was_new := true;
  else
    update records set record_version = records.record_version + 1, last_write_at = now()
      where id = r_id returning records.record_version into r_version;
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
                       evidence, expected_version, based_on, invocation, outcome, bytes)
  values (p_class, p_rid, p_field, p_op, nv, r_version, p_value::json, p_author, p_strength, p_evidence,
          p_hist_expected, p_based_on::jsonb, p_invocation::json, 'applied', vbytes + mbytes);

  return query select true, nv, r_version, was_new;
end
$fn$;
`;
