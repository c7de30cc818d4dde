/**
 * The HTTP/JSON transport: routes from the operation table, each request translated into a
 * handler input and the outcome or error back into JSON. No rule lives here.
 */
import { Hono, type Context } from 'hono';
import { etag } from 'hono/etag';
import { streamSSE } from 'hono/streaming';
import type { RawBody } from '../../handlers/body.js';
import { SvcError } from '../../handlers/errors.js';
import { asSvcError, operations, type Operation } from '../../handlers/index.js';
import { watchOperations } from '../../handlers/watch.js';
import type { WatchStream } from '../../handlers/watch-feed.js';
import { MCP_METHODS, MCP_PATH, MCP_SESSION_PATH, mountMcp, type McpOptions } from '../mcp/server.js';
import { runRequest, type AppServices } from '../request.js';
import { readBody } from './body.js';
import { requestIdFrom, requestMeta, type AppEnv, type PeerAddress } from './env.js';
import { OPENAPI_PATH, serveOpenApi } from './openapi.js';

/**
 * The HTTP/JSON and MCP app over any runtime's services; `peer` gives the client's address,
 * `readiness` answers /readyz; `opts.mcp` is what a runtime changes about MCP (Workers: the
 * JSON-schema validator).
 */
export function createApp(s: AppServices, peer: PeerAddress, opts: { mcp?: McpOptions } = {}): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  // Every request: an id (X-Request-Id, echoed back) and one access-log line at info with
  // method, path, status, duration and author; never a credential, a body or a query string.
  app.use('*', async (c, next) => {
    const started = performance.now();
    const requestId = requestIdFrom(c.req.header('x-request-id'), s.newId);
    c.set('requestId', requestId);
    try {
      await next();
    } finally {
      // Answers built by `reply` carry it already; others (MCP, Hono's own) get it here.
      if (!c.get('replied')) c.res.headers.set('x-request-id', requestId);
      const path = c.req.path.length > 512 ? `${c.req.path.slice(0, 512)}…` : c.req.path;
      const line = {
        method: c.req.method,
        path,
        status: c.res.status,
        duration_ms: Math.round((performance.now() - started) * 10) / 10,
        author: c.get('author'),
        error: c.get('errorCode'),
        request_id: requestId,
      };
      // Probes come every few seconds from the kubelet: debug, so they do not drown the rest.
      if (path === '/readyz' || path === '/healthz') s.log.debug('request', line);
      else s.log.info('request', line);
    }
  });

  app.get('/readyz', (c) => readyz(c, s));
  app.get('/healthz', (c) => healthz(c));

  const methods = new Map<string, Set<string>>();
  const route = (method: string, path: string) => methods.set(path, (methods.get(path) ?? new Set()).add(method));
  for (const op of Object.values(operations) as Operation[]) {
    app.on(op.method, op.path, (c) => handle(c, s, op, peer));
    route(op.method, op.path);
  }
  for (const op of Object.values(watchOperations) as Operation[]) {
    app.on(op.method, op.path, (c) => handleWatch(c, s, op, peer));
    route(op.method, op.path);
  }
  mountMcp(app, s, peer, opts.mcp);
  for (const m of MCP_METHODS) route(m, MCP_PATH);
  for (const m of MCP_METHODS) route(m, MCP_SESSION_PATH);
  route('GET', '/readyz');
  route('GET', '/healthz');
  // The API's OpenAPI document: no credential (the same for every caller), cached with an ETag.
  app.get(OPENAPI_PATH, etag(), serveOpenApi);
  route('GET', OPENAPI_PATH);

  // A known path with another method: 405 with Allow (registered last, so it runs only
  // when no route of the path took the method).
  for (const [path, allowed] of methods) {
    const allow = [...allowed].sort().join(', ');
    app.all(path, (c) => {
      c.set('errorCode', 'METHOD_NOT_ALLOWED');
      return c.json(
        new SvcError('METHOD_NOT_ALLOWED', `${c.req.method} is not allowed on ${c.req.path}; use ${allow}.`).body(),
        405,
        { allow },
      );
    });
  }

  app.notFound((c) => {
    c.set('errorCode', 'NOT_FOUND');
    return c.json(new SvcError('NOT_FOUND', `No endpoint ${c.req.method} ${c.req.path}; see the README for the API.`).body(), 404);
  });
  app.onError((e, c) => {
    const err = asSvcError(e, { log: s.log, requestId: c.get('requestId') ?? s.newId() });
    c.set('errorCode', err.code);
    return c.json(err.body(), err.status as 500);
  });
  return app;
}

/** Liveness: the process is up and answering; independent of the database, 200 while draining too. */
export function healthz(c: Context): Response {
  return c.json({ status: 'ok' }, 200);
}

export async function readyz(c: Context, s: Pick<AppServices, 'readiness'>): Promise<Response> {
  const r = await s.readiness.check();
  if (r.ready) return c.json({ status: 'ready' }, 200);
  return c.json(new SvcError('UNAVAILABLE', r.message).body(), 503);
}

async function handle(c: Context<AppEnv>, s: AppServices, op: Operation, peer: PeerAddress): Promise<Response> {
  let close = false;
  const r = await runRequest(s, requestMeta(c, s, peer), op, async () => {
    const body: RawBody = op.write ? await readBody(c.req.raw) : { kind: 'none' };
    // The rest of an oversized body is never read, so this connection cannot carry another request.
    if (body.kind === 'too-large') close = true;
    const names = [...new URL(c.req.url).searchParams.keys()];
    return op.fromHttp({ params: c.req.param() as Record<string, string>, query: c.req.query(), names, body });
  });
  if (r.identity) c.set('author', r.identity.author);
  if (!r.ok) {
    c.set('errorCode', r.error.code);
    return reply(c, r.error.status, r.error.body(), close);
  }
  return reply(c, r.out.created ? 201 : 200, r.out.body, close);
}

/**
 * A JSON answer with its headers as one plain object (content type and X-Request-Id): on
 * Node, @hono/node-server writes such a response straight to the socket, where `c.json`
 * plus a header set afterwards builds two `Headers` objects per request.
 */
function reply(c: Context<AppEnv>, status: number, body: unknown, close = false): Response {
  c.set('replied', true);
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': c.get('requestId') };
  if (close) headers.connection = 'close';
  return new Response(JSON.stringify(body), { status, headers });
}


/** How long a stream ended by the gateway (slow client, shutdown) may take to write its last event. */
const END_GRACE_MS = 1_000;

/**
 * A watch (docs/watch.md): the same request lifecycle as every operation, so every refusal
 * is a JSON error before the stream starts; then the handler's stream as Server-Sent Events:
 * `open` (where it starts), `change` (id: the resume token), comment-line heartbeats, and a
 * last `end` event when the gateway ends it. Last-Event-ID resumes.
 */
async function handleWatch(c: Context<AppEnv>, s: AppServices, op: Operation, peer: PeerAddress): Promise<Response> {
  const r = await runRequest(s, requestMeta(c, s, peer), op, () => {
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
