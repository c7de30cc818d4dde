/**
 * Opaque, authenticated cursors (`before`, `after`): a payload plus an HMAC-SHA-256 made with
 * a key kept in the database, so every replica accepts the others' cursors and a cursor the
 * gateway did not issue is MALFORMED (decisions §4). The HMAC is @noble/hashes (audited,
 * plain JavaScript, so it runs on Workers as on Node): Web Crypto's `sign` on Node queues a
 * job on the thread pool per call, ~24 µs of CPU alone and ~12% of a history page's gateway
 * CPU under 16 clients, where this, with the key's HMAC state kept, is ~2 µs.
 */
import { groups, type LogPosition, type NodePos } from '../db/port.js';
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { SvcError } from './errors.js';

export interface CursorPayload {
  /** What the cursor continues: `before` (history), `after` (query) or `entries` (a get's append field). */
  t: 'before' | 'after' | 'entries';
  /** What it is bound to (class/record, filters), so it cannot be replayed elsewhere. */
  b: string;
  /** Position: the last seq or record id returned. */
  p: number;
}

type Mac = ReturnType<typeof hmac.create>;
/** The HMAC state after the key, per secret (one in practice: the database's cursor key). */
const macs = new Map<string, Mac>();
const enc = new TextEncoder();

function mac(secret: string, data: Uint8Array): Uint8Array {
  let m = macs.get(secret);
  if (!m) {
    m = hmac.create(sha256, enc.encode(secret));
    macs.set(secret, m);
  }
  return m.clone().update(data).digest();
}

/** Equal bytes, in time that does not depend on where they differ. */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
  return d === 0;
}

function b64url(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function unb64url(s: string): Uint8Array<ArrayBuffer> {
  if (!/^[A-Za-z0-9_-]*$/.test(s)) throw new Error('not base64url');
  const bin = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (s.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** `<payload>.<HMAC>`, both base64url: what every cursor is on the wire. */
async function sign(secret: string, payload: unknown): Promise<string> {
  const body = enc.encode(JSON.stringify(payload));
  return `${b64url(body)}.${b64url(mac(secret, body))}`;
}

/** The payload of a cursor this service signed, or undefined (malformed, too long, forged). */
async function verified(secret: string, cursor: string): Promise<unknown> {
  const parts = cursor.split('.');
  if (parts.length !== 2 || cursor.length > 2048) return undefined;
  let body: Uint8Array;
  let sig: Uint8Array;
  try {
    body = unb64url(parts[0]);
    sig = unb64url(parts[1]);
  } catch {
    return undefined;
  }
  if (!sameBytes(sig, mac(secret, body))) return undefined;
  try {
    return JSON.parse(new TextDecoder().decode(body)) as unknown;
  } catch {
    return undefined;
  }
}

export function encodeCursor(secret: string, payload: CursorPayload): Promise<string> {
  return sign(secret, payload);
}

/** Verify and decode; MALFORMED unless this gateway issued it for the same `t` and `b`. */
export async function decodeCursor(
  secret: string,
  cursor: string,
  expect: { t: CursorPayload['t']; b: string },
  where: Record<string, unknown>,
): Promise<number> {
  const param = { before: 'before', after: 'after', entries: 'entries_before' }[expect.t];
  const source = { before: 'next_before', after: 'next_after', entries: 'next_entries_before' }[expect.t];
  const bad = () =>
    new SvcError('MALFORMED', `The \`${param}\` cursor was not issued by this service for this request; send the ${source} value from a previous response.`, where);
  const payload = (await verified(secret, cursor)) as CursorPayload | undefined;
  if (payload === undefined || payload === null || typeof payload !== 'object') throw bad();
  if (payload.t !== expect.t || payload.b !== expect.b || !Number.isSafeInteger(payload.p)) throw bad();
  return payload.p;
}

/** A class watch's position (issue 16): a change log position and the time of its change. */
export interface WatchCursor {
  /** The log position: per node group, a transaction id (xid8, decimal text) and a history id. */
  pos: LogPosition;
  /** Epoch milliseconds of the change it points at (the database clock), or of the stream's start. */
  at: number;
}

/** Node groups a cursor may name (a Citus cluster's nodes; far more than any has). */
const MAX_GROUPS = 256;

/**
 * A class watch cursor: signed like the others, bound to its class. A position of group 0
 * alone (plain PostgreSQL) keeps the original form `x`, `p` (cursors issued before issue 35
 * stay valid and new ones read the same); several groups (Citus) are `v: [[group, tx, id], ...]`.
 */
export function encodeWatchCursor(secret: string, cls: string, c: WatchCursor): Promise<string> {
  const gs = groups(c.pos);
  if (gs.length === 1 && gs[0] === '0') return sign(secret, { t: 'watch', b: cls, x: c.pos['0'].tx, p: c.pos['0'].id, a: c.at });
  return sign(secret, { t: 'watch', b: cls, v: gs.map((g) => [Number(g), c.pos[g].tx, c.pos[g].id]), a: c.at });
}

const TX = /^\d{1,20}$/;

/** Verify and decode a class watch cursor; MALFORMED unless this service issued it for `cls`. */
export async function decodeWatchCursor(secret: string, cursor: string, cls: string, where: Record<string, unknown>): Promise<WatchCursor> {
  const bad = () =>
    new SvcError(
      'MALFORMED',
      'The `from` cursor (or Last-Event-ID) was not issued by this service for this class; send the id of an event of this class watch.',
      where,
    );
  const p = (await verified(secret, cursor)) as { t?: unknown; b?: unknown; x?: unknown; p?: unknown; a?: unknown; v?: unknown } | undefined;
  if (p === undefined || p === null || typeof p !== 'object') throw bad();
  if (p.t !== 'watch' || p.b !== cls || !Number.isSafeInteger(p.a)) throw bad();
  if (p.v === undefined) {
    if (typeof p.x !== 'string' || !TX.test(p.x) || !Number.isSafeInteger(p.p)) throw bad();
    return { pos: { '0': { tx: p.x, id: p.p as number } }, at: p.a as number };
  }
  if (!Array.isArray(p.v) || p.v.length > MAX_GROUPS) throw bad();
  const pos: Record<string, NodePos> = {};
  for (const e of p.v as unknown[]) {
    if (!Array.isArray(e) || e.length !== 3) throw bad();
    const [g, tx, id] = e as unknown[];
    if (!Number.isSafeInteger(g) || (g as number) < 0 || (g as number) > 65_535 || typeof tx !== 'string' || !TX.test(tx) || !Number.isSafeInteger(id)) throw bad();
    if (pos[String(g)] !== undefined) throw bad();
    pos[String(g)] = { tx, id: id as number };
  }
  return { pos, at: p.a as number };
}
