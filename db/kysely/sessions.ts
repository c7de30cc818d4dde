/**
 * The web console's sessions (migration 0009, docs/console.md): one statement each, every
 * time from the database clock so replicas agree on expiry.
 */
import { sql, type Kysely } from 'kysely';
import type { ConsoleSession, NewConsoleSession } from '../port.js';
import type { Database } from './schema.js';

export async function createConsoleSession(db: Kysely<Database>, s: NewConsoleSession): Promise<void> {
  // One statement: the new row, and the author's expired sessions and oldest live ones beyond
  // the cap go (the delete sees the table as it was before the insert, so it keeps
  // maxPerAuthor - 1 of the older ones). Two sign-ins of one author at the same instant may
  // each keep their own; the next sign-in trims again.
  await sql`
    with gone as (
      delete from console_sessions where author = ${s.author} and (expires_at <= now() or id = any(array(
        select id from console_sessions where author = ${s.author}
        order by created_at desc offset ${Math.max(0, s.maxPerAuthor - 1)})))
    )
    insert into console_sessions (id, author, sealed, expires_at)
    values (${s.id}, ${s.author}, ${s.sealed}, now() + make_interval(secs => ${s.ttlSeconds}))`.execute(db);
}

export async function readConsoleSession(db: Kysely<Database>, id: string): Promise<ConsoleSession | null> {
  const res = await sql<{ author: string; sealed: string; expires_at: Date }>`
    select author, sealed, expires_at from console_sessions where id = ${id} and expires_at > now()`.execute(db);
  const row = res.rows[0];
  return row ? { author: row.author, sealed: row.sealed, expiresAt: row.expires_at } : null;
}

export async function deleteConsoleSession(db: Kysely<Database>, id: string): Promise<void> {
  await sql`delete from console_sessions where id = ${id}`.execute(db);
}

export async function purgeConsoleSessions(db: Kysely<Database>, limit: number): Promise<number> {
  const res = await sql<{ n: number }>`
    with gone as (
      delete from console_sessions where id = any(array(
        select id from console_sessions where expires_at <= now() order by expires_at limit ${limit}))
      returning 1
    )
    select count(*)::int as n from gone`.execute(db);
  return res.rows[0]?.n ?? 0;
}
