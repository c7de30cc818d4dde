import type { Context } from 'hono';
import { clientAddress, type AccessNote, type AppServices, type RequestMeta } from '../request.js';
/** What the HTTP app keeps per request (Hono context variables), shared by the API routes and MCP. */
export type AppEnv = {
  Variables: {
    /** X-Request-Id: the client's when it is a sane token, else a fresh UUID; in logs and error bodies. */
    requestId: string;
    /** The access-log line's author and error code: filled by the lifecycle (runtime/request.ts), or by the app for its own refusals. */
    access: AccessNote;
    /** The answer already carries X-Request-Id (runtime/http/app.ts `reply`). */
    replied?: boolean;
  };
};

export const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The request id to use: a well-formed incoming X-Request-Id (so a proxy's id carries through), else a new one. */
export function requestIdFrom(header: string | undefined, fresh: () => string): string {
  return header !== undefined && REQUEST_ID.test(header) ? header : fresh();
}

/**
 * What the answer's headers may read of a request, whatever carries it: Hono's `c.req`, or
 * the Node adapter's direct path (runtime/http/direct.ts). `url` is absolute (scheme and host).
 */
export interface RequestView {
  readonly url: string;
  readonly path: string;
  header(name: string): string | undefined;
}

/** The peer address of a request as the runtime sees it (Node: the socket; Workers: cf-connecting-ip). */
export type PeerAddress = (c: Context<AppEnv>) => string;

/** The address, credential, scope and id of an HTTP request (HTTP/JSON and MCP). */
export function requestMeta(c: Context<AppEnv>, s: AppServices, peer: PeerAddress): RequestMeta {
  return {
    address: clientAddress(peer(c), c.req.header('x-forwarded-for'), s.trustProxy),
    authorization: c.req.header('authorization'),
    scope: c.req.header('x-svc-scope'),
    requestId: c.get('requestId'),
    minLsn: c.req.header('x-kslate-min-lsn'),
    access: c.get('access'),
  };
}
