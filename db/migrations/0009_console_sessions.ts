/**
 * The web console's sign-in sessions (issue 31, item 13; docs/console.md "Signing in").
 * Frozen in time: never edit an applied migration.
 *
 * The console's cookie holds an opaque session secret, never the credential. A gateway is
 * stateless and many replicas share this database, so the session lives here:
 *
 * - `id`: the SHA-256 of the cookie's secret (hex). The secret itself is never stored, so
 *   reading this table gives nobody a working cookie.
 * - `sealed`: the credential the person pasted, AES-GCM encrypted under a key derived from
 *   the cookie's secret (base64url of iv || ciphertext). Only a request carrying the cookie
 *   can open it; each console request re-authenticates the opened credential through the
 *   identity providers, so a key removed from the key file, an expired OIDC token or a
 *   service-account token the cluster no longer accepts ends the session at the next page.
 * - `author`: the identity the credential had at sign-in: the per-identity cap counts by it,
 *   and an operator can see (and delete) whose sessions are open.
 * - `expires_at`: the session's lifetime (`--ui-session-ttl`), judged by the database clock
 *   so every replica agrees; the sweep deletes expired rows in batches (`expires_at` index).
 */
export const version = 9;
export const name = 'console_sessions';

export const up = /* sql */ `
create table console_sessions (
  id text primary key,
  author text not null,
  sealed text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index console_sessions_expires on console_sessions (expires_at);
create index console_sessions_author on console_sessions (author, created_at);
`;
