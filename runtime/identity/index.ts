/**
 * Turns an Authorization header into an Identity using the configured providers
 * (interface "Authentication", decisions §2).
 */
import { SvcError } from '../../handlers/errors.js';
import type { AuthAttempt, Identity, IdentityProvider } from '../../handlers/types.js';

/**
 * Authenticates `Authorization: Bearer <token>` against `providers` in order; the first
 * provider that accepts the token decides. Throws SvcError UNAUTHENTICATED otherwise.
 * A provider that throws (e.g. the cluster API is unreachable) propagates unchanged:
 * that is an outage, not a bad credential. `attempt` reaches every provider (see AuthAttempt).
 * Messages never contain the header's value.
 */
export async function authenticate(
  providers: IdentityProvider[],
  authorizationHeader: string | undefined,
  attempt?: AuthAttempt,
): Promise<Identity> {
  const header = authorizationHeader?.trim() ?? '';
  if (header === '') {
    throw new SvcError('UNAUTHENTICATED', 'missing Authorization header; send "Authorization: Bearer <token>"');
  }
  const m = /^(\S+)(?:\s+(.*))?$/s.exec(header);
  // The first word is not echoed either: a client that omits the scheme sends its token there.
  if (m === null || m[1]!.toLowerCase() !== 'bearer') {
    throw new SvcError('UNAUTHENTICATED', 'Authorization header is not a Bearer credential; send "Authorization: Bearer <token>"');
  }
  const token = (m[2] ?? '').trim();
  if (token === '') {
    throw new SvcError('UNAUTHENTICATED', 'Authorization header has an empty Bearer token; send "Authorization: Bearer <token>"');
  }
  for (const provider of providers) {
    const identity = await provider.authenticate(token, attempt);
    if (identity !== null) return identity;
  }
  const tried = providers.length > 0 ? providers.map((p) => p.kind).join(', ') : 'none configured';
  throw new SvcError('UNAUTHENTICATED', `credential not accepted by any identity provider (tried: ${tried})`);
}
