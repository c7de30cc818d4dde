/** Small pure helpers for wire values: timestamps, canonical JSON, sizes, digests. */

const pad = (n: number, w = 2) => String(Math.abs(n)).padStart(w, '0');

/** RFC 3339 with milliseconds and the server's UTC offset: `2026-11-22T11:30:00.123+00:00`. */
export function formatTime(d: Date): string {
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}` +
    `T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}` +
    `${sign}${pad(Math.trunc(off / 60))}:${pad(off % 60)}`
  );
}

/**
 * True when this process's time zone is UTC at every instant (read once, at start; Workers
 * always are): formatTime then writes `+00:00`, and times PostgreSQL wrote in UTC need no
 * rewriting (history rows stored rendered, db/migrations/0008). Europe/London is +00:00 only
 * in winter, so the zone's name decides, not today's offset.
 */
export const TIME_ZONE_IS_UTC = zoneIsUtc();

function zoneIsUtc(): boolean {
  let zone: string | undefined;
  try {
    zone = new Intl.DateTimeFormat().resolvedOptions().timeZone;
  } catch {
    return false;
  }
  return /^(Etc\/)?(UTC|UCT|GMT|GMT0|GMT[+-]0|Universal|Zulu|Greenwich)$/.test(zone ?? '') && new Date().getTimezoneOffset() === 0;
}

/** JSON with object keys sorted, so equal values have equal text. */
export function canonicalJson(v: unknown): string {
  return JSON.stringify(sortKeys(v));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v as object).sort()) out[k] = sortKeys((v as Record<string, unknown>)[k]);
    return out;
  }
  return v;
}

export function jsonEqual(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

const encoder = new TextEncoder();

export function byteLength(s: string): number {
  return encoder.encode(s).length;
}

export async function sha256Hex(s: string): Promise<string> {
  const buf = await crypto.subtle.digest('SHA-256', encoder.encode(s));
  return [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

export const KIB = 1024;
export const MIB = 1024 * KIB;

/**
 * Every read response stops at about this many bytes (history, query, get's fields and
 * entries) and says how to continue; a single row larger than this still comes alone.
 */
export const MAX_RESPONSE_BYTES = 16 * MIB;
