/**
 * The `oidc` identity provider (decisions §2): a JWT from one configured issuer, verified
 * against the issuer's JWKS with jose. Author `oidc:<claim>` (default claim `sub`), strength
 * `issuer-declared`.
 *
 * - A token that is not a JWT, or whose (unverified) `iss` is another issuer, is not ours:
 *   null, and the next provider of `--identity` is tried.
 * - Ours with a bad signature, the wrong audience, an unknown key, an algorithm outside the
 *   allowlist, or expired: 401 with a message saying which (never the token).
 * - The issuer's discovery document is fetched at start and retried until it answers;
 *   meanwhile the provider is not ready (/readyz 503) and tokens of our issuer get 503
 *   UNAVAILABLE. A JWKS fetch that fails is 503 too, never 401.
 * - Keys rotate: an unknown `kid` refetches the key set once, at most once per cooldown; a
 *   failed fetch backs off, and meanwhile an unknown `kid` is no key (jwks.ts).
 */
import { decodeJwt, decodeProtectedHeader, errors, jwtVerify, type JWTPayload } from 'jose';
import type { Logger } from '../../handlers/context.js';
import { SvcError } from '../../handlers/errors.js';
import type { Identity, IdentityProvider } from '../../handlers/types.js';
import { IssuerKeys, KeysUnavailable } from './jwks.js';

/** Asymmetric algorithms only: never `none`, never HS* (a shared secret would make any holder an issuer). */
export const OIDC_ALGORITHMS = ['RS256', 'ES256', 'PS256', 'EdDSA'];
const CLOCK_TOLERANCE_S = 30;
const FETCH_TIMEOUT_MS = 5_000;
const MAX_CLAIM_CHARS = 256;

export interface OidcOptions {
  issuer: string;
  audience: string;
  /** Skip discovery and use this JWKS. */
  jwksUrl?: string;
  /** The claim that names the caller (default `sub`). */
  usernameClaim: string;
  /** Least time between JWKS refetches for an unknown key id (default 30 s; also the longest backoff after failures). */
  jwksCooldownMs?: number;
  /** Clock of the key set's cooldown and backoff (default Date.now). */
  now?: () => number;
}

const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export class OidcProvider implements IdentityProvider {
  readonly kind = 'oidc';
  /** The issuer: clients sign in there (the gateway's protected resource metadata names it). */
  readonly authorizationServer: string;
  private keys: IssuerKeys | null = null;
  private problem: string;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;

  private constructor(
    private readonly opts: OidcOptions,
    private readonly log: Logger,
    private readonly fetchJson: (url: string) => Promise<unknown>,
  ) {
    this.authorizationServer = opts.issuer;
    this.problem = `The OIDC issuer ${opts.issuer} has not been reached yet; the gateway keeps trying.`;
  }

  /** Start the provider: discovery now, and in the background until it answers. Never throws for an unreachable issuer. */
  static async open(opts: OidcOptions, log: Logger, fetchJson = defaultFetchJson): Promise<OidcProvider> {
    const p = new OidcProvider(opts, log, fetchJson);
    await p.discover(1_000);
    return p;
  }

  /** Why the provider cannot verify tokens yet (for /readyz), or null when it can. */
  notReady(): string | null {
    return this.keys ? null : this.problem;
  }

  close(): void {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
  }

  private async discover(nextDelayMs: number): Promise<void> {
    try {
      let jwksUri = this.opts.jwksUrl;
      if (!jwksUri) {
        const url = `${this.opts.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
        const doc = (await this.fetchJson(url)) as { issuer?: unknown; jwks_uri?: unknown };
        if (typeof doc?.jwks_uri !== 'string') throw new Error(`${url} has no jwks_uri`);
        if (doc.issuer !== this.opts.issuer) {
          throw new Error(`${url} names issuer ${JSON.stringify(doc.issuer)}, not ${this.opts.issuer}; set --oidc-issuer to exactly the issuer's value`);
        }
        jwksUri = doc.jwks_uri;
      }
      this.keys = new IssuerKeys({
        url: jwksUri,
        issuer: this.opts.issuer,
        fetchJson: this.fetchJson,
        log: this.log,
        ...(this.opts.jwksCooldownMs !== undefined ? { cooldownMs: this.opts.jwksCooldownMs } : {}),
        ...(this.opts.now ? { now: this.opts.now } : {}),
      });
      this.log.info('OIDC issuer discovered', { issuer: this.opts.issuer, jwks_uri: jwksUri });
    } catch (e) {
      this.problem = `The OIDC issuer ${this.opts.issuer} cannot be reached (${(e as Error).message}); the gateway keeps trying.`;
      this.log.warn('OIDC discovery failed; tokens of this issuer are answered 503 until it succeeds', {
        issuer: this.opts.issuer,
        error: (e as Error).message,
        retry_in_ms: nextDelayMs,
      });
      if (this.closed) return;
      this.retry = setTimeout(() => void this.discover(Math.min(nextDelayMs * 2, 30_000)), nextDelayMs);
      // Node: do not keep the process alive for it. Workers' timers may have no unref.
      this.retry.unref?.();
    }
  }

  async authenticate(token: string): Promise<Identity | null> {
    if (!JWT.test(token)) return null;
    let claims: JWTPayload;
    try {
      claims = decodeJwt(token);
      decodeProtectedHeader(token);
    } catch {
      return null; // not a JWT after all: not ours
    }
    if (claims.iss !== this.opts.issuer) return null; // another issuer's token: the next provider's
    if (!this.keys) throw new SvcError('UNAVAILABLE', this.problem);
    const claim = this.opts.usernameClaim;
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.keys.getKey, {
        issuer: this.opts.issuer,
        audience: this.opts.audience,
        algorithms: OIDC_ALGORITHMS,
        clockTolerance: CLOCK_TOLERANCE_S,
        requiredClaims: ['exp', claim],
      }));
    } catch (e) {
      throw this.refusal(e);
    }
    const name = payload[claim];
    if (typeof name !== 'string' || name === '' || name.length > MAX_CLAIM_CHARS) {
      throw new SvcError('UNAUTHENTICATED', `The token's "${claim}" claim must be a non-empty string of at most ${MAX_CLAIM_CHARS} characters.`);
    }
    return { author: `oidc:${name}`, provider: 'oidc', name, strength: 'issuer-declared' };
  }

  /** What a failed verification means for the caller: 401 saying which check failed, or 503 when the keys cannot be had. */
  private refusal(e: unknown): SvcError {
    const bad = (why: string) => new SvcError('UNAUTHENTICATED', `OIDC token refused: ${why}.`);
    // Logged by the key set, once per fetch it tried: not again per request.
    if (e instanceof KeysUnavailable) return new SvcError('UNAVAILABLE', `The OIDC issuer's keys cannot be fetched right now; retry shortly.`);
    if (e instanceof errors.JWTExpired) return bad('it has expired; get a fresh one from the issuer');
    if (e instanceof errors.JWTClaimValidationFailed) {
      if (e.claim === 'aud') return bad(`its audience is not ${JSON.stringify(this.opts.audience)}`);
      if (e.claim === 'nbf') return bad('it is not valid yet (nbf)');
      return bad(`claim "${e.claim}" ${e.reason === 'missing' ? 'is missing' : 'is not valid'}`);
    }
    if (e instanceof errors.JWSSignatureVerificationFailed) return bad('its signature does not verify');
    if (e instanceof errors.JOSEAlgNotAllowed) return bad(`its algorithm is not one of ${OIDC_ALGORITHMS.join(', ')}`);
    if (e instanceof errors.JWKSNoMatchingKey) return bad("no key of the issuer's JWKS matches its key id");
    if (e instanceof errors.JWKSMultipleMatchingKeys) return bad("several keys of the issuer's JWKS match it");
    if (e instanceof errors.JOSEError) return bad(`it is not a valid signed JWT (${e.code})`);
    this.log.warn('OIDC verification failed unexpectedly', { issuer: this.opts.issuer, error: (e as Error)?.message });
    return new SvcError('UNAVAILABLE', `The OIDC token could not be verified right now; retry shortly.`);
  }
}

async function defaultFetchJson(url: string): Promise<unknown> {
  const res = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), headers: { accept: 'application/json' } });
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  return res.json();
}
