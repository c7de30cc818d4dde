/** The JSON answer every HTTP route sends (operations, watch refusals). */
import type { Context } from 'hono';
import type { AppEnv } from './env.js';

/**
 * A JSON answer with its headers as one plain object (content type and X-Request-Id): on
 * Node, @hono/node-server writes such a response straight to the socket, where `c.json`
 * plus a header set afterwards builds two `Headers` objects per request.
 */
export function reply(c: Context<AppEnv>, status: number, body: unknown, close = false): Response {
  c.set('replied', true);
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': c.get('requestId') };
  if (close) headers.connection = 'close';
  return new Response(JSON.stringify(body), { status, headers });
}
