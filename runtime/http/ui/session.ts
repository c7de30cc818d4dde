/**
 * The console's sign-in session (docs/console.md "Sessions"): the cookie holds an opaque
 * secret, the database a row per session (migration 0009), shared by every replica.
 *
 * - The row's id is the SHA-256 of the secret; the credential is sealed (AES-256-GCM) under a
 *   key derived from the secret (HKDF). Neither the cookie alone (it holds no credential) nor
 *   the table alone (no secret, no key) gives the credential; signing out deletes the row, so
 *   a copied cookie stops working too.
 * - Every console request opens the credential and authenticates it again through the
 *   identity providers (`runRequest`), so a key removed from the key file, an expired OIDC
 *   token or a service-account token the cluster no longer accepts ends the session at the
 *   next page, and the page shows what the credential may read now.
 * - The session lives `--ui-session-ttl` (database clock); the cookie's Max-Age says the same.
 *
 * Web Crypto only (no node:crypto), like the rest of the request path.
 */
import type { Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { CookieOptions } from 'hono/utils/cookie';
import type { AppEnv } from '../env.js';
import type { AppServices } from '../../request.js';

export const UI_PATH = '/ui';
/** The cookie's name; under TLS it is `__Host-kslate_console` (Secure, Path=/, no Domain). */
export const COOKIE = 'kslate_console';
/** Sessions one identity keeps; a sign-in beyond it ends that identity's oldest. */
export const MAX_SESSIONS_PER_IDENTITY = 32;
/** The session secret: 32 random bytes, base64url without padding. */
const SECRET_BYTES = 32;
const SECRET_FORMAT = /^[A-Za-z0-9_-]{43}$/;
const SEAL_INFO = new TextEncoder().encode('kslate console session: the credential');

type C = Context<AppEnv>;

export interface SessionOptions {
  /** How long a session lives after sign-in. */
  ttlMs: number;
}

/**
 * Whether the browser reached the gateway over TLS: the gateway's own (`--tls-cert`), or,
 * with `--trust-proxy N`, what the trusted proxy says in X-Forwarded-Proto (the entry N hops
 * back, as for X-Forwarded-For; the only one when a single proxy set it).
 */
export function viaTls(c: C, trustProxy: number): boolean {
  if (new URL(c.req.url).protocol === 'https:') return true;
  if (trustProxy <= 0) return false;
  const hops = (c.req.header('x-forwarded-proto') ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter(Boolean);
  return hops.length > 0 && hops[Math.max(0, hops.length - trustProxy)] === 'https';
}

function cookieOptions(tls: boolean, maxAgeSeconds: number): CookieOptions {
  const common = { httpOnly: true, sameSite: 'Strict', maxAge: maxAgeSeconds } as const;
  // __Host- demands Secure, Path=/ and no Domain: the cookie then also goes to /v1 and /mcp,
  // which never read cookies (the API takes only Authorization).
  return tls ? { ...common, prefix: 'host' } : { ...common, path: UI_PATH };
}

function cookieSecret(c: C, s: AppServices): string | undefined {
  return getCookie(c, COOKIE, viaTls(c, s.trustProxy) ? 'host' : undefined);
}

/** Whether the request carries a console cookie at all (a session that may have ended). */
export function hasSessionCookie(c: C, s: AppServices): boolean {
  return cookieSecret(c, s) !== undefined;
}

export function clearSessionCookie(c: C, s: AppServices): void {
  deleteCookie(c, COOKIE, cookieOptions(viaTls(c, s.trustProxy), 0));
}

function b64url(bytes: Uint8Array): string {
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function fromB64url(text: string): Uint8Array<ArrayBuffer> {
  const bin = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(bin, (ch) => ch.charCodeAt(0));
}

/** The row id (SHA-256 of the secret, hex) and the sealing key (HKDF of the secret) of a session secret. */
async function derive(secret: Uint8Array<ArrayBuffer>): Promise<{ id: string; key: CryptoKey }> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', secret));
  const id = Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
  const base = await crypto.subtle.importKey('raw', secret, 'HKDF', false, ['deriveKey']);
  const key = await crypto.subtle.deriveKey(
    { name: 'HKDF', hash: 'SHA-256', salt: new Uint8Array(0), info: SEAL_INFO },
    base,
    { name: 'AES-GCM', length: 256 },
    false,
    ['encrypt', 'decrypt'],
  );
  return { id, key };
}

/**
 * Start a session for a credential that just authenticated as `author`: a fresh secret in
 * the cookie, the sealed credential in the database. Ends the session the request carried,
 * if any (a second sign-in replaces the first). Throws what the database throws.
 */
export async function startSession(c: C, s: AppServices, opts: SessionOptions, credential: string, author: string): Promise<void> {
  await forgetSession(c, s);
  const secret = crypto.getRandomValues(new Uint8Array(SECRET_BYTES));
  const { id, key } = await derive(secret);
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = new Uint8Array(
    await crypto.subtle.encrypt({ name: 'AES-GCM', iv, additionalData: new TextEncoder().encode(id) }, key, new TextEncoder().encode(credential)),
  );
  const ttlSeconds = Math.max(1, Math.ceil(opts.ttlMs / 1000));
  const both = new Uint8Array(iv.length + sealed.length);
  both.set(iv);
  both.set(sealed, iv.length);
  await s.db.createConsoleSession({ id, author, sealed: b64url(both), ttlSeconds, maxPerAuthor: MAX_SESSIONS_PER_IDENTITY });
  setCookie(c, COOKIE, b64url(secret), cookieOptions(viaTls(c, s.trustProxy), ttlSeconds));
}

/** What the request's cookie gives: no cookie, a live session's credential, or a session that ended. */
export type SessionState = { kind: 'none' } | { kind: 'live'; id: string; credential: string } | { kind: 'ended' };

const opened = new WeakMap<Request, Promise<SessionState>>();

/**
 * The request's session, looked up once per request (a page makes several calls). A cookie
 * that is not a session secret, names no row, an expired one, or does not open, is `ended`.
 * Throws what the database throws.
 */
export function currentSession(c: C, s: AppServices): Promise<SessionState> {
  let p = opened.get(c.req.raw);
  if (!p) {
    p = lookup(c, s);
    opened.set(c.req.raw, p);
  }
  return p;
}

async function lookup(c: C, s: AppServices): Promise<SessionState> {
  const text = cookieSecret(c, s);
  if (text === undefined) return { kind: 'none' };
  if (!SECRET_FORMAT.test(text)) return { kind: 'ended' };
  const { id, key } = await derive(fromB64url(text));
  const row = await s.db.readConsoleSession(id);
  if (!row) return { kind: 'ended' };
  try {
    const both = fromB64url(row.sealed);
    const plain = await crypto.subtle.decrypt(
      { name: 'AES-GCM', iv: both.subarray(0, 12), additionalData: new TextEncoder().encode(id) },
      key,
      both.subarray(12),
    );
    return { kind: 'live', id, credential: new TextDecoder().decode(plain) };
  } catch {
    return { kind: 'ended' };
  }
}

/** Delete the session row the request's cookie names, if any. Throws what the database throws. */
export async function forgetSession(c: C, s: AppServices): Promise<void> {
  const text = cookieSecret(c, s);
  if (text === undefined || !SECRET_FORMAT.test(text)) return;
  await s.db.deleteConsoleSession((await derive(fromB64url(text))).id);
  opened.set(c.req.raw, Promise.resolve({ kind: 'ended' }));
}

/** Sign out: delete the request's session row (if any) and clear the cookie. Throws what the database throws. */
export async function endSession(c: C, s: AppServices): Promise<void> {
  if (!hasSessionCookie(c, s)) return;
  await forgetSession(c, s);
  clearSessionCookie(c, s);
}
