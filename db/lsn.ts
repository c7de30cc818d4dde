/**
 * WAL positions (LSNs) as kslate's read-your-writes tokens (docs/ha.md "Reads from standbys"):
 * a write's answer carries `X-Kslate-Lsn`, a read sending it back as `X-Kslate-Min-Lsn` is
 * served by a standby only once it has replayed that far. PostgreSQL writes an LSN as two
 * hexadecimal numbers of up to 8 digits, `16/B374D848`; compared here as one 64-bit number.
 * Pure: no runtime imports (Workers use it too).
 */

const LSN = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/;

/** An LSN as a number, or null when `s` is not one. */
export function parseLsn(s: string): bigint | null {
  const m = LSN.exec(s);
  if (!m) return null;
  return (BigInt(`0x${m[1]}`) << 32n) | BigInt(`0x${m[2]}`);
}

/** An LSN as PostgreSQL writes it (upper-case hex, no leading zeros). */
export function formatLsn(n: bigint): string {
  return `${(n >> 32n).toString(16).toUpperCase()}/${(n & 0xffffffffn).toString(16).toUpperCase()}`;
}

/**
 * Why `s` is not a usable `X-Kslate-Min-Lsn` (MCP `min_lsn`, gRPC `x-kslate-min-lsn`), or null
 * when it is one. The message tells the client what to send.
 */
export function minLsnProblem(s: string): string | null {
  if (parseLsn(s.trim()) !== null) return null;
  const shown = JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}…` : s);
  return `X-Kslate-Min-Lsn (MCP min_lsn, gRPC x-kslate-min-lsn) must be a WAL position as a write's X-Kslate-Lsn gives it (two hexadecimal numbers of 1 to 8 digits joined by "/", e.g. 16/B374D848); got ${shown}. Send back the value a write returned, or leave the header out.`;
}
