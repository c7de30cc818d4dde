/**
 * `kslate_idempotency_wait(author, key)`: wait until no transaction holds an idempotency key's
 * lock (the transaction-scoped advisory lock of migrations 0011 and 0016, the same lock id as
 * `kslate_idempotency_begin` takes), then return, holding nothing: the lock is taken and
 * released with the statement's own transaction. Frozen in time: never edit an applied
 * migration.
 *
 * For the write batches' fallback (db/kysely/batch.ts): when a batch statement raises, the
 * server sends the error to the client before its backend has aborted the transaction and
 * released its locks (PostgreSQL reports an error, then aborts), and the driver answers the
 * statement at the error. A keyed write of that batch, sent again alone on another connection
 * at once, could then find its own key still locked by the batch being rolled back and be
 * answered IDEMPOTENCY_KEY_IN_USE for a key nobody else holds. The fallback waits here first.
 * A key held by another request proper is waited for too, and the write then answers what it
 * would have answered sent after that request: a replay, REUSED or a fresh run.
 *
 * Not distributed on Citus (batches are not sent there); created on every node as any function.
 */
export const version = 26;
export const name = 'idempotency_wait';

export const up = /* sql */ `
create function kslate_idempotency_wait(p_author text, p_key text) returns void
language sql volatile as $fn$
  select pg_advisory_xact_lock(hashtextextended(p_author || chr(10) || p_key, 11))
$fn$;
`;
