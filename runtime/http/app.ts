/**
 * The HTTP/JSON transport: routes from the operation table, each request translated into a
 * handler input and the outcome or error back into JSON. No rule lives here.
 */
import { randomUUID } from 'node:crypto';
import { Hono, type Context } from 'hono';
import { getConnInfo } from '@hono/node-server/conninfo';
import { MAX_BODY_BYTES, type RawBody } from '../../handlers/body.js';
import { SvcError } from '../../handlers/errors.js';
import { asSvcError, invoke, operations, type Operation } from '../../handlers/index.js';
import type { Identity } from '../../handlers/types.js';
import { authenticate } from '../identity/index.js';
import { makeCtx, type Services } from '../services.js';
import { MCP_METHODS, MCP_PATH, mountMcp } from '../mcp/server.js';
import { requestIdFrom, type AppEnv } from './env.js';

export function createApp(s: Services): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  // Every request: an id (X-Request-Id, echoed back) and one access-log line at info with
  // method, path, status, duration and author; never a credential, a body or a query string.
  app.use('*', async (c, next) => {
    const started = performance.now();
    const requestId = requestIdFrom(c.req.header('x-request-id'), randomUUID);
    c.set('requestId', requestId);
    try {
      await next();
    } finally {
      c.res.headers.set('x-request-id', requestId);
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
    app.on(op.method, op.path, (c) => handle(c, s, op));
    route(op.method, op.path);
  }
  mountMcp(app, s);
  for (const m of MCP_METHODS) route(m, MCP_PATH);
  route('GET', '/readyz');
  route('GET', '/healthz');

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
    const err = asSvcError(e, { log: s.log, requestId: c.get('requestId') ?? randomUUID() });
    c.set('errorCode', err.code);
    return c.json(err.body(), err.status as 500);
  });
  return app;
}

/** Liveness: the process is up and answering; independent of the database, 200 while draining too. */
export function healthz(c: Context): Response {
  return c.json({ status: 'ok' }, 200);
}

export async function readyz(c: Context, s: Services): Promise<Response> {
  const r = await s.readiness.check();
  if (r.ready) return c.json({ status: 'ready' }, 200);
  return c.json(new SvcError('UNAVAILABLE', r.message).body(), 503);
}

/**
 * Credentials first: a spent budget answers 429 before any check, every 401 spends it. Both
 * are counted in svc_rejections_total (fixed labels: no class, field or role is known yet);
 * the access log line of the request records them, never the credential.
 */
export async function authenticateRequest(s: Services, address: string, authorization: string | undefined): Promise<Identity> {
  if (s.budget.isExhausted(address)) {
    s.metrics.rejection('', '', '', 'rate_limited');
    throw new SvcError('RATE_LIMITED', 'Too many rejected credentials from your address; wait a few seconds and retry with a valid token.');
  }
  try {
    return await authenticate(s.providers, authorization);
  } catch (e) {
    if (e instanceof SvcError && e.code === 'UNAUTHENTICATED') {
      s.budget.spend(address);
      s.metrics.rejection('', '', '', 'unauthenticated');
    }
    throw e;
  }
}

export function clientAddress(c: Context<AppEnv>, trustProxy: number): string {
  let addr = '';
  try {
    addr = getConnInfo(c).remote.address ?? '';
  } catch {
    addr = '';
  }
  if (trustProxy > 0) {
    const hops = (c.req.header('x-forwarded-for') ?? '')
      .split(',')
      .map((h) => h.trim())
      .filter(Boolean);
    // The last `trustProxy` entries were added by proxies we trust; the one before is the client.
    const idx = hops.length - trustProxy;
    if (idx >= 0 && hops[idx]) addr = hops[idx];
  }
  return addr || 'unknown';
}

async function handle(c: Context<AppEnv>, s: Services, op: Operation): Promise<Response> {
  const requestId = c.get('requestId');
  try {
    const identity = await authenticateRequest(s, clientAddress(c, s.cfg.trustProxy), c.req.header('authorization'));
    c.set('author', identity.author);
    const ctx = makeCtx(s, identity, c.req.header('x-svc-scope'), requestId);
    const body: RawBody = op.write ? await readBody(c.req.raw) : { kind: 'none' };
    // The rest of an oversized body is never read, so this connection cannot carry another request.
    if (body.kind === 'too-large') c.header('connection', 'close');
    const names = [...new URL(c.req.url).searchParams.keys()];
    const input = op.fromHttp({ params: c.req.param() as Record<string, string>, query: c.req.query(), names, body });
    const out = await invoke(op, ctx, input);
    return c.json(out.body, out.status as 200);
  } catch (e) {
    const err = asSvcError(e, { log: s.log, requestId });
    c.set('errorCode', err.code);
    return c.json(err.body(), err.status as 400);
  }
}

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
 */
export async function readBody(req: Request, limit: number = MAX_BODY_BYTES): Promise<RawBody> {
  const tooLarge = { kind: 'too-large', limit } as const;
  const declared = Number(req.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > MAX_DRAIN_BYTES) return tooLarge;
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
      throw e;
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
  try {
    return { kind: 'text', text: new TextDecoder('utf-8', { fatal: true }).decode(buf) };
  } catch {
    // A decoder that replaced bad bytes with U+FFFD would store a value nobody sent.
    return { kind: 'invalid', reason: 'The request body is not valid UTF-8; send JSON encoded as UTF-8.' };
  }
}
