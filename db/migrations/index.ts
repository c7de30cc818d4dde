/**
 * Ordered migrations, bundled as modules (no file system at run time, so they bundle for
 * Workers too). Append new ones; never reorder or edit applied ones.
 */
import * as m0001 from './0001_init.js';
import * as m0002 from './0002_lock_function.js';
import * as m0003 from './0003_row_bytes.js';
import * as m0004 from './0004_sweep.js';
import * as m0005 from './0005_try_write.js';
import * as m0006 from './0006_claim.js';
import * as m0007 from './0007_change_log.js';
import * as m0008 from './0008_history_rendered.js';
import * as m0009 from './0009_console_sessions.js';
import * as m0010 from './0010_write_functions.js';
import * as m0011 from './0011_idempotency_keys.js';
import * as m0012 from './0012_transactions.js';
import * as m0013 from './0013_retention.js';
import * as m0014 from './0014_citus.js';
import * as m0015 from './0015_one_rule_per_write.js';
import * as m0016 from './0016_keyed_writes.js';
import * as m0017 from './0017_citus_order_sweep.js';
import * as m0018 from './0018_retention_by_record.js';
import * as m0019 from './0019_transaction_ttl.js';
import * as m0020 from './0020_write_batch.js';
import * as m0021 from './0021_autovacuum.js';
import * as m0022 from './0022_keyed_batch.js';
import * as m0024 from './0024_citus_history_ids.js';
import * as m0025 from './0025_history_time_truncated.js';
import * as m0026 from './0026_idempotency_wait.js';
import * as m0027 from './0027_log_group.js';

export interface Migration {
  version: number;
  name: string;
  up: string;
}

export const migrations: Migration[] = [m0001, m0002, m0003, m0004, m0005, m0006, m0007, m0008, m0009, m0010, m0011, m0012, m0013, m0014, m0015, m0016, m0017, m0018, m0019, m0020, m0021, m0022, m0024, m0025, m0026, m0027];

/** The schema version this build expects; /readyz is 200 only when it is present. */
export const SCHEMA_VERSION = migrations[migrations.length - 1].version;
