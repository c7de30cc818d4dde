/**
 * The connection pool: node-postgres with the timeouts, the client that survives a client-side
 * timeout, and named statements described once (named-query.ts). The Workers adapter builds
 * its pool from `poolConfig` too.
 */
import pg from 'pg';
import pgUtils from 'pg/lib/utils.js';
import { CLIENT_TIMEOUT_MESSAGE, connectFailed, discardsConnection } from '../errors.js';
import { NamedQuery, type NamedResult, type Shapes } from './named-query.js';
import { requirePrimary } from './primary.js';

// int8 and numeric counters fit in a JS number for any realistic store (2^53).
export const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

export interface PgOptions {
  connectionString: string;
  max?: number;
  /**
   * Budget for one statement, a lock wait and a transaction left idle, enforced by the server
   * (statement_timeout, lock_timeout, idle_in_transaction_session_timeout) and, a second later,
   * by the client too: a frozen server never fires its own timeouts. Default 10 s.
   */
  timeoutMs?: number;
  /** Called when a statement finds the schema missing, so the runtime can re-apply it. */
  onSchemaMissing?: () => void;
  onPoolError?: (e: Error) => void;
  /** application_name of the sessions (at most 63 bytes). */
  applicationName?: string;
  /** A standby serving reads (db/kysely/replicas.ts): its connections are not required to reach a primary. */
  standby?: boolean;
}

/**
 * Cancel the statements still running in this process's sessions (named `applicationName`),
 * from a connection of `pool`: a write cut off at shutdown must not commit afterwards.
 * Returns how many were cancelled.
 */
export async function cancelOwnStatements(pool: pg.Pool, applicationName: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `select count(*) filter (where pg_cancel_backend(pid)) as n from pg_stat_activity
      where application_name = $1 and pid <> pg_backend_pid() and state = 'active'`,
    [applicationName],
  );
  return rows[0]?.n ?? 0;
}

/** How often a backend checks that its client is still connected (client_connection_check_interval). */
export const CLIENT_CHECK_MS = 1_000;

export { CLIENT_TIMEOUT_MESSAGE };

/**
 * pg's `query_timeout` answers the caller but leaves the timed-out query active on the
 * connection, so the next query would queue behind it; a connection on a server turned
 * read-only refuses every write. Such a client is ended here (discardsConnection; pg ends
 * a client with an active query by destroying its socket, without an 'error' event), and the
 * pool drops an ending client when it is released instead of handing it out again.
 */
class TimeoutSafeClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    // A checked-out client whose session the server ends (idle_in_transaction_session_timeout)
    // emits 'error' with no pool listener attached; the query in flight gets the error anyway,
    // so this listener only keeps the process from crashing.
    this.on('error', () => undefined);
  }

  /** A failure to connect is told apart from one under a statement (connectFailed). */
  override connect(...args: unknown[]): any {
    const done = args[0];
    if (typeof done === 'function') {
      return super.connect(((err: Error | null, ...rest: unknown[]) => (done as (...a: unknown[]) => void)(err && connectFailed(err), ...rest)) as never);
    }
    return super.connect().catch((e: unknown) => Promise.reject(connectFailed(e)));
  }

  override query(...args: unknown[]): any {
    const onTimeout = (e: unknown) => {
      if (discardsConnection(e)) void this.end().catch(() => undefined);
    };
    const last = args[args.length - 1];
    if (typeof last === 'function') {
      args[args.length - 1] = (err: unknown, res: unknown) => {
        if (err) onTimeout(err);
        (last as (err: unknown, res: unknown) => void)(err, res);
      };
    }
    const out = (super.query as (...a: unknown[]) => unknown)(...args);
    if (out && typeof (out as Promise<unknown>).then === 'function') (out as Promise<unknown>).catch(onTimeout);
    return out;
  }
}

/**
 * The pool settings of `createPool` without the client class: also what the Workers adapter
 * gives `@neondatabase/serverless`'s pg-compatible Pool.
 */
export function poolConfig(opts: PgOptions): pg.PoolConfig {
  const timeoutMs = Math.max(1, Math.round(opts.timeoutMs ?? 10_000));
  return {
    connectionString: opts.connectionString,
    max: opts.max ?? 20,
    connectionTimeoutMillis: Math.min(5_000, timeoutMs),
    idleTimeoutMillis: 30_000,
    statement_timeout: timeoutMs,
    lock_timeout: timeoutMs,
    idle_in_transaction_session_timeout: timeoutMs,
    // After the server's own timeouts, so a live server answers 57014/55P03 first.
    query_timeout: timeoutMs + 1_000,
    // Names the process's sessions in pg_stat_activity (and lets it cancel its own on exit).
    ...(opts.applicationName ? { application_name: opts.applicationName } : {}),
    types,
  };
}

export function createPool(opts: PgOptions): pg.Pool {
  const pool = new pg.Pool({
    ...poolConfig(opts),
    Client: TimeoutSafeClient,
    // A write is one autocommitted statement (kslate_write, kslate_claim): were the connection lost
    // while the statement waits for a row lock (the process killed, the client ended after a
    // client-side timeout), the server would still commit it when the lock comes, unseen.
    // With this (PostgreSQL 14+) the backend checks its client every second while it runs or
    // waits and aborts the statement once the client is gone. A startup parameter, like the
    // timeouts, so it costs no round trip.
    options: `-c client_connection_check_interval=${CLIENT_CHECK_MS}`,
    // A new connection must reach a writable primary (a failover can leave the address
    // leading to a standby for a while): refused here, it is never handed to a request.
    ...(opts.standby ? {} : { onConnect: requirePrimary }),
  });
  // An idle client losing its server emits 'error' on the pool; without a listener Node
  // would crash. The pool replaces the client on next use, which is how we recover.
  pool.on('error', (e) => opts.onPoolError?.(e));
  return pool;
}

/**
 * A named statement on a node-postgres pool made by createPool (its type parsers), described
 * on its first run only (named-query.ts). The name must always go with the same text.
 */
export function runNamed<R>(pool: pg.Pool, name: string, text: string, values: unknown[]): Promise<NamedResult<R>> {
  return pool.query(namedQuery<R>(pool, name, text, values) as never) as Promise<NamedResult<R>>;
}

/**
 * The query runNamed sends, for a client of `pool`. Descriptions are kept per pool: one pool
 * is one database, and two databases may answer one statement text with different columns.
 */
export function namedQuery<R>(pool: pg.Pool, name: string, text: string, values: unknown[]): NamedQuery<R> {
  let shapes = shapesByPool.get(pool);
  if (shapes === undefined) shapesByPool.set(pool, (shapes = new Map()));
  return new NamedQuery<R>(name, text, values, shapes, types, pgUtils.prepareValue);
}
const shapesByPool = new WeakMap<pg.Pool, Shapes>();
