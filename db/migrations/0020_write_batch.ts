/**
 * Coalesced writes (issue 38 item 1; docs/performance.md "Coalesced writes"): one statement,
 * one transaction, one commit for several writes that arrived while another write statement
 * was in flight. Frozen in time: never edit an applied migration.
 *
 * `kslate_write_batch(p_writes json)` takes a JSON array, one element per write, each an array
 * `[function, argument 1, argument 2, ...]` holding exactly the arguments the gateway's single
 * statement for that write sends (db/kysely/writes.ts WRITE, CLAIM, TRANSACT): `w` for
 * kslate_write (16 arguments), `c` for kslate_claim (7), `x` for kslate_transact (16, the last being ttl_seconds); an
 * SQL array argument is a JSON array. It calls them in the order given (the gateway sorts a
 * batch by record, so two batches take their records' locks in one order and never deadlock,
 * and keeps arrival order between writes to one record) and answers, per write, its index in
 * the array and each row its function answered, as JSON (`to_json` of the row: the same
 * columns and values the single statement would answer).
 *
 * No rule is written here: each write is decided and applied by its own function, which
 * answers a rejection (STALE, STALE_PREMISE, HELD, ...) as a row and writes its history row,
 * raising nothing; so one write's rejection leaves the others of the batch as they would be
 * alone. A write that raises (a fault) aborts the statement; the gateway then runs that
 * batch's writes one by one.
 *
 * Not on Citus: a batch spans records on several shards (the gateway turns batching off there).
 */
export const version = 20;
export const name = 'write_batch';

export const up = /* sql */ `
create function kslate_batch_array(p_json text) returns text[]
language sql immutable parallel safe as $fn$
  select case when p_json is null then null else array(select json_array_elements_text(p_json::json)) end
$fn$;

create function kslate_write_batch(p_writes json)
returns table (i integer, r json)
language plpgsql volatile as $fn$
declare
  e record;
  a text[];
begin
  for e in select x.w, (x.n - 1)::integer as n from json_array_elements(p_writes) with ordinality as x(w, n) loop
    a := array(select json_array_elements_text(e.w));
    if a[1] = 'w' then
      return query select e.n, to_json(k) from kslate_write(
        a[2], a[3], a[4], a[5], a[6], a[7]::bigint, a[8]::jsonb, kslate_batch_array(a[9]), a[10], a[11], a[12], a[13],
        a[14], a[15], a[16]::bigint, a[17]::integer) k;
    elsif a[1] = 'c' then
      return query select e.n, to_json(k) from kslate_claim(a[2], a[3], a[4], a[5], a[6], a[7]::integer, a[8]) k;
    elsif a[1] = 'x' then
      return query select e.n, to_json(k) from kslate_transact(
        a[2], a[3], a[4]::uuid, a[5], a[6], a[7]::jsonb, kslate_batch_array(a[8]), kslate_batch_array(a[9]),
        kslate_batch_array(a[10]), kslate_batch_array(a[11]), kslate_batch_array(a[12]),
        kslate_batch_array(a[13])::integer[], kslate_batch_array(a[14]), a[15]::integer, a[16], a[17]::integer) k;
    else
      raise exception 'kslate_write_batch: unknown write function %', a[1];
    end if;
  end loop;
end
$fn$;
`;
