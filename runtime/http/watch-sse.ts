/**
 * Watch streams over HTTP as Server-Sent Events (docs/watch.md), for the API's watch routes
 * and the console's live record page.
 */
import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { asSvcError, type Operation } from '../../handlers/index.js';
import type { WatchStream } from '../../handlers/watch-feed.js';
import { runRequest, type AppServices, type RequestMeta } from '../request.js';
import type { AppEnv } from './env.js';
import { reply } from './reply.js';

/** How long a stream ended by the gateway (slow client, shutdown) may take to write its last event. */
const END_GRACE_MS = 1_000;

/**
 * A watch (docs/watch.md): the same request lifecycle as every operation, so every refusal
 * is a JSON error before the stream starts; then the handler's stream as Server-Sent Events:
 * `open` (where it starts), `change` (id: the resume token), comment-line heartbeats, and a
 * last `end` event when the gateway ends it. Last-Event-ID resumes. `meta` carries the
 * credential: the request's own (the API) or the console's cookie (runtime/ui).
 */
export async function serveWatch(c: Context<AppEnv>, s: AppServices, op: Operation, meta: RequestMeta): Promise<Response> {
  const r = await runRequest(s, meta, op, () => {
    const names = [...new URL(c.req.url).searchParams.keys()];
    const input = op.fromHttp({ params: c.req.param() as Record<string, string>, query: c.req.query(), names, body: { kind: 'none' } });
    const last = c.req.header('last-event-id');
    return last === undefined ? input : { ...input, last_event_id: last };
  });
  if (r.identity) c.set('author', r.identity.author);
  if (!r.ok) {
    c.set('errorCode', r.error.code);
    return reply(c, r.error.status, r.error.body());
  }
  const stream = r.out.stream as WatchStream;
  // A client gone before the stream starts must free its slot too (onAbort below only
  // fires once the body is being read).
  const signal = c.req.raw.signal;
  if (signal.aborted) stream.close();
  else signal.addEventListener('abort', () => stream.close(), { once: true });
  c.header('x-request-id', c.get('requestId'));
  // Proxies (nginx) must pass events on as they come.
  c.header('x-accel-buffering', 'no');
  return streamSSE(c, async (sse) => {
    sse.onAbort(() => stream.close());
    // A client that does not read blocks the writes below; a stream the gateway ended is
    // then cut after a grace period instead of waiting for it.
    void stream.ended.then((reason) => {
      if (reason !== 'closed') setTimeout(() => void sse.abort(), END_GRACE_MS).unref?.();
    });
    try {
      for await (const item of stream.items) {
        if (sse.aborted || sse.closed) break;
        if (item.type === 'heartbeat') await sse.write(': heartbeat\n\n');
        else if (item.type === 'end') {
          await sse.writeSSE({ event: 'end', data: JSON.stringify({ reason: item.reason, message: item.message }) });
          break;
        } else await sse.writeSSE({ event: item.type, id: item.id, data: JSON.stringify(item.data) });
      }
    } catch (e) {
      const err = asSvcError(e, { log: s.log, requestId: c.get('requestId') });
      if (!sse.aborted && !sse.closed) {
        await sse
          .writeSSE({ event: 'end', data: JSON.stringify({ reason: 'error', ...err.body(), message: `${err.message} Reconnect with your last event id.` }) })
          .catch(() => undefined);
      }
    } finally {
      stream.close();
    }
  });
}
