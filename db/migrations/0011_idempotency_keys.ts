/**
 * Idempotency keys (issue 33, item 1; docs/api.md "Retrying a write"). Frozen in time: never
 * edit an applied migration.
 *
 * A write sent with an `Idempotency-Key` stores its answer here in the same transaction as the
 * write itself, so an applied write and its key commit or vanish together: a retry after a lost
 * acknowledgement finds the answer and replays it instead of writing again.
 *
 * - keyed by (author, key): the caller's identity and the key it chose; two identities' keys
 *   never meet.
 * - `digest`: SHA-256 of the request (operation, record, field, body); the same key with
 *   another request is refused (IDEMPOTENCY_KEY_REUSED).
 * - `status`, `body`: the answer as first sent (2xx and 4xx; 5xx are never stored).
 * - `expires_at`: `--idempotency-ttl` after the write (database clock); the sweep deletes
 *   expired rows in bounded batches (`expires_at` index), and a lookup ignores them before.
 *
 * `kslate_idempotency_take` is the first statement of the write's transaction: it takes a
 * transaction-scoped advisory lock on the key without waiting (a second request with the key
 * while the first runs is told IN_USE, not queued behind it), then reads the stored answer.
 */
export const version = 11;
export const name = 'idempotency_keys';

export const up = /* sql */ `
create table idempotency_keys (
  author text not null,
  key text not null,
  digest text not null,
  status integer not null,
  body text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  primary key (author, key)
);
create index idempotency_keys_expires on idempotency_keys (expires_at);

-- 'in_use' (another transaction holds the key), 'fresh' (no live answer), 'replay' (same
-- digest: status and body), 'reused' (another digest).
create function kslate_idempotency_take(p_author text, p_key text, p_digest text,
  out state text, out status integer, out body text)
language plpgsql volatile as $$
declare
  r record;
begin
  if not pg_try_advisory_xact_lock(hashtextextended(p_author || chr(10) || p_key, 11)) then
    state := 'in_use';
    return;
  end if;
  -- A statement of its own: its snapshot is taken after the lock, so an answer committed by
  -- the transaction that held it is seen.
  select k.digest, k.status, k.body into r from idempotency_keys k
   where k.author = p_author and k.key = p_key and k.expires_at > now();
  if not found then
    state := 'fresh';
  elsif r.digest = p_digest then
    state := 'replay'; status := r.status; body := r.body;
  else
    state := 'reused';
  end if;
end $$;
`;
