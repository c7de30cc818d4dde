/**
 * kslate_lock_record: the write path's lock step in one round trip. It takes the record's
 * row lock (or, when the record does not exist yet, a transaction advisory lock on its
 * name, so creators are serialised), then reads the requested fields. Inside a VOLATILE
 * plpgsql function each statement takes a fresh snapshot under READ COMMITTED, so the field
 * rows are read after the lock is held — a single SELECT ... JOIN ... FOR UPDATE would return
 * the joined rows as they were before waiting (a lost update).
 *
 * Returns one row per found field, or one row with null field columns; rec_id is null when
 * the record does not exist.
 */
export const version = 2;
export const name = 'lock_function';

export const up = /* sql */ `
create function kslate_lock_record(p_class text, p_rid text, p_fields text[])
returns table (
  rec_id bigint, rec_version bigint, db_now timestamptz,
  name text, kind text, value json, version bigint, record_version bigint, author text,
  identity_strength text, evidence text, based_on jsonb, invocation json, updated_at timestamptz,
  owner text, lease_expires_at timestamptz, lease_lapsed boolean, lease_held boolean)
language plpgsql volatile as $fn$
declare
  r_id bigint;
  r_version bigint;
begin
  select r.id, r.record_version into r_id, r_version
    from records r where r.class = p_class and r.rid = p_rid for update;
  if not found then
    perform pg_advisory_xact_lock(hashtextextended(p_class || '/' || p_rid, 0));
    select r.id, r.record_version into r_id, r_version
      from records r where r.class = p_class and r.rid = p_rid for update;
  end if;
  return query
    select r_id, r_version, now(), f.name, f.kind, f.value, f.version, f.record_version, f.author,
           f.identity_strength, f.evidence, f.based_on, f.invocation, f.updated_at, f.owner,
           f.lease_expires_at, f.lease_lapsed, (f.owner is not null and f.lease_expires_at > now())
      from (select 1) one
      left join fields f on f.record_id = r_id and f.name = any(p_fields);
end
$fn$;
`;
