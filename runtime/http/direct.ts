/**
 * The Node adapter's direct path for the API's reads (issue 38 item 3; docs/performance.md
 * "the HTTP direct path for reads"): a GET of a read operation (get, history, query, the
 * class list and a class, checkpoint load) goes from node:http straight to the one request lifecycle, without the
 * Web Request and Response that @hono/node-server builds around it and Hono's routing and
 * middleware. It takes only what Hono would route to the same operation with the same inputs
 * and answers it with the same functions (`answerOperation`, `errorHeader`, `logAccess`), so
 * the answer is the same bytes: test/transports/http-direct.test.ts sends the same requests
 * to a gateway with it and one without and compares them. Everything else (writes, watch,
 * MCP, the console, a target or Host that @hono/node-server would rewrite or refuse) returns
 * false and goes to Hono as before.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { getQueryParam } from 'hono/utils/url';
import { asSvcError, operations, type Operation } from '../../handlers/index.js';
import { watchOperations } from '../../handlers/watch.js';
import { clientAddress, type AccessNote, type AppServices, type RequestMeta } from '../request.js';
import { answerOperation, logAccess } from './app.js';
import { requestIdFrom, type RequestView } from './env.js';
import { errorHeader, utf8 } from './reply.js';

/**
 * Request targets @hono/node-server passes on unchanged (its `reValidRequestUrl` and
 * `reDotSegment`, @hono/node-server 2.1): any other is rewritten through `new URL` or
 * refused there, so it is left to that path. '%' is not in the set, so no parameter needs
 * decoding.
 */
const PASSED_AS_SENT = /^\/[!#$&-;=?-[\]_a-z~]*$/;
const DOT_SEGMENT = /\/\.\.?(?:[/?#]|$)/;
/** Host headers it builds the URL from without a `new URL` (its `reValidHost`). */
const PLAIN_HOST = /^[a-z0-9._-]+(?::(?:[1-5]\d{3,4}|[6-9]\d{3}))?$/;

interface Route {
  op: Operation | undefined;
  pattern: RegExp;
  names: string[];
}

/** A route's path as Hono matches it: `:name` is one segment (no '/'); no '#' here, as Hono would keep it in the path. */
function compile(op: Operation | undefined, path: string): Route {
  const names: string[] = [];
  const source = path.replace(/:([a-z]+)/g, (_, name: string) => (names.push(name), '([^/?#]+)'));
  return { op, pattern: new RegExp(`^${source}$`), names };
}

/**
 * The direct path over `s`: a request listener that answers and returns true, or returns false
 * without touching the request when Hono must take it.
 */
export function directReads(s: AppServices): (req: IncomingMessage, res: ServerResponse) => boolean {
  // Every GET route of the API, in Hono's order (operations first, then watch); a request
  // whose first match is a watch stream is Hono's.
  const routes: Route[] = [
    ...(Object.values(operations) as Operation[]).filter((op) => op.method === 'GET').map((op) => compile(op.write ? undefined : op, op.path)),
    ...(Object.values(watchOperations) as Operation[]).filter((op) => op.method === 'GET').map((op) => compile(undefined, op.path)),
  ];
  return (req, res) => {
    if (req.method !== 'GET') return false;
    const target = req.url ?? '';
    if (!PASSED_AS_SENT.test(target) || DOT_SEGMENT.test(target)) return false;
    const host = req.headers.host;
    if (host === undefined || !PLAIN_HOST.test(host)) return false;
    const q = target.indexOf('?');
    const path = q < 0 ? target : target.slice(0, q);
    let route: Route | undefined;
    let m: RegExpExecArray | null = null;
    for (const r of routes) {
      m = r.pattern.exec(path);
      if (m) {
        route = r;
        break;
      }
    }
    if (!route?.op || !m) return false;
    answer(s, route, m, req, res, path, host);
    return true;
  };
}

function answer(s: AppServices, route: Route, m: RegExpExecArray, req: IncomingMessage, res: ServerResponse, path: string, host: string): void {
  const started = performance.now();
  const header = rawHeader(req.rawHeaders);
  const requestId = requestIdFrom(header('x-request-id'), s.newId);
  const access: AccessNote = {};
  const url = `${(req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http'}://${host}${req.url}`;
  const view: RequestView = { url, path, header };
  const meta: RequestMeta = {
    address: clientAddress(req.socket.remoteAddress ?? '', header('x-forwarded-for'), s.trustProxy),
    authorization: header('authorization'),
    scope: header('x-svc-scope'),
    requestId,
    minLsn: header('x-kslate-min-lsn'),
    access,
  };
  const params: Record<string, string> = {};
  route.names.forEach((name, i) => (params[name] = m[i + 1]));
  const send = (status: number, json: string | readonly string[], extra: Record<string, string> | undefined) => {
    // A page in parts (history) is encoded part by part into one byte array, as replyText does.
    const body = typeof json === 'string' ? json : utf8(json);
    const headers: Record<string, string | number> = { 'content-type': 'application/json', 'x-request-id': requestId, ...extra };
    const also = errorHeader(status, view, s);
    if (also && headers[also[0]] === undefined) headers[also[0]] = also[1];
    headers['content-length'] = typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
    res.writeHead(status, headers);
    res.end(body);
    logAccess(s, 'GET', path, status, started, access, requestId);
  };
  answerOperation(s, route.op!, meta, {
    url: req.url ?? '',
    header,
    params: () => params,
    query: () => getQueryParam(url) as Record<string, string>,
    body: () => Promise.resolve({ kind: 'none' }),
  })
    .then(
      (a) => send(a.status, a.json, a.headers),
      (e: unknown) => {
        // As Hono's onError: a read throws past the lifecycle only on a fault of its own.
        const err = asSvcError(e, { log: s.log, requestId });
        access.error = err.code;
        send(err.status, JSON.stringify(err.body()), undefined);
      },
    )
    .catch((e: unknown) => {
      // Writing the answer or its log line failed: the request is not left hanging, nor the rejection unhandled.
      s.log.error('answering a read on the direct path failed; its connection is closed if the answer was not complete', {
        request_id: requestId,
        error: e instanceof Error ? e.message : String(e),
      });
      if (!res.writableEnded) res.destroy();
    });
}

/**
 * A request header as the Web `Headers` of @hono/node-server reads it: every line of that
 * name, whitespace-trimmed, joined with ", " (Node's `req.headers` keeps only the first
 * Authorization or Host, for one).
 */
function rawHeader(raw: string[]): (name: string) => string | undefined {
  return (name) => {
    let value: string | undefined;
    for (let i = 0; i < raw.length; i += 2) {
      const n = raw[i];
      if (n.length !== name.length || n.toLowerCase() !== name) continue;
      const v = trimHttpWhitespace(raw[i + 1]);
      value = value === undefined ? v : `${value}, ${v}`;
    }
    return value;
  };
}

/** Leading and trailing HTTP whitespace (tab, LF, CR, space) off, as the Fetch standard normalizes a header value. */
function trimHttpWhitespace(v: string): string {
  let start = 0;
  let end = v.length;
  while (start < end && HTTP_WS.has(v.charCodeAt(start))) start++;
  while (end > start && HTTP_WS.has(v.charCodeAt(end - 1))) end--;
  return start === 0 && end === v.length ? v : v.slice(start, end);
}

const HTTP_WS = new Set([9, 10, 13, 32]);
