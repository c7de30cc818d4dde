/**
 * The HTTP/JSON transport: routes from the operation table, each request translated into a
 * handler input and the outcome or error back into JSON. No rule lives here.
 */
import { Hono, type Context } from 'hono';
import { etag } from 'hono/etag';
import type { UnofficialStatusCode } from 'hono/utils/http-status';
import type { RawBody } from '../../handlers/body.js';
import { SvcError } from '../../handlers/errors.js';
import { asSvcError, operations, type Operation } from '../../handlers/index.js';
import { IN_USE_RETRY_AFTER_SECONDS } from '../../handlers/write-once.js';
import { watchOperations } from '../../handlers/watch.js';
import { MCP_METHODS, MCP_PATH, MCP_SESSION_PATH, mountMcp, type McpOptions } from './mcp/server.js';
import { ClientClosedRequest, runRequest, type AccessNote, type AppServices, type RequestMeta } from '../request.js';
import { readBody } from './body.js';
import { addErrorHeaders, LSN_HEADER, replyText, RETRY_AFTER_SECONDS } from './reply.js';
import { mountProtectedResource, PRM_PATH, PRM_RESOURCES } from './protected-resource.js';
import { serveWatch } from './watch-sse.js';
import { requestIdFrom, requestMeta, type AppEnv, type PeerAddress } from './env.js';
import { OPENAPI_PATH, serveOpenApi } from './openapi.js';
import { mountConsole } from './ui/console.js';
import type { SessionOptions } from './ui/session.js';

/**
 * The HTTP/JSON and MCP app over any runtime's services; `peer` gives the client's address,
 * `readiness` answers /readyz; `opts.mcp` is what a runtime changes about MCP (Workers: the
 * JSON-schema validator).
 */
export function createApp(s: AppServices, peer: PeerAddress, opts: { mcp?: McpOptions; ui?: boolean | SessionOptions } = {}): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  // Every request: an id (X-Request-Id, echoed back) and one access-log line at info with
  // method, path, status, duration and author; never a credential, a body or a query string.
  app.use('*', async (c, next) => {
    const started = performance.now();
    const requestId = requestIdFrom(c.req.header('x-request-id'), s.newId);
    c.set('requestId', requestId);
    const access: AccessNote = {};
    c.set('access', access);
    try {
      await next();
    } finally {
      const status = c.res.status;
      if (status === 401 || status === 503) addErrorHeaders(c, s);
      // Answers built by `reply` carry it already; others (MCP, Hono's own) get it here.
      if (!c.get('replied')) c.res.headers.set('x-request-id', requestId);
      logAccess(s, c.req.method, c.req.path, status, started, access, requestId);
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
    app.on(op.method, op.path, (c) => serveWatch(c, s, op, requestMeta(c, s, peer)));
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
  // How to get a token (RFC 9728), for clients that sign in through the identity provider.
  mountProtectedResource(app, s);
  for (const r of PRM_RESOURCES) route('GET', PRM_PATH + r);
  // The read-only web console (docs/console.md), unless --ui=false.
  if (opts.ui) mountConsole(app, s, peer, opts.ui === true ? undefined : opts.ui);

  // A known path with another method: 405 with Allow (registered last, so it runs only
  // when no route of the path took the method).
  for (const [path, allowed] of methods) {
    const allow = [...allowed].sort().join(', ');
    app.all(path, (c) => {
      c.get('access').error = 'METHOD_NOT_ALLOWED';
      return c.json(
        new SvcError('METHOD_NOT_ALLOWED', `${c.req.method} is not allowed on ${c.req.path}; use ${allow}.`).body(),
        405,
        { allow },
      );
    });
  }

  app.notFound((c) => {
    c.get('access').error = 'NOT_FOUND';
    return c.json(new SvcError('NOT_FOUND', `No endpoint ${c.req.method} ${c.req.path}; see the README for the API.`).body(), 404);
  });
  app.onError((e, c) => {
    if (e instanceof ClientClosedRequest) {
      // The access log line says 499 at info; no one reads the answer.
      c.get('access').error = 'CLIENT_CLOSED';
      return c.body(null, 499 as UnofficialStatusCode);
    }
    const err = asSvcError(e, { log: s.log, requestId: c.get('requestId') ?? s.newId() });
    c.get('access').error = err.code;
    return c.json(err.body(), err.status as 500);
  });
  return app;
}

/**
 * The query parameter names of a URL as sent, repeats included. Most requests have no query:
 * they skip parsing the URL (a WHATWG URL per request was ~1% of a get's gateway CPU).
 */
export function queryNames(url: string): string[] {
  const hash = url.indexOf('#');
  const end = hash < 0 ? url.length : hash;
  // The first '?' before any '#' starts the query; URLSearchParams drops it (one leading '?').
  const q = url.indexOf('?');
  if (q < 0 || q >= end - 1) return [];
  return [...new URLSearchParams(url.slice(q, end)).keys()];
}

/** Liveness: the process is up and answering; independent of the database, 200 while draining too. */
export function healthz(c: Context): Response {
  return c.json({ status: 'ok' }, 200);
}

export async function readyz(c: Context, s: Pick<AppServices, 'readiness'>): Promise<Response> {
  const r = await s.readiness.check();
  if (r.ready) return c.json(r.warnings ? { status: 'ready', warnings: r.warnings } : { status: 'ready' }, 200);
  return c.json(new SvcError('UNAVAILABLE', r.message).body(), 503, { 'retry-after': String(RETRY_AFTER_SECONDS) });
}

async function handle(c: Context<AppEnv>, s: AppServices, op: Operation, peer: PeerAddress): Promise<Response> {
  const a = await answerOperation(s, op, requestMeta(c, s, peer), {
    url: c.req.url,
    header: (name) => c.req.header(name),
    params: () => c.req.param() as Record<string, string>,
    query: () => c.req.query(),
    body: () => readBody(c.req.raw),
  });
  return replyText(c, a.status, a.json, a.close, a.headers);
}

/** What answering an operation reads of an HTTP request, from Hono or from the Node adapter's direct path. */
export interface OperationRequest {
  /** The request target as sent (path and query), or the absolute URL: only its query is read. */
  url: string;
  header(name: string): string | undefined;
  params(): Record<string, string>;
  /** The first value of each query parameter. */
  query(): Record<string, string>;
  body(): Promise<RawBody>;
}

/** An operation's answer: status, JSON text, and the headers besides Content-Type and X-Request-Id. */
export interface OperationAnswer {
  status: number;
  json: string | readonly string[];
  /** The connection cannot carry another request (an oversized body was left unread). */
  close: boolean;
  headers: Record<string, string> | undefined;
}

/**
 * One API operation over HTTP, whichever adapter carries it (Hono's route, the Node direct
 * path): the write options from the request, the lifecycle (runtime/request.ts), and the
 * answer's status, text and headers.
 */
export async function answerOperation(s: AppServices, op: Operation, meta: RequestMeta, req: OperationRequest): Promise<OperationAnswer> {
  let close = false;
  let names = queryNames(req.url);
  let query = names.length === 0 ? {} : req.query();
  if (op.write) {
    // Issue 33: the key and `dry_run` reach the handlers as the context's write options. A
    // dry_run other than one `true` or `false` stays a parameter, which the handler refuses
    // (MALFORMED) at its step like any other.
    const key = req.header('idempotency-key');
    const dry = names.filter((n) => n === DRY_RUN);
    const dryRun = dry.length === 1 && (query[DRY_RUN] === 'true' || query[DRY_RUN] === 'false') ? query[DRY_RUN] === 'true' : undefined;
    if (dryRun !== undefined) {
      names = names.filter((n) => n !== DRY_RUN);
      const { [DRY_RUN]: _, ...rest } = query;
      query = rest;
    }
    meta.write = { ...(key !== undefined ? { idempotencyKey: key } : {}), ...(dryRun ? { dryRun } : {}) };
  }
  const r = await runRequest(s, meta, op, async () => {
    const body: RawBody = op.write ? await req.body() : { kind: 'none' };
    // The rest of an oversized body is never read, so this connection cannot carry another request.
    if (body.kind === 'too-large') close = true;
    return op.fromHttp({ params: req.params(), query, names, body });
  });
  let headers: Record<string, string> | undefined = r.lsn === null ? undefined : { [LSN_HEADER]: r.lsn };
  const also = (name: string, value: string) => (headers = { ...headers, [name]: value });
  if (!r.ok) {
    if (r.error.replayed) also(REPLAYED_HEADER, 'true');
    if (r.error.code === 'IDEMPOTENCY_KEY_IN_USE') also('retry-after', String(IN_USE_RETRY_AFTER_SECONDS));
    return { status: r.error.status, json: JSON.stringify(r.error.body()), close, headers };
  }
  if (r.out.replayed) also(REPLAYED_HEADER, 'true');
  // A body the handler already wrote as JSON text (history, a replayed answer) goes out as it is.
  return { status: r.out.created ? 201 : 200, json: r.out.json ?? JSON.stringify(r.out.body), close, headers };
}

/**
 * Every request's one access-log line at info (probes at debug): method, path, status,
 * duration and author; never a credential, a body or a query string.
 */
export function logAccess(s: AppServices, method: string, path: string, status: number, started: number, access: AccessNote, requestId: string): void {
  const line = {
    method,
    path: path.length > 512 ? `${path.slice(0, 512)}…` : path,
    status,
    duration_ms: Math.round((performance.now() - started) * 10) / 10,
    author: access.author,
    error: access.error,
    request_id: requestId,
  };
  // Probes come every few seconds from the kubelet: debug, so they do not drown the rest.
  if (path === '/readyz' || path === '/healthz') s.log.debug('request', line);
  else s.log.info('request', line);
}

/** The query parameter of a dry run (issue 33). */
const DRY_RUN = 'dry_run';
/** Set on an answer replayed from its idempotency key (draft-ietf-httpapi-idempotency-key-header). */
const REPLAYED_HEADER = 'idempotent-replayed';
