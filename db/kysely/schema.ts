/**
 * The tables as the migrations leave them (db/migrations/), typed for Kysely's query builder:
 * a builder query naming a column that does not exist, or comparing it with a value of
 * another type, does not compile. The migrations stay the source of truth (they are frozen
 * SQL); this file follows them, by hand, column for column.
 *
 * Types are what the driver hands back with `types` (pool.ts): int8 columns as numbers,
 * timestamps as Dates, json and jsonb parsed, xid8 as text.
 */
import type { ColumnType, Generated } from 'kysely';
import type { StoredPremise } from '../port.js';

/** A column the database fills unless given (a default or an identity). */
type Defaulted<T> = ColumnType<T, T | undefined, T>;
/** JSON stored as `json`/`jsonb`: written as its text, read parsed. */
type Json<T = unknown> = ColumnType<T, string | null, string | null>;

export interface RecordsTable {
  id: Generated<number>;
  class: string;
  rid: string;
  record_version: Defaulted<number>;
  created_at: Defaulted<Date>;
  last_write_at: Defaulted<Date>;
  /** The change-log position of its last applied write (migration 0007). */
  log_tx: string | null;
}

export interface FieldsTable {
  /** The record's id (migration 0014): the distribution column on Citus. */
  rid: string;
  record_id: number;
  class: string;
  name: string;
  kind: string;
  value: Json;
  version: number;
  record_version: number;
  author: string | null;
  identity_strength: string | null;
  evidence: string | null;
  based_on: Json<StoredPremise[] | null>;
  invocation: Json<Record<string, unknown> | null>;
  updated_at: Date;
  owner: string | null;
  lease_expires_at: Date | null;
  lease_lapsed: Defaulted<boolean>;
  bytes: number | null;
}

export interface EntriesTable {
  /** The record's id (migration 0014): the distribution column on Citus. */
  rid: string;
  record_id: number;
  field: string;
  seq: number;
  value: Json;
  author: string;
  identity_strength: string | null;
  evidence: string | null;
  based_on: Json<StoredPremise[] | null>;
  invocation: Json<Record<string, unknown> | null>;
  created_at: Defaulted<Date>;
  bytes: number | null;
}

export interface CheckpointsTable {
  /** The record's id (migration 0014): the distribution column on Citus. */
  rid: string;
  record_id: number;
  role: string;
  checkpoint_id: number;
  document: Json<Record<string, unknown>>;
  record_version: number;
  author: string;
  saved_at: Defaulted<Date>;
}

export interface HistoryTable {
  id: Generated<number>;
  class: string;
  rid: string;
  field: string;
  op: string;
  version: number | null;
  record_version: number | null;
  value: Json;
  value_size: number | null;
  value_sha256: string | null;
  author: string;
  identity_strength: string | null;
  evidence: string | null;
  expected_version: number | null;
  based_on: Json<StoredPremise[] | null>;
  invocation: Json<Record<string, unknown> | null>;
  outcome: string;
  created_at: Defaulted<Date>;
  bytes: number | null;
  tx: Defaulted<string | null>;
  /** The row as the API's JSON (migration 0008), filled by a trigger. */
  rendered: Defaulted<string | null>;
}

export interface ReadSetsTable {
  author: string;
  scope: string;
  class: string;
  rid: string;
  field: string;
  version: number;
  read_at: Defaulted<Date>;
}

export interface ScopeOwnersTable {
  scope: string;
  author: string;
  last_used_at: Defaulted<Date>;
}

export interface ClassesTable {
  name: string;
  namespace: string;
  spec: Json;
  gone: Defaulted<boolean>;
  status: ColumnType<unknown, string | null | undefined, string | null>;
  updated_at: Defaulted<Date>;
}

export interface MetaTable {
  key: string;
  value: string;
}

export interface SweepLeaseTable {
  name: string;
  holder: string;
  expires_at: Date;
}

export interface ExpiredRecordsTable {
  record_id: number;
  class: string;
  rid: string;
  max_history_id: number;
  expired_at: Defaulted<Date>;
}

export interface ConsoleSessionsTable {
  /** The SHA-256 of the cookie's secret (migration 0009). */
  id: string;
  author: string;
  sealed: string;
  created_at: Defaulted<Date>;
  expires_at: Date;
}

export interface Database {
  records: RecordsTable;
  fields: FieldsTable;
  entries: EntriesTable;
  checkpoints: CheckpointsTable;
  history: HistoryTable;
  read_sets: ReadSetsTable;
  scope_owners: ScopeOwnersTable;
  classes: ClassesTable;
  kslate_meta: MetaTable;
  sweep_lease: SweepLeaseTable;
  expired_records: ExpiredRecordsTable;
  console_sessions: ConsoleSessionsTable;
}
