/**
 * Watch streams over HTTP as Server-Sent Events (docs/watch.md), for the API's watch routes
 * and the console's live record page.
 *
 * Paced by the socket (issue 31 item 9): the body is a pull-based ReadableStream with no
 * queue of its own (highWaterMark 0), so the next item is asked of the watch only when the
 * server reads the body again, which @hono/node-server does once the previous chunk has been
 * written and the socket has drained. A client that stops reading therefore holds at most the
 * one event being written; its stream then ends `slow` after --watch-slow-timeout (the hub
 * sees that it never came back for the next item).
 */
import type { Context } from 'hono';
import { asSvcError, type Operation } from '../../handlers/index.js';
import type { WatchItem, WatchStream } from '../../handlers/watch-feed.js';
import { runRequest, type AppServices, type RequestMeta } from '../request.js';
import type { AppEnv } from './env.js';
import { reply } from './reply.js';

/** How long a stream ended by the gateway (slow client, shutdown) may take to write its last event. */
const END_GRACE_MS = 1_000;

const encoder = new TextEncoder();

/** What this file touches of Node's ServerResponse (the adapter's `c.env.outgoing`). */
interface NodeResponse {
  destroyed?: boolean;
  writableFinished?: boolean;
  socket?: { resetAndDestroy?(): void } | null;
  destroy(): void;
}
/** Event data above this is sent as its own chunk: joining it to its lines would copy it once more. */
const SPLIT_BYTES = 64 * 1024;

/**
 * One item as SSE chunks: `event`, `data` (JSON: never a raw newline), `id`; a heartbeat is
 * a comment line. Large data is a chunk of its own, so it is encoded once, not first copied
 * into one string with its lines (a paused client's catch-up makes that garbage by the MB).
 */
export function sseChunks(item: WatchItem): Uint8Array[] {
  switch (item.type) {
    case 'heartbeat':
      return [encoder.encode(': heartbeat\n\n')];
    case 'end':
      return [encoder.encode(`event: end\ndata: ${JSON.stringify({ reason: item.reason, message: item.message })}\n\n`)];
    default: {
      const data = JSON.stringify(item.data);
      const head = `event: ${item.type}\ndata: `;
      const tail = `\nid: ${item.id}\n\n`;
      if (data.length <= SPLIT_BYTES) return [encoder.encode(head + data + tail)];
      return [encoder.encode(head), encoder.encode(data), encoder.encode(tail)];
    }
  }
}

/**
 * A watch (docs/watch.md): the same request lifecycle as every operation, so every refusal
 * is a JSON error before the stream starts; then the handler's stream as Server-Sent Events:
 * `open` (where it starts), `change` (id: the resume token), comment-line heartbeats, and a
 * last `end` event when the gateway ends it. Last-Event-ID resumes. `meta` carries the
 * credential: the request's own (the API) or the console's cookie (runtime/http/ui).
 */
export async function serveWatch(c: Context<AppEnv>, s: AppServices, op: Operation, meta: RequestMeta): Promise<Response> {
  const r = await runRequest(s, meta, op, () => {
    const names = [...new URL(c.req.url).searchParams.keys()];
    const input = op.fromHttp({ params: c.req.param() as Record<string, string>, query: c.req.query(), names, body: { kind: 'none' } });
    const last = c.req.header('last-event-id');
    return last === undefined ? input : { ...input, last_event_id: last };
  });
  if (!r.ok) {
    return reply(c, r.error.status, r.error.body());
  }
  const stream = r.out.stream as WatchStream;
  // A client gone before the stream starts must free its slot too (the body's cancel below
  // only comes once the server reads it).
  const signal = c.req.raw.signal;
  if (signal.aborted) stream.close();
  else signal.addEventListener('abort', () => stream.close(), { once: true });

  const items = stream.items[Symbol.asyncIterator]();
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    stream.close();
    void items.return?.();
  };
  // A client that does not read never asks for the last event: a stream the gateway ended
  // (slow, shutdown, revoked, max_age) is cut after a grace period instead of waiting for it.
  // On Node the connection is reset, so neither the gateway nor its kernel keeps what the
  // client did not read (it resumes from its last id); elsewhere the body errors.
  let fail: ((e: Error) => void) | null = null;
  void stream.ended.then((reason) => {
    if (reason === 'closed') return;
    setTimeout(() => {
      const outgoing = (c.env as { outgoing?: NodeResponse } | undefined)?.outgoing;
      if (!outgoing) fail?.(new Error(`watch stream ended (${reason})`));
      else if (!outgoing.destroyed && !outgoing.writableFinished) {
        if (outgoing.socket?.resetAndDestroy) outgoing.socket.resetAndDestroy();
        else outgoing.destroy();
      }
    }, END_GRACE_MS).unref?.();
  });
  const body = new ReadableStream<Uint8Array>(
    {
      start(ctrl) {
        fail = (e) => {
          if (!done) ctrl.error(e);
          finish();
        };
      },
      // Called only when the server wants another chunk: the previous one has been written.
      async pull(ctrl) {
        if (done) return;
        let chunks: Uint8Array[];
        let last = false;
        try {
          const next = await items.next();
          if (next.done) {
            ctrl.close();
            finish();
            return;
          }
          chunks = sseChunks(next.value);
          last = next.value.type === 'end';
        } catch (e) {
          const err = asSvcError(e, { log: s.log, requestId: c.get('requestId') });
          const body = { reason: 'error', ...err.body(), message: `${err.message} Reconnect with your last event id.` };
          chunks = [encoder.encode(`event: end\ndata: ${JSON.stringify(body)}\n\n`)];
          last = true;
        }
        if (done) return;
        for (const chunk of chunks) ctrl.enqueue(chunk);
        if (last) {
          ctrl.close();
          finish();
        }
      },
      cancel() {
        finish();
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, {
    status: 200,
    headers: {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      // Chunked: @hono/node-server then writes the head at once instead of reading ahead for a length.
      'transfer-encoding': 'chunked',
      'x-request-id': c.get('requestId'),
      // Proxies (nginx) must pass events on as they come.
      'x-accel-buffering': 'no',
    },
  });
}
