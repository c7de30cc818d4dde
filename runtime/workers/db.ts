/**
 * The database pool of one Workers request (or cron event): Workers cannot share sockets
 * between requests, so each gets its own small pool, ended with `ctx.waitUntil(pool.end())`.
 * Two drivers, both pg-compatible, so the same `PgDb` (Kysely's PostgresDialect) runs on
 * either: `pg` over TCP sockets (a direct URL or a Hyperdrive binding) and
 * `@neondatabase/serverless`'s `Pool` over WebSocket. Never Neon's HTTP `neon()`: it has no
 * interactive transactions, and every write is lock, check, apply, commit.
 */
import { neonConfig, Pool as NeonPool } from '@neondatabase/serverless';
import type pg from 'pg';
import { createPool, poolConfig, type PgOptions } from '../../db/kysely/index.js';
import type { WorkersEnv } from './env.js';

/** Workers allow six simultaneous outgoing connections per request; one stays free for fetch (OIDC keys). */
export const MAX_CONNECTIONS = 5;

export type Driver = 'pg' | 'neon';

/** The driver and URL `env` selects; throws with what to set when it selects none. */
export function dbTarget(env: WorkersEnv): { driver: Driver; url: string } {
  const driver = (env.KSLATE_DB_DRIVER ?? 'pg').trim() || 'pg';
  if (driver !== 'pg' && driver !== 'neon') {
    throw new Error(`KSLATE_DB_DRIVER is "${driver}"; use pg (TCP, direct or Hyperdrive) or neon (@neondatabase/serverless over WebSocket).`);
  }
  // Hyperdrive pools on Cloudflare's side and speaks PostgreSQL over TCP: pg only.
  const url = driver === 'pg' && env.HYPERDRIVE ? env.HYPERDRIVE.connectionString : env.DATABASE_URL;
  if (!url) {
    throw new Error(
      driver === 'pg'
        ? 'No database: bind a Hyperdrive configuration as HYPERDRIVE, or `wrangler secret put DATABASE_URL`.'
        : 'No database: `wrangler secret put DATABASE_URL` with the Neon connection string.',
    );
  }
  return { driver, url };
}

/** A pool of at most MAX_CONNECTIONS for one request; the caller ends it. */
export function openPool(env: WorkersEnv, opts: Omit<PgOptions, 'connectionString'> = {}): pg.Pool {
  const { driver, url } = dbTarget(env);
  const settings: PgOptions = { ...opts, connectionString: url, max: Math.min(opts.max ?? MAX_CONNECTIONS, MAX_CONNECTIONS) };
  if (driver === 'pg') return createPool(settings);
  configureNeon(env);
  const pool = new NeonPool(poolConfig(settings) as ConstructorParameters<typeof NeonPool>[0]);
  pool.on('error', (e: Error) => opts.onPoolError?.(e));
  // Same pg Pool interface (it is node-postgres' own, over a WebSocket), so PgDb takes it as one.
  return pool as unknown as pg.Pool;
}

/**
 * neonConfig is global to the isolate. Only a test or development setup sets
 * KSLATE_NEON_WS_PROXY: a plain PostgreSQL behind a WebSocket-to-TCP proxy, unencrypted.
 */
function configureNeon(env: WorkersEnv): void {
  const proxy = env.KSLATE_NEON_WS_PROXY;
  if (!proxy) return;
  neonConfig.wsProxy = (host, port) => `${proxy}/v2?address=${host}:${port}`;
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineConnect = false;
  neonConfig.pipelineTLS = false;
}
