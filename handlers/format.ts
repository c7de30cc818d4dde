/** Small pure helpers for wire values: timestamps, canonical JSON, sizes, digests. */

const pad = (n: number, w = 2) => String(Math.abs(n)).padStart(w, '0');

/**
 * RFC 3339 with milliseconds and the server's UTC offset: `2026-11-22T11:30:00.123+00:00`.
 * In a UTC process (TIME_ZONE_IS_UTC) the text is worked out from the epoch milliseconds
 * (formatTimeMs) instead of a Date's local-time getters, which cost ~0.4 µs a time and a get
 * writes one per field (docs/performance.md "Where a get's CPU goes").
 */
export function formatTime(d: Date): string {
  return TIME_ZONE_IS_UTC ? formatTimeMs(d.getTime()) : localTime(d);
}

/** formatTime of `new Date(ms)`, without the Date when the process is UTC. */
export function formatTimeMs(ms: number): string {
  return TIME_ZONE_IS_UTC && Number.isFinite(ms) ? utcTime(ms) : localTime(new Date(ms));
}

/** formatTime by the Date's local-time getters: any time zone (and an invalid Date, as it always wrote it). */
export function localTime(d: Date): string {
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}` +
    `T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}` +
    `${sign}${pad(Math.trunc(off / 60))}:${pad(off % 60)}`
  );
}

const two = (n: number) => (n < 10 ? `0${n}` : `${n}`);
const DAY_MS = 86_400_000;

/**
 * localTime's text for a UTC process, from epoch milliseconds: the proleptic Gregorian date
 * of the day number (H. Hinnant's civil_from_days), year unpadded as getFullYear writes it.
 * test/handlers/format-time.test.ts holds it equal to localTime over Date's whole range.
 */
function utcTime(ms: number): string {
  const days = Math.floor(ms / DAY_MS);
  let rest = ms - days * DAY_MS;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const mi = Math.floor(rest / 60_000);
  rest -= mi * 60_000;
  const s = Math.floor(rest / 1000);
  const milli = rest - s * 1000;
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  const m3 = milli < 10 ? `00${milli}` : milli < 100 ? `0${milli}` : `${milli}`;
  return `${year}-${two(month)}-${two(day)}T${two(h)}:${two(mi)}:${two(s)}.${m3}+00:00`;
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
