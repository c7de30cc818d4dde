/**
 * What the worker's sweep needs (decisions §5). Frozen in time: never edit an applied migration.
 *
 * - `sweep_lease`: the sweep's lock as a row with an expiry (as River and graphile-worker
 *   lease jobs), not a session advisory lock: it holds through a transaction-mode pooler
 *   (PgBouncer, Neon's `-pooler` URL) and from a Workers cron with no long-lived connection,
 *   and a sweeper that dies leaves a lease that simply expires.
 * - `expired_records`: records the sweep has deleted whose history and entries are still
 *   being purged, in bounded chunks. A record with a long history must not make one
 *   statement unbounded, so deleting the record row (and its fields and checkpoints, a few
 *   rows each) is the atomic step, and its history rows up to `max_history_id` and its
 *   entries are purged afterwards. Readers ignore history rows at or below the watermark of
 *   the (class, rid), so the record is gone in one step as far as any request can see; a
 *   record created again under the same id starts with an empty history.
 * - `entries` no longer cascades from `records`: deleting a record with a million entries
 *   would be one unbounded statement. Record ids are never reused, so an entry of a deleted
 *   record is unreachable until the purge removes it.
 * - Partial indexes so the lapsed-lease step and its gauge read only task fields with a
 *   lease, never the whole fields table.
 */
export const version = 4;
export const name = 'sweep';

export const up = /* sql */ `
create table sweep_lease (
  name text primary key,
  holder text not null,
  expires_at timestamptz not null
);

create table expired_records (
  record_id bigint primary key,
  class text not null,
  rid text not null,
  max_history_id bigint not null,
  expired_at timestamptz not null default now()
);
create index expired_records_rid on expired_records (class, rid);

alter table entries drop constraint if exists entries_record_id_fkey;

create index fields_lease_due on fields (lease_expires_at) where owner is not null and not lease_lapsed;
create index fields_lapsed on fields (class) where lease_lapsed;
`;
