/**
 * Idempotency keys (migration 0011): take a key at the start of a write's transaction, store
 * its answer before the commit, and the sweep's purge and gauge.
 */
import { sql, type Kysely } from 'kysely';
import type { IdempotencyAnswer, IdempotencyTake } from '../port.js';
import type { Conn } from './conn.js';
import type { Database } from './schema.js';

const TAKE = {
  name: 'kslate_idempotency_take',
  text: 'select state, status, body from kslate_idempotency_take($1, $2, $3)',
};

const STORE = {
  name: 'kslate_idempotency_store',
  // A live row cannot exist (take found none under the key's lock); an expired one the sweep
  // has not purged yet is replaced.
  text: `insert into idempotency_keys (author, key, digest, status, body, expires_at)
    values ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))
    on conflict (author, key) do update set digest = excluded.digest, status = excluded.status, body = excluded.body,
      created_at = excluded.created_at, expires_at = excluded.expires_at`,
};

export async function takeIdempotencyKey(c: Conn, author: string, key: string, digest: string): Promise<IdempotencyTake> {
  const { rows } = await c.exec<{ state: IdempotencyTake['state']; status: number | null; body: string | null }>(TAKE.name, TAKE.text, [author, key, digest]);
  const r = rows[0];
  return r.state === 'replay' ? { state: 'replay', status: r.status!, body: r.body! } : { state: r.state as 'fresh' | 'in_use' | 'reused' };
}

export async function storeIdempotencyKey(c: Conn, a: IdempotencyAnswer): Promise<void> {
  await c.exec(STORE.name, STORE.text, [a.author, a.key, a.digest, a.status, a.body, a.ttlSeconds]);
}

/** Delete up to `limit` expired keys, oldest first; returns how many. */
export async function purgeIdempotencyKeys(db: Kysely<Database>, limit: number): Promise<number> {
  const res = await sql`
    delete from idempotency_keys where (author, key) in (
      select author, key from idempotency_keys where expires_at <= now() order by expires_at limit ${limit})`.execute(db);
  return Number(res.numAffectedRows ?? 0);
}

export async function countIdempotencyKeys(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int8 as n from idempotency_keys`.execute(db);
  return Number(rows[0]?.n ?? 0);
}
