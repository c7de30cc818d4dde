/**
 * Initial schema. Frozen in time: never edit an applied migration, add a new one.
 *
 * Shape, for 10M records and 100M history rows:
 * - `records` is the row a write locks (FOR UPDATE) and whose record_version it raises.
 * - `fields` holds the current value of each written field, one row per (record, field);
 *   the query index is (class, name, md5(value::jsonb::text), record_id) so that a
 *   one-filter query walks the index in creation order (record ids rise with creation)
 *   and never scans the class. md5 keeps index entries small whatever the value size.
 * - Values, invocations, documents and class specs are `json`, not `jsonb`: they are
 *   stored and returned as written (key order included); comparisons cast to jsonb.
 * - `entries` keeps append-field entries, one row each, so appending never rewrites earlier ones.
 * - `history` is keyed by (class, rid) rather than record id because rejected writes on a
 *   record that does not exist leave rows too; the identity id is the row's `seq`.
 */
export const version = 1;
export const name = 'init';

export const up = /* sql */ `
create table kslate_meta (
  key text primary key,
  value text not null
);
-- HMAC key for opaque cursors, shared by every replica (decisions §4).
insert into kslate_meta (key, value)
  values ('cursor_key', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));

create table classes (
  name text primary key,
  namespace text not null,
  spec json not null,
  gone boolean not null default false,
  status jsonb,
  updated_at timestamptz not null default now()
);

create table records (
  id bigint generated always as identity primary key,
  class text not null,
  rid text not null,
  record_version bigint not null default 0,
  created_at timestamptz not null default now(),
  last_write_at timestamptz not null default now(),
  constraint records_class_rid unique (class, rid)
);
create index records_class_id on records (class, id);
create index records_class_last_write on records (class, last_write_at);

create table fields (
  record_id bigint not null references records (id) on delete cascade,
  class text not null,
  name text not null,
  kind text not null,
  value json,
  version bigint not null,
  record_version bigint not null,
  author text,
  identity_strength text,
  evidence text,
  based_on jsonb,
  invocation json,
  updated_at timestamptz not null,
  owner text,
  lease_expires_at timestamptz,
  lease_lapsed boolean not null default false,
  primary key (record_id, name)
);
create index fields_value on fields (class, name, md5((value::jsonb)::text), record_id) where value is not null;
create index fields_owner on fields (class, name, owner, record_id) where owner is not null;

create table entries (
  record_id bigint not null references records (id) on delete cascade,
  field text not null,
  seq bigint not null,
  value json not null,
  author text not null,
  identity_strength text,
  evidence text,
  based_on jsonb,
  invocation json,
  created_at timestamptz not null default now(),
  primary key (record_id, field, seq)
);

create table checkpoints (
  record_id bigint not null references records (id) on delete cascade,
  role text not null,
  checkpoint_id bigint not null,
  document json not null,
  record_version bigint not null,
  author text not null,
  saved_at timestamptz not null default now(),
  primary key (record_id, role)
);

create table history (
  id bigint generated always as identity primary key,
  class text not null,
  rid text not null,
  field text not null,
  op text not null,
  version bigint,
  record_version bigint,
  value json,
  value_size integer,
  value_sha256 text,
  author text not null,
  identity_strength text,
  evidence text,
  expected_version bigint,
  based_on jsonb,
  invocation json,
  outcome text not null,
  created_at timestamptz not null default now()
);
create index history_record on history (class, rid, id desc);
create index history_record_field on history (class, rid, field, id desc);

-- Reads per (identity, scope) for premise inference (decisions §3); rows older than the
-- inference window are ignored and swept.
create table read_sets (
  author text not null,
  scope text not null,
  class text not null,
  rid text not null,
  field text not null,
  version bigint not null,
  read_at timestamptz not null default now(),
  primary key (author, scope, class, rid, field)
);
create table scope_owners (
  scope text primary key,
  author text not null,
  last_used_at timestamptz not null default now()
);
`;
