/**
 * History retention per class and TTL per record (issue 37). Frozen in time: never edit an
 * applied migration.
 *
 * - `kslate_history_kept(history)`: the one text of "never purged" (docs/worker.md "History
 *   retention"): the newest row of a (record, field), any outcome; the applied row holding a
 *   field's current value (its version is the field's); and, on a record with checkpoints,
 *   every applied row written after the oldest checkpoint's record version (the changes a
 *   role loading its checkpoint catches up on). The purge deletes only rows for which it is
 *   false, and judges it in the deleting statement.
 * - `history_class_age (class, created_at, id)` and its partial twin over rejected rows: the
 *   sweep walks a class's rows oldest first from a cursor, so one batch reads about as many
 *   index entries as it deletes (plus the kept rows it passes once).
 * - `history_retention`: per class and rule, how far the sweep has walked ((created_at, id)
 *   for the age rules, the history id for the per-field pass) and the class's `history` spec
 *   the walk was made under; a changed spec restarts the walk, so a class change applies to
 *   existing rows on the next sweep.
 * - `history_purged`: per record, the newest `created_at` and the greatest id among its purged
 *   rows. A history page that reaches below that id, or is the last page, says
 *   `truncated_before` (readers see the boundary, never a silent gap).
 * - `records.expires_at`: a record's own expiry (`ttl_seconds` on a write), set or extended
 *   by `kslate_extend_expiry` inside the write statement; the class `ttl` stays the default
 *   for records without one. `records_expires` lets the sweep find due records directly.
 * - `kslate_write` gains `p_ttl_seconds` (a new overload; the 15-argument one stays for a
 *   gateway of the previous release during a rolling upgrade). Its body is 0010's, with the
 *   expiry extended after an applied write.
 */
export const version = 13;
export const name = 'retention';

export const up = /* sql */ `
create index history_class_age on history (class, created_at, id);
create index history_class_rejected_age on history (class, created_at, id) where outcome <> 'applied';

create table history_retention (
  class text not null,
  rule text not null,
  at timestamptz,
  id bigint not null default 0,
  spec text not null,
  primary key (class, rule)
);

create table history_purged (
  class text not null,
  rid text not null,
  before timestamptz not null,
  before_id bigint not null,
  primary key (class, rid)
);

alter table records add column expires_at timestamptz;
create index records_expires on records (expires_at) where expires_at is not null;

create function kslate_history_kept(h history) returns boolean
language sql stable as $fn$
  select not exists (select 1 from history n where n.class = h.class and n.rid = h.rid and n.field = h.field and n.id > h.id)
      or (h.outcome = 'applied' and exists (
            select 1 from records r join fields f on f.record_id = r.id and f.name = h.field
            where r.class = h.class and r.rid = h.rid
              and (f.version = h.version
                   or h.record_version > (select min(c.record_version) from checkpoints c where c.record_id = r.id))))
$fn$;

create function kslate_extend_expiry(p_rec_id bigint, p_ttl_seconds integer, p_at timestamptz) returns timestamptz
language plpgsql volatile as $fn$
declare
  e timestamptz;
begin
  -- Sets the record's expiry, or moves it later; a shorter ttl never brings it forward.
  update records r set expires_at = greatest(r.expires_at, p_at + make_interval(secs => p_ttl_seconds))
    where r.id = p_rec_id returning r.expires_at into e;
  return e;
end
$fn$;

create function kslate_write(
  p_class text, p_rid text, p_field text, p_kind text, p_op text, p_expect bigint, p_premises jsonb, p_gate text[],
  p_author text, p_strength text, p_value text, p_evidence text, p_based_on text, p_invocation text, p_hist_expected bigint,
  p_ttl_seconds integer)
returns table (outcome text, version bigint, record_version bigint, created boolean, cur_author text, cur_value json,
               cur_evidence text, cur_updated_ms bigint, moved json, missing text[], expires_ms bigint)
language plpgsql volatile as $fn$
declare
  lk record;
  d record;
  a record;
  seq bigint;
  e timestamptz;
begin
  lk := kslate_lock(p_class, p_rid);
  d := kslate_decide_write(lk.rec_id, lk.locked_at, p_field, p_expect, p_premises, p_gate, p_author);
  if d.outcome is not null then
    if d.outcome <> 'invalid_checkpoint' then
      seq := kslate_add_history(p_class, p_rid, p_field, p_op, d.outcome, null, lk.rec_version, p_value, null, null,
                                p_author, p_strength, p_evidence, p_hist_expected, p_based_on, p_invocation, null);
    end if;
    return query select d.outcome, d.cur_version, lk.rec_version, false, d.cur_author, d.cur_value, d.cur_evidence,
                        floor(extract(epoch from d.cur_updated_at) * 1000)::bigint, d.moved, d.missing, null::bigint;
    return;
  end if;
  a := kslate_apply(p_class, p_rid, lk.rec_id, null, null, p_field, p_kind, p_op, d.cur_version + 1, p_value, p_author,
                    p_strength, p_evidence, p_based_on, p_invocation, null, null, p_hist_expected);
  if p_ttl_seconds is not null then
    e := kslate_extend_expiry(a.rec_id, p_ttl_seconds, lk.locked_at);
  end if;
  return query select 'applied'::text, d.cur_version + 1, a.record_version, a.created, null::text, null::json,
                      null::text, null::bigint, null::json, null::text[], floor(extract(epoch from e) * 1000)::bigint;
end
$fn$;
`;
