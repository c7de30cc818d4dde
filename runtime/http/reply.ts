/** The JSON answer every HTTP route sends (operations, watch refusals). */
import type { Context } from 'hono';
import type { AppServices } from '../request.js';
import type { AppEnv, RequestView } from './env.js';
import { wwwAuthenticate } from './protected-resource.js';

/** Seconds every 503 asks the client to wait before retrying (Retry-After). */
export const RETRY_AFTER_SECONDS = 1;

/**
 * What an error answer of any route (the API, watch refusals, MCP, the console) says besides
 * its body, added in one place for all (the app's first middleware, and the Node adapter's
 * direct path): a 401 how to authenticate (WWW-Authenticate), a 503 when to retry
 * (Retry-After). Headers a route set itself are kept.
 */
export function errorHeader(status: number, req: RequestView, s: AppServices): [name: string, value: string] | undefined {
  if (status === 401) return ['www-authenticate', wwwAuthenticate(req, s)];
  if (status === 503) return ['retry-after', String(RETRY_AFTER_SECONDS)];
  return undefined;
}

/** errorHeader on a Hono answer, unless the route set that header itself. */
export function addErrorHeaders(c: Context<AppEnv>, s: AppServices): void {
  const h = errorHeader(c.res.status, c.req, s);
  if (h && !c.res.headers.has(h[0])) c.res.headers.set(h[0], h[1]);
}

/**
 * A JSON answer with its headers as one plain object (content type and X-Request-Id): on
 * Node, @hono/node-server writes such a response straight to the socket, where `c.json`
 * plus a header set afterwards builds two `Headers` objects per request.
 */
export function reply(c: Context<AppEnv>, status: number, body: unknown, close = false, extra?: Record<string, string>): Response {
  return replyText(c, status, JSON.stringify(body), close, extra);
}

/** The WAL position a write reached: send it back as X-Kslate-Min-Lsn to read your writes (docs/ha.md). */
export const LSN_HEADER = 'x-kslate-lsn';

/**
 * The same with the body already JSON text. Parts are encoded one after another into one
 * byte array: joining a large page into one string first cost a copy of it and a second pass
 * to measure it (Buffer.byteLength on a concatenation flattens it), ~10% of a history page's
 * gateway CPU.
 */
export function replyText(
  c: Context<AppEnv>,
  status: number,
  json: string | readonly string[],
  close = false,
  extra?: Record<string, string>,
): Response {
  c.set('replied', true);
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': c.get('requestId'), ...extra };
  if (close) headers.connection = 'close';
  return new Response(typeof json === 'string' ? json : utf8(json), { status, headers });
}

const encoder = new TextEncoder();

/** Strings as one UTF-8 byte array, each encoded once, straight into place. */
export function utf8(parts: readonly string[]): Uint8Array<ArrayBuffer> {
  let chars = 0;
  for (const p of parts) chars += p.length;
  // One byte per character fits ASCII; text that needs more grows the array (each UTF-16
  // unit takes at most 3 bytes).
  let buf = new Uint8Array(chars + 256);
  let at = 0;
  for (const part of parts) {
    let rest = part;
    for (;;) {
      const { read, written } = encoder.encodeInto(rest, buf.subarray(at));
      at += written;
      if (read === rest.length) break;
      rest = rest.slice(read);
      const bigger = new Uint8Array(Math.max(buf.length * 2, at + rest.length * 3));
      bigger.set(buf.subarray(0, at));
      buf = bigger;
    }
  }
  return buf.subarray(0, at);
}
