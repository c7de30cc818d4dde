import { StorageFault } from './port.js';

/** SQLSTATE classes and driver errors that mean "the database cannot be reached". */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'EPIPE',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '53300', // too_many_connections
  '08000',
  '08003',
  '08006',
  '08001',
  '08004',
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

export type DbFault = 'unreachable' | 'schema' | 'data' | 'timeout' | null;

/** Classify a driver error; anything else is a real fault (INTERNAL). */
export function classifyDbError(e: unknown): DbFault {
  if (!e || typeof e !== 'object') return null;
  const err = e as { code?: unknown; message?: unknown };
  const code = typeof err.code === 'string' ? err.code : '';
  if (SCHEMA_CODES.has(code)) return 'schema';
  if (DATA_CODES.has(code)) return 'data';
  if (TIMEOUT_CODES.has(code)) return 'timeout';
  if (UNREACHABLE_CODES.has(code) || code.startsWith('08')) return 'unreachable';
  const msg = typeof err.message === 'string' ? err.message : '';
  // pg's client-side query_timeout (node_modules/pg/lib/client.js): the server did not answer at all.
  if (msg === 'Query read timeout') return 'timeout';
  if (
    /Connection terminated|connect ECONNREFUSED|timeout exceeded when trying to connect|Client has encountered a connection error|Connection ended unexpectedly|the database system is (starting up|shutting down)/i.test(
      msg,
    )
  ) {
    return 'unreachable';
  }
  return null;
}

/** Re-throw driver faults as a StorageFault (the handlers map it to 503 UNAVAILABLE or 400 MALFORMED); leave everything else alone. */
export function toStorageFault(e: unknown, onSchemaMissing?: () => void): unknown {
  const fault = classifyDbError(e);
  if (fault === null) return e;
  if (fault === 'schema') onSchemaMissing?.();
  return new StorageFault(fault, e, fault === 'schema' && onSchemaMissing !== undefined);
}
