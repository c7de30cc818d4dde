/**
 * What the gateway checks of the PostgreSQL it is given (docs/ha.md): every new connection
 * must reach a writable primary, and that primary should confirm each commit on a
 * synchronous standby, or a failover can lose acknowledged writes.
 */
import type pg from 'pg';
import { READ_ONLY } from '../errors.js';

/**
 * pg-pool's `onConnect`: a new connection that reached a standby or a read-only server is
 * refused before any request uses it. During a failover the address the gateway is given (a
 * proxy, a DNS name, a Kubernetes Service) can still lead to the old primary, restarted as a
 * standby; refused here, the request answers 503 UNAVAILABLE and the pool connects afresh on
 * the next one. The error carries SQLSTATE 25006 (read_only_sql_transaction), what a standby
 * answers to a write, so it is classified like one: nothing of the request was sent.
 */
export async function requirePrimary(client: pg.ClientBase): Promise<void> {
  let row: { standby: boolean; ro: string } | undefined;
  try {
    ({
      rows: [row],
    } = await client.query<{ standby: boolean; ro: string }>(
      `select pg_is_in_recovery() as standby, current_setting('transaction_read_only') as ro`,
    ));
  } catch (e) {
    // The check itself failed (the server went away, froze): the request's statement was not
    // sent, so this is a connection that could not be made (SQLSTATE class 08).
    throw Object.assign(new Error(`could not check the new database connection: ${(e as Error).message}`), { code: '08001', cause: e });
  }
  if (row?.standby || row?.ro === 'on') {
    throw Object.assign(
      new Error(
        row.standby
          ? 'connected to a standby (the server is in recovery): --database-url must lead to the primary (a read-write service such as Patroni behind HAProxy, CloudNativePG <cluster>-rw); during a failover this passes once the new primary is reachable'
          : 'connected to a read-only server (transaction_read_only is on): --database-url must lead to a writable primary',
      ),
      { code: READ_ONLY },
    );
  }
}

/**
 * Why the primary's acknowledged commits could be lost in a failover, or null when a
 * synchronous standby confirms each one (synchronous_standby_names set and synchronous_commit
 * waiting for it). Read in the gateway's own session, so per-role and per-database settings
 * count.
 */
export async function replicationRisk(pool: pg.Pool): Promise<string | null> {
  const { rows } = await pool.query<{ names: string; commit: string }>(
    `select current_setting('synchronous_standby_names') as names, current_setting('synchronous_commit') as commit`,
  );
  const { names, commit } = rows[0];
  const consequence =
    'a failover can lose acknowledged writes and issue a field version twice (docs/ha.md). Configure synchronous replication, or pass --allow-async-replication (KSLATE_ALLOW_ASYNC_REPLICATION) if this database is never failed over or replicates synchronously below PostgreSQL.';
  if (commit === 'off' || commit === 'local') {
    return `synchronous_commit is ${commit} in the gateway's sessions, so commits do not wait for a synchronous standby: ${consequence}`;
  }
  if (names.trim() === '') return `The primary has no synchronous standby (synchronous_standby_names is empty): ${consequence}`;
  return null;
}
