/**
 * kslate_claim: a claim (take, renew, take over or release a task field's lease) decided and
 * applied in ONE round trip, HELD included. Frozen in time: never edit an applied migration.
 *
 * After the checks the gateway makes from what it holds (role, identity strength, kind, body),
 * the only check left for a claim is HELD (decisions §5), judged under the record's lock by
 * the database clock; nothing follows it in the rejection order. So the whole decision lives
 * here, once: under the same locks as kslate_lock_record (the record's row lock, or for a
 * record that does not exist yet an advisory lock on its name), with the field re-read under
 * the lock (each statement of a VOLATILE function takes a fresh snapshot):
 *
 * - held by another identity, unexpired by now(): the `held` history row, nothing else;
 * - otherwise the field's version + 1 with outcome `release` (p_lease_seconds = 0), `renew`
 *   (the caller holds it), `takeover` (another identity's lease expired: took_over_from) or
 *   `claim`, the lease until now() + p_lease_seconds, the record version raised (the record
 *   created if new), and the applied history row — as PgWriteTx.applyField writes a task field.
 *
 * Returns the outcome, the field version (for HELD: the current one), the record version,
 * whether the record was created, the owner and lease expiry after the claim (for HELD: the
 * holder's) as epoch milliseconds, and the previous owner of a takeover.
 */
export const version = 6;
export const name = 'claim';

export const up = /* sql */ `
create function kslate_claim(
  p_class text, p_rid text, p_field text, p_author text, p_strength text, p_lease_seconds integer, p_invocation text)
returns table (outcome text, version bigint, record_version bigint, created boolean, owner text,
               lease_expires_ms bigint, took_over_from text)
language plpgsql volatile as $fn$
declare
  r_id bigint;
  r_version bigint;
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
    insert into records (class, rid, record_version) values (p_class, p_rid, 1)
      returning id, records.record_version into r_id, r_version;
    was_new := true;
  else
    update records set record_version = records.record_version + 1, last_write_at = now()
      where id = r_id returning records.record_version into r_version;
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
                       evidence, expected_version, based_on, invocation, outcome, bytes)
  values (p_class, p_rid, p_field, case when result = 'renew' then 'claim' else result end, nv, r_version, null,
          p_author, p_strength, null, null, null, p_invocation::json, 'applied', mbytes);

  return query select result, nv, r_version, was_new,
                      case when expires is null then null else p_author end,
                      floor(extract(epoch from expires) * 1000)::bigint, previous;
end
$fn$;
`;
