/**
 * What the gateway can tell about a database URL before connecting: whether its traffic
 * crosses a network in clear text. node-postgres sends no TLS unless the URL asks for it.
 */
import type { Logger } from '../handlers/context.js';

/** sslmode values that encrypt: libpq's require and stronger, and node-postgres' no-verify (TLS, no certificate check). */
const TLS_MODES = new Set(['require', 'verify-ca', 'verify-full', 'no-verify']);

/** localhost, 127.0.0.0/8 and ::1 (also as an IPv4-mapped address): traffic that never leaves the machine. */
function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost') || /^127(\.\d{1,3}){3}$/.test(h) || h === '::1' || /^::ffff:127(\.\d{1,3}){3}$/.test(h);
}

/**
 * A warning when `connectionString` reaches a host other than this machine without TLS
 * (`sslmode` below require), else null. Names the host and the mode, never the credentials.
 * Unix sockets and strings that are not URLs (key=value DSNs) get none.
 */
export function plaintextDatabaseWarning(connectionString: string): string | null {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    return null;
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') return null;
  const q = url.searchParams;
  // A `host` parameter wins over the authority (a socket directory, as libpq reads it).
  let host = q.get('host') ?? url.hostname;
  try {
    host = decodeURIComponent(host);
  } catch {
    // left as written
  }
  host = host.replace(/^\[(.*)\]$/, '$1');
  if (host === '' || host.startsWith('/') || isLoopback(host)) return null;
  const mode = q.get('sslmode');
  const tls = mode !== null ? TLS_MODES.has(mode) : q.get('ssl') === 'true' || q.get('ssl') === '1' || q.get('sslnegotiation') === 'direct';
  if (tls) return null;
  return (
    `the database connection to ${host} is not encrypted (${mode !== null ? `sslmode=${mode}` : 'no sslmode'}): passwords and records cross the network in clear text; ` +
    'add sslmode=require (or verify-full with sslrootcert) to the database URL unless that network is private to the database'
  );
}

/** At start (serve, dev with a database URL, worker, sweep): the warning, when there is one. */
export function warnIfClearText(connectionString: string, log: Pick<Logger, 'warn'>): void {
  const warning = plaintextDatabaseWarning(connectionString);
  if (warning) log.warn(warning);
}
