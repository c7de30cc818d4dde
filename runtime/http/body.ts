/**
 * Reading a request body within the limits (docs/api.md, Limits), for HTTP/JSON and MCP on
 * every runtime: Web-standard Request in, the handlers' RawBody out.
 */
import { MAX_BODY_BYTES, type RawBody } from '../../handlers/body.js';
import { ClientClosedRequest } from '../request.js';

/**
 * The most of an oversized body that is read and discarded so that the client can read the
 * 400 (docs/api.md, Limits). Closing a connection with unread data makes the kernel reset it,
 * and a client that is still sending (or sends everything before reading) then sees a broken
 * pipe instead of the answer. Beyond this the connection is closed without reading on.
 */
export const MAX_DRAIN_BYTES = 64 * 1024 * 1024;

/**
 * Read at most `limit` (4 MiB); a larger body is marked so the handler answers MALFORMED at its step.
 * The rest of a larger body is read and discarded (up to MAX_DRAIN_BYTES in all, within
 * --request-timeout), never kept, so the answer comes after the client has sent everything.
 * A connection that ends before the body arrived whole throws ClientClosedRequest.
 */
export async function readBody(req: Request, limit: number = MAX_BODY_BYTES): Promise<RawBody> {
  const tooLarge = { kind: 'too-large', limit } as const;
  const declared = Number(req.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > MAX_DRAIN_BYTES) return tooLarge;
  // The common case, a body with a Content-Length within the limit (the HTTP parser delivers
  // exactly that many bytes): read it whole. On Node this is @hono/node-server's direct read
  // from the socket, without building a web Request and ReadableStream around it — as long as
  // nothing touched `req.body` before: that getter builds them (a tenth of an MCP call's CPU).
  if (Number.isFinite(declared) && declared <= limit) {
    if (declared === 0) return { kind: 'none' };
    let whole: ArrayBuffer;
    try {
      whole = await req.arrayBuffer();
    } catch (e) {
      throw new ClientClosedRequest(e);
    }
    return decode(new Uint8Array(whole));
  }
  if (!req.body) return { kind: 'none' };
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    let next: ReadableStreamReadResult<Uint8Array>;
    try {
      next = await reader.read();
    } catch (e) {
      // The client went away (or the request timed out) while an oversized body was drained.
      if (total > limit) return tooLarge;
      throw new ClientClosedRequest(e);
    }
    if (next.done) break;
    total += next.value.byteLength;
    if (total > MAX_DRAIN_BYTES) {
      await reader.cancel().catch(() => undefined);
      return tooLarge;
    }
    if (total > limit) {
      chunks.length = 0;
      continue;
    }
    chunks.push(next.value);
  }
  if (total > limit) return tooLarge;
  if (total === 0) return { kind: 'none' };
  const buf = new Uint8Array(total);
  let off = 0;
  for (const ch of chunks) {
    buf.set(ch, off);
    off += ch.byteLength;
  }
  return decode(buf);
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

function decode(buf: Uint8Array): RawBody {
  if (buf.byteLength === 0) return { kind: 'none' };
  try {
    return { kind: 'text', text: UTF8.decode(buf) };
  } catch {
    // A decoder that replaced bad bytes with U+FFFD would store a value nobody sent.
    return { kind: 'invalid', reason: 'The request body is not valid UTF-8; send JSON encoded as UTF-8.' };
  }
}
