/**
 * The one request lifecycle every transport runs (HTTP/JSON, MCP, gRPC; on Node and on
 * Workers): authenticate (with the rejected-credential budget), build the handler context,
 * invoke the operation, map any error to the spec's SvcError. Transports only decode what
 * arrived and encode what comes back.
 *
 * `AppServices` is the seam a runtime adapter fills (docs/runtimes.md): nothing here imports
 * a Node module, a driver or a transport.
 */
import type { Db, DbSession } from '../db/port.js';
import { minLsnProblem } from '../db/lsn.js';
import type { ClassRegistry } from '../handlers/class-registry.js';
import type { Credential, Ctx, Logger, Metrics } from '../handlers/context.js';
import { SvcError } from '../handlers/errors.js';
import { asSvcError, invoke, type Operation } from '../handlers/index.js';
import type { Outcome } from '../handlers/pipeline.js';
import type { Identity, IdentityProvider } from '../handlers/types.js';
import type { WatchFeed } from '../handlers/watch-feed.js';
import type { WriteOptions } from '../handlers/write-once.js';
import { credentialExpiry } from './identity/expiry.js';
import { authenticate } from './identity/index.js';

/** What answering a request needs, whatever the runtime. */
export interface AppServices {
  db: Db;
  classes: ClassRegistry;
  metrics: Metrics;
  log: Logger;
  providers: IdentityProvider[];
  /** The rejected-credential budget per client address (429 RATE_LIMITED). */
  budget: { isExhausted(address: string): boolean; spend(address: string): void; refund(address: string): void };
  readiness: { check(): Promise<{ ready: true; warnings?: string[] } | { ready: false; message: string }> };
  /** Proxy hops to trust in X-Forwarded-For for the client address. */
  trustProxy: number;
  cursorKey(): Promise<string>;
  /** A fresh request id when the client sent none. */
  newId(): string;
  /** The process's change hub for watch streams; absent on runtimes without a long-lived process. */
  watch?: WatchFeed;
  /** How long a write's answer is kept under its idempotency key (`--idempotency-ttl`); default 24 h. */
  idempotencyTtlSeconds?: number;
}

/** What a transport read off the request before decoding its input. */
export interface RequestMeta {
  /** The client address (see clientAddress), for the rejected-credential budget. */
  address: string;
  authorization: string | undefined;
  scope: string | undefined;
  requestId: string;
  /** A write's idempotency key and dry-run flag (handlers/write-once.ts). */
  write?: WriteOptions;
  /** X-Kslate-Min-Lsn (gRPC `x-kslate-min-lsn`) as sent: the read-your-writes token (docs/ha.md); checked when the caller runs. */
  minLsn?: string;
  /** The request's access-log line, filled by the lifecycle (`authenticateCaller`, `Caller.run`); the transport writes it. */
  access?: AccessNote;
}

/**
 * What the one access-log line of a request says about the caller: who it is once the
 * credential is accepted, and the spec's error code of a refusal (of the credential or of an
 * operation). Written here, by the lifecycle, for every transport; a transport adds only
 * the refusals it makes itself (404/405 of a path, a client gone mid-upload).
 */
export interface AccessNote {
  author?: string;
  error?: string;
}

/**
 * The client address: the peer's, or with `trustProxy` N the entry N hops back in
 * X-Forwarded-For (the last N entries were added by proxies we trust).
 */
export function clientAddress(peer: string, forwardedFor: string | undefined, trustProxy: number): string {
  return trustedHop(forwardedFor, trustProxy) || peer || 'unknown';
}

/**
 * The entry of a comma-separated X-Forwarded-* header that the outermost of `trustProxy`
 * trusted proxies wrote (N hops back from the end), or undefined without one.
 */
export function trustedHop(header: string | undefined, trustProxy: number): string | undefined {
  if (trustProxy <= 0 || !header) return undefined;
  const hops = header
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean);
  const idx = hops.length - trustProxy;
  return idx >= 0 ? hops[idx] : undefined;
}

/**
 * Credentials first: a spent budget answers 429 before any check, every 401 spends it. A
 * provider about to call out for a token (a TokenReview) charges the budget first
 * (AuthAttempt), so a flood of made-up tokens meets 429 before it reaches the provider; the
 * charge is the 401's spend, and is given back when the token is accepted. Both are counted in
 * svc_rejections_total (fixed labels: no class, field or role is known yet); the access log
 * line of the request records them, never the credential.
 */
export async function authenticateRequest(s: AppServices, address: string, authorization: string | undefined): Promise<Identity> {
  if (s.budget.isExhausted(address)) throw rateLimited(s);
  let charged = false;
  const attempt = {
    charge() {
      if (charged) return;
      if (s.budget.isExhausted(address)) throw rateLimited(s);
      s.budget.spend(address);
      charged = true;
    },
  };
  try {
    const identity = await authenticate(s.providers, authorization, attempt);
    if (charged) s.budget.refund(address);
    return identity;
  } catch (e) {
    if (e instanceof SvcError && e.code === 'UNAUTHENTICATED') {
      if (!charged) s.budget.spend(address);
      s.metrics.rejection('', '', '', 'unauthenticated');
    }
    // A charge for a check that could not be made (503) stays spent: an address that keeps
    // sending new tokens while the provider is down or its queue full meets 429 too.
    throw e;
  }
}

/**
 * The credential of a request, to be checked again while something it opened runs (a watch
 * stream, an MCP subscription): the providers judge `authorization` again, and it holds while
 * they name the same caller. A re-check spends no rejected-credential budget: the client sent
 * nothing new.
 */
export function credentialOf(s: Pick<AppServices, 'providers'>, authorization: string | undefined, identity: Identity): Credential {
  let expiresAt: number | null | undefined;
  return {
    get expiresAt() {
      return (expiresAt ??= credentialExpiry(authorization));
    },
    async check() {
      try {
        return (await authenticate(s.providers, authorization)).author === identity.author;
      } catch (e) {
        if (e instanceof SvcError && e.code === 'UNAUTHENTICATED') return false;
        throw e;
      }
    },
  };
}

function rateLimited(s: AppServices): SvcError {
  s.metrics.rejection('', '', '', 'rate_limited');
  return new SvcError('RATE_LIMITED', 'Too many rejected credentials from your address; wait a few seconds and retry with a valid token.');
}

/**
 * A read-your-writes token as sent, checked: MALFORMED names what to send. Undefined (not
 * sent) passes; an empty header is refused like any other malformed value.
 */
export function checkMinLsn(minLsn: string | undefined): string | null {
  if (minLsn === undefined) return null;
  const problem = minLsnProblem(minLsn);
  if (problem) throw new SvcError('MALFORMED', problem);
  return minLsn.trim();
}

/** The WAL position the request's writes reached (the answer's X-Kslate-Lsn), or null. */
export function lsnOf(ctx: Ctx): string | null {
  return (ctx.db as Partial<DbSession>).lsn ?? null;
}

/**
 * The request's own view of the database where the runtime's has one (db/port.ts SessionDb):
 * its reads honour `minLsn` and it remembers the LSN its writes reached.
 */
export function sessionOf(db: Db, minLsn: string | null = null): Db {
  const sessions = db as Db & { session?: (minLsn: string | null) => DbSession };
  return typeof sessions.session === 'function' ? sessions.session(minLsn) : db;
}

/** The per-request context handed to handlers; `minLsn`: the request's checked read-your-writes token (checkMinLsn). */
export function makeCtx(
  s: AppServices,
  identity: Identity,
  scope: string | undefined,
  requestId: string = s.newId(),
  credential?: Credential,
  write?: WriteOptions,
  minLsn: string | null = null,
): Ctx {
  // One object literal with every key (absent ones undefined): the same shape on every
  // request, without the spread copies of optional parts (0.9% of a get's gateway CPU).
  return {
    writeOptions: write,
    idempotencyTtlSeconds: s.idempotencyTtlSeconds,
    identity,
    scope,
    requestId,
    now: () => new Date(),
    log: s.log,
    metrics: s.metrics,
    classes: s.classes,
    db: sessionOf(s.db, minLsn),
    cursorKey: () => s.cursorKey(),
    trace: {},
    watch: s.watch,
    credential,
  };
}

/**
 * The connection ended before the request's body arrived whole: the client went away (or
 * --request-timeout closed it) mid-upload. Nobody is left to answer and nothing went wrong on
 * our side: the HTTP transport logs it as 499 (nginx's "client closed request") at info,
 * never as an internal fault.
 */
export class ClientClosedRequest extends Error {
  constructor(cause?: unknown) {
    super('the client closed the connection before its request body arrived', { cause });
    this.name = 'ClientClosedRequest';
  }
}

export type RequestResult = (
  | { ok: true; identity: Identity; out: Outcome }
  /** `identity` is absent when the credential was refused. */
  | { ok: false; identity?: Identity; error: SvcError }
) & {
  /** The WAL position the request's writes reached (X-Kslate-Lsn; docs/ha.md), or null when it wrote nothing. */
  lsn: string | null;
};

/** How `Caller.run` differs from the caller's own request. */
export interface RunOptions {
  /** Count the call in the operation's latency histogram (`invoke`'s `timed`). */
  timed?: boolean;
  /** Run without the caller's X-Svc-Scope (a check that is not a read the scope should count). */
  unscoped?: boolean;
  /** The credential to follow instead of the request's (an MCP session's latest). */
  credential?: Credential;
  /** A write's idempotency key and dry-run flag (handlers/write-once.ts). */
  write?: WriteOptions;
  /** The read-your-writes token of this call, checked (checkMinLsn; MCP `min_lsn`), instead of the request's X-Kslate-Min-Lsn. */
  minLsn?: string | null;
  /** Told the WAL position the call's writes reached (X-Kslate-Lsn), or null, once it ends (answered or refused). */
  onLsn?(lsn: string | null): void;
}

/**
 * An authenticated caller: who it is, the scope and request id it sent, and `run`, the one
 * way any transport calls an operation (HTTP routes, MCP tools, resources and sessions, gRPC,
 * the console, Workers). Each `run` builds a fresh handler context (handlers keep per-call
 * trace state on it), invokes, and maps any error to the spec's SvcError, which it throws.
 */
export interface Caller {
  readonly identity: Identity;
  readonly scope: string | undefined;
  readonly requestId: string;
  /**
   * Decode the input (a SvcError from `decode` is the caller's answer like the handler's) and
   * run the operation. A ClientClosedRequest is thrown on as it is: there is no one to answer.
   */
  run<I>(op: Operation<I>, decode: () => I | Promise<I>, opts?: RunOptions): Promise<Outcome>;
  /** Any error as the SvcError the caller is answered (an unexpected fault is logged, INTERNAL). */
  errorOf(e: unknown): SvcError;
}

/** The caller of a request whose credential was judged (`authenticateCaller`, or a session that holds one). */
export function callerFor(
  s: AppServices,
  identity: Identity,
  meta: Pick<RequestMeta, 'scope' | 'requestId' | 'authorization' | 'minLsn' | 'access'>,
): Caller {
  if (meta.access) meta.access.author = identity.author;
  const errorOf = (e: unknown) => asSvcError(e, { log: s.log, requestId: meta.requestId });
  return {
    identity,
    scope: meta.scope,
    requestId: meta.requestId,
    errorOf,
    async run<I>(op: Operation<I>, decode: () => I | Promise<I>, opts: RunOptions = {}): Promise<Outcome> {
      let ctx: Ctx | undefined;
      try {
        const minLsn = opts.minLsn !== undefined ? opts.minLsn : checkMinLsn(meta.minLsn);
        const input = await decode();
        const credential = opts.credential ?? (s.watch ? credentialOf(s, meta.authorization, identity) : undefined);
        ctx = makeCtx(s, identity, opts.unscoped ? undefined : meta.scope, meta.requestId, credential, opts.write, minLsn);
        return await invoke(op, ctx, input, { timed: opts.timed });
      } catch (e) {
        if (e instanceof ClientClosedRequest) throw e;
        const err = errorOf(e);
        if (meta.access) meta.access.error = err.code;
        throw err;
      } finally {
        opts.onLsn?.(ctx ? lsnOf(ctx) : null);
      }
    },
  };
}

/** `authenticate → caller`: the credential check (with its budget), then the caller that runs operations. */
export async function authenticateCaller(s: AppServices, meta: RequestMeta): Promise<Caller> {
  let identity: Identity;
  try {
    identity = await authenticateRequest(s, meta.address, meta.authorization);
  } catch (e) {
    const err = asSvcError(e, { log: s.log, requestId: meta.requestId });
    if (meta.access) meta.access.error = err.code;
    throw err;
  }
  return callerFor(s, identity, meta);
}

/**
 * One request: authenticate, decode (after the credential check, so an anonymous caller
 * learns nothing from input errors), build the context, invoke, and map any error. A
 * ClientClosedRequest from `decode` is thrown on: there is no one to answer.
 */
export async function runRequest<I>(
  s: AppServices,
  meta: RequestMeta,
  op: Operation<I>,
  decode: () => I | Promise<I>,
  opts: { timed?: boolean } = {},
): Promise<RequestResult> {
  let caller: Caller | undefined;
  let lsn: string | null = null;
  try {
    caller = await authenticateCaller(s, meta);
    const out = await caller.run(op, decode, { ...opts, ...(meta.write ? { write: meta.write } : {}), onLsn: (l) => (lsn = l) });
    return { ok: true, identity: caller.identity, out, lsn };
  } catch (e) {
    if (e instanceof ClientClosedRequest) throw e;
    return { ok: false, identity: caller?.identity, error: asSvcError(e, { log: s.log, requestId: meta.requestId }), lsn };
  }
}
