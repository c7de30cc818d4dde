/**
 * The OIDC issuer's key set (oidc.ts), fetched when needed and never more often than the
 * issuer can bear. jose's remote key set counts its cooldown from the last *successful*
 * fetch, so while the issuer failed every token naming an unknown `kid` fetched again (132
 * fetches/s and a warning each under a flood of forged tokens). Here every attempt counts:
 *
 * - after a fetch that worked, an unknown `kid` fetches again at most once per cooldown
 *   (30 s), and the keys are refreshed when older than 10 minutes;
 * - after a fetch that failed, none before a backoff (1 s, doubling up to the cooldown);
 * - while none may be fetched, an unknown `kid` is no key (401, as jose answers inside its
 *   cooldown), and known keys keep working, however old, until a fetch works;
 * - a failed fetch is logged once, with when the next may be tried; requests in between do
 *   not log again.
 *
 * Runtime-neutral (Node and Workers): fetch through the provider's `fetchJson`, no Node module.
 */
import { createLocalJWKSet, errors, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import type { Logger } from '../../handlers/context.js';

/** Least time between two fetches for unknown keys after a fetch that worked. */
export const JWKS_COOLDOWN_MS = 30_000;
/** Keys older than this are fetched again (when a fetch may be tried). */
export const JWKS_MAX_AGE_MS = 10 * 60_000;
/** The first wait after a failed fetch; it doubles with each failure, up to the cooldown. */
export const JWKS_FIRST_BACKOFF_MS = 1_000;

/** The key set could not be had (never fetched, or a fetch for an unknown key failed): 503. */
export class KeysUnavailable extends Error {}

export interface IssuerKeysOptions {
  url: string;
  issuer: string;
  fetchJson: (url: string) => Promise<unknown>;
  log: Logger;
  cooldownMs?: number;
  /** Clock in milliseconds (default Date.now). */
  now?: () => number;
}

export class IssuerKeys {
  private local: ReturnType<typeof createLocalJWKSet> | null = null;
  private fetchedAt = -Infinity;
  /** No fetch before this: the cooldown after a success, the backoff after a failure. */
  private notBefore = -Infinity;
  private failures = 0;
  private lastError = '';
  private inFlight: Promise<void> | null = null;
  private readonly cooldownMs: number;
  private readonly now: () => number;

  constructor(private readonly opts: IssuerKeysOptions) {
    this.cooldownMs = opts.cooldownMs ?? JWKS_COOLDOWN_MS;
    this.now = opts.now ?? Date.now;
  }

  /** jose's key lookup for jwtVerify. */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    if (!this.local || this.now() - this.fetchedAt >= JWKS_MAX_AGE_MS) {
      // Old keys still serve when the refresh fails; no keys at all is 503.
      await this.refresh().catch((e: unknown) => {
        if (!this.local) throw e;
      });
    }
    const local = this.local!;
    try {
      return await local(header, token);
    } catch (e) {
      // A key the gateway has not seen: the issuer may have rotated. Fetch once, if allowed.
      if (!(e instanceof errors.JWKSNoMatchingKey) || !this.mayFetch()) throw e;
      await this.refresh();
      return this.local!(header, token);
    }
  };

  private mayFetch(): boolean {
    return this.now() >= this.notBefore;
  }

  /** One fetch for everyone waiting; refused (KeysUnavailable) without a try inside the backoff. */
  private refresh(): Promise<void> {
    if (this.inFlight) return this.inFlight;
    if (!this.mayFetch()) {
      return Promise.reject(
        new KeysUnavailable(`${this.lastError || 'not fetched yet'}; next try in ${Math.max(0, this.notBefore - this.now())} ms`),
      );
    }
    this.inFlight = this.fetchOnce().finally(() => {
      this.inFlight = null;
    });
    return this.inFlight;
  }

  private async fetchOnce(): Promise<void> {
    try {
      const jwks = await this.opts.fetchJson(this.opts.url);
      this.local = createLocalJWKSet(jwks as JSONWebKeySet); // throws JWKSInvalid for anything else
      this.fetchedAt = this.now();
      this.notBefore = this.fetchedAt + this.cooldownMs;
      if (this.failures > 0) this.opts.log.info('OIDC JWKS fetched again', { issuer: this.opts.issuer, after_failures: this.failures });
      this.failures = 0;
    } catch (e) {
      this.failures++;
      const backoff = Math.min(this.cooldownMs, JWKS_FIRST_BACKOFF_MS * 2 ** (this.failures - 1));
      this.notBefore = this.now() + backoff;
      this.lastError = (e as Error)?.message ?? String(e);
      // Once per attempt, and attempts are spaced by the backoff: a flood cannot multiply it.
      this.opts.log.warn('OIDC JWKS cannot be fetched', {
        issuer: this.opts.issuer,
        error: this.lastError,
        failures: this.failures,
        retry_in_ms: backoff,
        keeps_known_keys: this.local !== null,
      });
      throw new KeysUnavailable(this.lastError, { cause: e });
    }
  }
}
