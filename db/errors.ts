import { StorageFault } from './port.js';

/**
 * Driver errors and SQLSTATEs that mean the request never reached the database: refused or
 * failed connection attempts. Nothing was sent, so retrying is safe.
 */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EHOSTUNREACH',
  '57P03', // cannot_connect_now (starting up, shutting down)
  '53300', // too_many_connections
  '08001', // sqlclient_unable_to_establish_sqlconnection
  '08004', // sqlserver_rejected_establishment_of_sqlconnection
  '25006', // read_only_sql_transaction: a standby (or a read-only server) refused the statement
]);

/** SQLSTATE read_only_sql_transaction: what a standby answers to a write (db/kysely/primary.ts). */
export const READ_ONLY = '25006';

/** pg's client-side query timeout (node_modules/pg/lib/client.js, `query_timeout`). */
export const CLIENT_TIMEOUT_MESSAGE = 'Query read timeout';

const CONNECTING = Symbol('kslate.connecting');

/**
 * Mark an error raised while a connection was being made (before any statement of a request
 * was sent): classified unreachable, whatever its message. A proxy with no server behind it
 * (HAProxy during a failover) accepts the TCP connection and closes it, which pg reports as
 * "Connection terminated unexpectedly", the same words as a connection lost under a query.
 */
export function connectFailed(e: unknown): unknown {
  if (e && typeof e === 'object') Object.defineProperty(e, CONNECTING, { value: true });
  return e;
}

/**
 * Whether a pooled connection that gave this error must be ended rather than reused: the
 * client-side timeout leaves its query active on the connection, and a connection that
 * reached a standby (or a server turned read-only) refuses every write it would carry.
 */
export function discardsConnection(e: unknown): boolean {
  if (!e || typeof e !== 'object') return false;
  const err = e as { code?: unknown; message?: unknown };
  return err.code === READ_ONLY || err.message === CLIENT_TIMEOUT_MESSAGE;
}

/**
 * Those that mean a connection ended while it was in use: the statement may have been sent,
 * and even committed with its answer lost. Any other connection error (SQLSTATE class 08)
 * counts as this too: when in doubt, the caller must not assume a write did not happen.
 */
const LOST_CODES = new Set([
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  '57P01', // admin_shutdown: the backend was terminated
  '57P02', // crash_shutdown
]);

/** Missing relation or function: the schema is absent or being re-applied. */
const SCHEMA_CODES = new Set(['42P01', '42883', '3F000']);

/** Text, JSON or numbers PostgreSQL cannot store; the handlers refuse them first, this is the net below. */
const DATA_CODES = new Set(['22P05', '22021', '22025', '22032', '22003']);

/** The request's database budget (--db-timeout) ran out, on the server or in the client. */
const TIMEOUT_CODES = new Set([
  '57014', // query_canceled: statement_timeout
  '55P03', // lock_not_available: lock_timeout
  '25P03', // idle_in_transaction_session_timeout
]);

export type DbFault = 'unreachable' | 'lost' | 'schema' | 'data' | 'timeout' | null;

/** Classify a driver error; anything else is a real fault (INTERNAL). */
export function classifyDbError(e: unknown): DbFault {
  if (!e || typeof e !== 'object') return null;
  const err = e as { code?: unknown; message?: unknown };
  const code = typeof err.code === 'string' ? err.code : '';
  if (SCHEMA_CODES.has(code)) return 'schema';
  if (DATA_CODES.has(code)) return 'data';
  if (TIMEOUT_CODES.has(code)) return 'timeout';
  if ((e as { [CONNECTING]?: boolean })[CONNECTING]) return 'unreachable';
  // A socket error while connecting (Node's `syscall: 'connect'`, e.g. connect ETIMEDOUT).
  if (UNREACHABLE_CODES.has(code) || (code.startsWith('E') && (e as { syscall?: unknown }).syscall === 'connect')) return 'unreachable';
  if (LOST_CODES.has(code) || code.startsWith('08')) return 'lost';
  const msg = typeof err.message === 'string' ? err.message : '';
  // pg's client-side query_timeout: the statement was sent and the server did not answer. It
  // may still commit (a commit waiting for its synchronous standby completes locally once the
  // client is gone), so the outcome is unknown, as when the connection is lost.
  if (msg === CLIENT_TIMEOUT_MESSAGE) return 'lost';
  // pg's messages (node_modules/pg/lib/client.js, pg-pool): connecting failed, or a client
  // already broken was asked to query (it sends nothing).
  if (
    /connect ECONNREFUSED|timeout exceeded when trying to connect|Connection terminated due to connection timeout|Client has encountered a connection error and is not queryable|the database system is (starting up|shutting down)/i.test(
      msg,
    )
  ) {
    return 'unreachable';
  }
  // The connection ended under a query in flight.
  if (/Connection terminated|Connection ended unexpectedly/i.test(msg)) return 'lost';
  // Citus, a shard move's switch-over (docs/scale-out.md): a write delegated to the shard's
  // old node reached it after the shard had moved, and its statements, no longer local there,
  // were refused as nested distributed queries. The transaction rolled back, but the answer is
  // 503 with outcome unknown (never wrong): sent again with its Idempotency-Key it reaches the
  // new node and gets its one answer.
  if (/cannot execute a distributed query from a query on a shard/.test(msg)) return 'lost';
  return null;
}

/** Re-throw driver faults as a StorageFault (the handlers map it to 503 UNAVAILABLE or 400 MALFORMED); leave everything else alone. */
export function toStorageFault(e: unknown, onSchemaMissing?: () => void): unknown {
  const fault = classifyDbError(e);
  if (fault === null) return e;
  if (fault === 'schema') onSchemaMissing?.();
  return new StorageFault(fault, e, fault === 'schema' && onSchemaMissing !== undefined);
}
