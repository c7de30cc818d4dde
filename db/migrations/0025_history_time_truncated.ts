/**
 * History rows render their time TRUNCATED to the millisecond, as a get's `updated_at` and a
 * watch change's `created_at` are (issue 32 item 5): migrations 0008 and 0014 rounded it
 * (`+ interval '500 microseconds'`), so one write showed as .526 in history and .525 in get
 * and watch. RFC 3339 writers truncate; so does the driver's Date and `epochMs`
 * (db/kysely/conn.ts). Frozen in time: never edit an applied migration.
 *
 * A JSON null written as a value renders as `"value":null`, as get shows it (0008 left the
 * key out, so a put of null read like a claim, which keeps no value: SQL NULL).
 *
 * Only `kslate_history_render_row` changes (same signature, so on Citus the distributed
 * function is replaced in place on every node). Rows stored rendered before this migration
 * keep the rounded text they were stored with; rows rendered at read time (older than 0008)
 * and every row written from now on truncate.
 */
export const version = 25;
export const name = 'history_time_truncated';

export const up = /* sql */ `
create or replace function kslate_history_render_row(
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
         when p_value is not null then ',"value":' || p_value::text
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
    || to_char(p_created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS')
    || '+00:00"}'
$fn$;
`;
