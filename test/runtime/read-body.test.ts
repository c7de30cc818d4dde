/**
 * readBody's fast path (issue 15): a body with a Content-Length within the limit is read with
 * `arrayBuffer()` and `req.body` is never touched. On Node that getter makes @hono/node-server
 * build a whole web Request and ReadableStream around the socket (a tenth of an MCP call's
 * CPU in the bench's profile), where `arrayBuffer()` alone reads the socket directly.
 */
import { describe, expect, test } from 'vitest';
import { readBody } from '../../runtime/http/body.js';

/** The request, counting reads of its `body` getter. */
function watched(req: Request): { req: Request; bodyReads: () => number } {
  let reads = 0;
  const proxy = new Proxy(req, {
    get(target, key) {
      if (key === 'body') reads++;
      const v = Reflect.get(target, key, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return { req: proxy, bodyReads: () => reads };
}

describe('readBody', () => {
  test('a body with a Content-Length is read without touching req.body', async () => {
    const text = '{"value":"é"}';
    const w = watched(
      new Request('http://kslate.test/v1/x', { method: 'PUT', body: text, headers: { 'content-length': String(Buffer.byteLength(text)) } }),
    );
    expect(await readBody(w.req)).toEqual({ kind: 'text', text });
    expect(w.bodyReads()).toBe(0);
  });

  test('Content-Length 0 is no body, without touching req.body', async () => {
    const w = watched(new Request('http://kslate.test/v1/x', { method: 'PUT', body: '', headers: { 'content-length': '0' } }));
    expect(await readBody(w.req)).toEqual({ kind: 'none' });
    expect(w.bodyReads()).toBe(0);
  });

  test('without a Content-Length the stream is read, within the limit', async () => {
    const chunks = ['{"a":', '1}'];
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (const ch of chunks) c.enqueue(new TextEncoder().encode(ch));
        c.close();
      },
    });
    const req = new Request('http://kslate.test/v1/x', { method: 'PUT', body: stream, duplex: 'half' } as RequestInit);
    expect(await readBody(req)).toEqual({ kind: 'text', text: '{"a":1}' });
    const big = new Request('http://kslate.test/v1/x', { method: 'PUT', body: 'x'.repeat(11) });
    expect(await readBody(big, 10)).toEqual({ kind: 'too-large', limit: 10 });
  });
});
