/**
 * History rows stored rendered (issue 15: history newest-1000 at 16 clients). Frozen in time:
 * never edit an applied migration.
 *
 * Rendering 1,000 rows at read time (json_build_object in PostgreSQL, or parsing the columns
 * and serializing objects in the gateway) cost ~8 ms of CPU per page; a page of rows stored
 * as JSON text costs a concatenation. So every row's JSON is written once, with the row:
 *
 * - `kslate_history_text(history)`: the one rendering of a row — the API's history row
 *   (interface.md "History row") as JSON text, nulls left out (and a JSON `null` value,
 *   invocation or based_on, which the gateway never writes). Its last two keys are always
 *   `based_on` (when there is one) and `created_at`, in UTC to the nearest millisecond
 *   (`…T11:30:00.123+00:00`), so a reader can find them from the row's end: a gateway whose
 *   time zone is not UTC rewrites the time into its own offset ("the server's offset"), and a
 *   reader whose role does not read every field leaves out the premises on fields it may not
 *   read. Everyone else sends the stored text as it is (handlers/history.ts).
 * - `history.rendered`: that text, filled by a BEFORE INSERT trigger, so every writer
 *   (kslate_try_write, kslate_claim, PgWriteTx, rejections, anything added later) stores it
 *   without knowing it. History rows are never updated, so it cannot go stale. The trigger is
 *   ENABLE ALWAYS: it fires under `session_replication_role = replica` too (a bulk load that
 *   turns foreign-key checks off, a logical-replication subscriber), since the text is part of
 *   the row, not a side effect of one writer.
 * - Rows written before this migration keep `rendered` null (no rewrite of a large table);
 *   the read renders those with the same function.
 */
export const version = 8;
export const name = 'history_rendered';

export const up = /* sql */ `
alter table history add column rendered text;

create function kslate_history_text(h history) returns text
language sql stable parallel safe as $fn$
  select '{"seq":' || h.id
    || ',"field":' || to_json(h.field)::text
    || ',"op":' || to_json(h.op)::text
    || coalesce(',"version":' || h.version, '')
    || coalesce(',"record_version":' || h.record_version, '')
    || case
         when h.value_sha256 is not null
           then coalesce(',"value_size":' || h.value_size, '') || ',"value_sha256":' || to_json(h.value_sha256)::text
         when h.value is not null and json_typeof(h.value) <> 'null' then ',"value":' || h.value::text
         else '' end
    || ',"author":' || to_json(h.author)::text
    || coalesce(',"identity_strength":' || to_json(h.identity_strength)::text, '')
    || coalesce(',"evidence":' || to_json(h.evidence)::text, '')
    || coalesce(',"expected_version":' || h.expected_version, '')
    || case when h.invocation is not null and json_typeof(h.invocation) <> 'null'
         then ',"invocation":' || h.invocation::text else '' end
    || ',"outcome":' || to_json(h.outcome)::text
    || case when h.based_on is not null and jsonb_typeof(h.based_on) <> 'null'
         then ',"based_on":' || h.based_on::text else '' end
    || ',"created_at":"'
    || to_char((h.created_at + interval '500 microseconds') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS')
    || '+00:00"}'
$fn$;

create function kslate_history_render() returns trigger
language plpgsql as $fn$
begin
  new.rendered := kslate_history_text(new);
  return new;
end
$fn$;

create trigger history_render before insert on history
  for each row execute function kslate_history_render();
alter table history enable always trigger history_render;
`;
