/**
 * MCP sessions and resource subscriptions (issue 16; docs/mcp.md "Subscriptions").
 *
 * /mcp stays stateless: any replica answers any POST, no session id. A client that wants
 * `notifications/resources/updated` connects to /mcp/session instead: its `initialize`
 * opens a session (an Mcp-Session-Id from the SDK's `sessionIdGenerator`) held by this
 * process in a bounded map, the client opens the transport's standalone GET event stream,
 * and `resources/subscribe` on a record starts the record's watch (handlers/watch.ts, which
 * already applies the caller's read scope); each change the caller may see becomes one
 * notification with the resource's uri on that stream.
 *
 * Why a second endpoint and not sessions on /mcp: a client learns its session id only from
 * the answer to `initialize`, before it opens any GET stream, and /mcp must keep answering
 * `initialize` without one (and GET with 405). The session's state lives on the replica that
 * answered `initialize`, so a load balancer must route /mcp/session by Mcp-Session-Id; any
 * other replica answers 404 (the SDK's "Session not found"), on which a client initializes
 * again (MCP, Streamable HTTP, "Session Management").
 *
 * Bounds: at most `maxSessions` sessions per process (one more `initialize` answers 503
 * UNAVAILABLE) and `maxSessionsPerIdentity` per identity (429 RATE_LIMITED), `maxSubscriptions` per session; each subscription also holds one of the
 * process's watch streams (--watch-max-streams). A session with no GET stream open and no
 * request for `idleMs` ends, and so does one whose client leaves a notification untaken for
 * `idleMs` (slow); notifications are coalesced per resource while one is waiting, so a slow
 * client costs at most one queued notification per subscription. Shutdown ends them all.
 *
 * The credential (issue 31 item 10): a session keeps the latest credential its client sent
 * (each request may bring a fresher token), and its subscriptions' watches check that one
 * again as every watch stream does. Once it is refused (revoked, or expired and not
 * replaced), the session ends: its GET stream closes and no notification follows.
 */
import type { Context } from 'hono';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Credential, Logger } from '../../../handlers/context.js';
import { SvcError } from '../../../handlers/errors.js';
import { operations, type Operation } from '../../../handlers/index.js';
import { watchOperations, type WatchRecordInput } from '../../../handlers/watch.js';
import type { EndReason, WatchStream } from '../../../handlers/watch-feed.js';
import type { AppEnv } from '../env.js';
import type { Limit } from '../../metrics.js';
import { credentialOf, type AppServices, type Caller } from '../../request.js';
import { ResourceRefusal, routeOf } from './resources.js';
import { createMcpServer, MAX_MCP_BODY_BYTES, readMcpPost, tooLarge, type McpExtra, type McpOptions, type SessionEndpoint } from './server.js';

export interface SessionLimits {
  /** Sessions one process holds at once (--mcp-max-sessions). */
  maxSessions: number;
  /** Sessions one identity holds at once (--mcp-max-sessions-per-identity). */
  maxSessionsPerIdentity: number;
  /** Subscriptions one session holds at once (--mcp-max-subscriptions). */
  maxSubscriptions: number;
  /** A session without a GET stream and without requests, or with a notification its client has not taken, ends after this (--mcp-session-idle). */
  idleMs: number;
}

const NOTIFICATION = 'notifications/resources/updated';

/** The JSON-RPC error the SDK answers for an unknown session (and a client re-initializes on). */
function sessionNotFound(): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }), {
    status: 404,
    headers: { 'content-type': 'application/json' },
  });
}

/** The process's MCP sessions: a bounded map, an idle sweep, and shutdown. */
export class McpSessions implements SessionEndpoint {
  private readonly live = new Map<string, Session>();
  /** Sessions being initialized: counted against the cap before they are in `live`. */
  private opening = 0;
  private sweeper: ReturnType<typeof setInterval> | null = null;
  private closed = false;
  /** Sessions opening or open, per author (the per-identity cap). */
  private readonly perAuthor = new Map<string, number>();

  constructor(
    readonly limits: SessionLimits,
    private readonly log: Logger,
    /** Counts refusals by a cap (svc_limit_refusals_total). */
    private readonly refused: (limit: Limit) => void = () => undefined,
  ) {}

  /** Sessions open now. */
  get size(): number {
    return this.live.size;
  }

  /** One request on /mcp/session, after the credential check. */
  async handle(c: Context<AppEnv>, s: AppServices, caller: Caller, opts: McpOptions): Promise<Response> {
    const identity = caller.identity;
    let req = c.req.raw;
    let parsedBody: unknown;
    if (req.method === 'POST') {
      const body = await readMcpPost(req);
      if (body === 'too-large') return tooLarge();
      ({ req, parsedBody } = body);
    }
    const authInfo: AuthInfo = { token: '', clientId: identity.author, scopes: [], extra: { caller } };
    const credential = credentialOf(s, c.req.header('authorization'), identity);
    const sid = c.req.header('mcp-session-id');
    if (sid === undefined) {
      const initialize = req.method === 'POST' && (Array.isArray(parsedBody) ? parsedBody.some(isInitializeRequest) : isInitializeRequest(parsedBody));
      if (!initialize) {
        // What the SDK answers a session server's request without a session id.
        return new Response(
          JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: Mcp-Session-Id header is required' }, id: null }),
          { status: 400, headers: { 'content-type': 'application/json' } },
        );
      }
      const refusal = this.admit(identity.author);
      if (refusal) {
        c.get('access').error = refusal.code;
        return c.json(refusal.body(), refusal.status as 503);
      }
      this.opening++;
      const session = new Session(this, s, identity.author, credential, opts, this.log);
      this.count(session);
      try {
        await session.ready;
        const res = await session.transport.handleRequest(req, { parsedBody, authInfo });
        const id = session.transport.sessionId;
        if (id !== undefined && res.ok && !this.closed) {
          this.live.set(id, session);
          this.arm();
        } else await session.close();
        return res;
      } catch (e) {
        await session.close();
        throw e;
      } finally {
        this.opening--;
      }
    }
    const session = this.live.get(sid);
    // A session is its creator's: another identity learns nothing, not even that it exists.
    if (!session || session.author !== identity.author) return sessionNotFound();
    session.touch(credential);
    const res = await session.transport.handleRequest(req, { parsedBody, authInfo });
    if (req.method === 'GET' && res.status === 200 && res.body) return session.attachStream(res);
    return res;
  }

  /** Shutdown: every session ends now (its GET stream closes, its subscriptions stop); no new one opens. */
  close(): void {
    this.closed = true;
    for (const session of [...this.live.values()]) void session.close();
    this.stopSweep();
  }

  /** Why a new session of `author` cannot open now (503 the process's cap or shutdown, 429 the identity's), or null. */
  private admit(author: string): SvcError | null {
    if (this.closed) return new SvcError('UNAVAILABLE', 'The gateway is shutting down; connect to another replica.');
    if (this.live.size + this.opening >= this.limits.maxSessions) {
      this.refused('mcp_sessions');
      return new SvcError(
        'UNAVAILABLE',
        `This gateway holds its maximum of ${this.limits.maxSessions} MCP sessions (--mcp-max-sessions); retry shortly or on another replica, or use /mcp (stateless) if you do not subscribe.`,
      );
    }
    if ((this.perAuthor.get(author) ?? 0) >= this.limits.maxSessionsPerIdentity) {
      this.refused('mcp_sessions_per_identity');
      return new SvcError(
        'RATE_LIMITED',
        `You hold the maximum of ${this.limits.maxSessionsPerIdentity} MCP sessions one identity may have on this gateway (--mcp-max-sessions-per-identity); end one you no longer use (DELETE /mcp/session with its Mcp-Session-Id) or subscribe within one session.`,
      );
    }
    return null;
  }

  /** A session counts against its author's cap from its initialize until it ends. */
  private count(session: Session): void {
    session.counted = true;
    this.perAuthor.set(session.author, (this.perAuthor.get(session.author) ?? 0) + 1);
  }

  /** @internal A session that ended leaves the map. */
  forget(session: Session): void {
    const id = session.transport.sessionId;
    if (id !== undefined && this.live.get(id) === session) this.live.delete(id);
    if (session.counted) {
      session.counted = false;
      const n = (this.perAuthor.get(session.author) ?? 1) - 1;
      if (n > 0) this.perAuthor.set(session.author, n);
      else this.perAuthor.delete(session.author);
    }
    if (this.live.size === 0) this.stopSweep();
  }

  private arm(): void {
    if (this.sweeper) return;
    const every = Math.max(50, Math.min(5_000, Math.floor(this.limits.idleMs / 2)));
    this.sweeper = setInterval(() => {
      const now = Date.now();
      for (const session of [...this.live.values()]) {
        const why = session.expired(now, this.limits.idleMs);
        if (why) {
          this.log.info('mcp session ended', { reason: why, author: session.author, subscriptions: session.subscriptionCount });
          void session.close();
        }
      }
    }, every);
    this.sweeper.unref?.();
  }

  private stopSweep(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
  }
}

/** One subscription: a record's watch, and what it notifies. */
interface Subscription {
  uri: string;
  cls: string;
  id: string;
  /** `?fields=a,b` on the uri: only changes of these fields change the resource. */
  fields: Set<string> | null;
  caller: Caller;
  stream: WatchStream;
  /** The record_version the watch has reached: where a restarted watch resumes. */
  after: number;
  ended: boolean;
}

/** One client's session: its MCP server and stateful transport, its subscriptions and its GET stream. */
class Session {
  readonly transport: WebStandardStreamableHTTPServerTransport;
  private readonly server: Server;
  private readonly subs = new Map<string, Subscription>();
  /** Subscribes under way, counted against the cap. */
  private subscribing = 0;
  private lastUsed = Date.now();
  /** The GET stream now open (a token), or null. */
  private stream: object | null = null;
  /** Notifications written to the GET stream and not yet taken by the client's connection, by uri, with when. */
  private readonly inflight = new Map<string, number>();
  /** Notifications owed while no GET stream is open (sent when one opens). */
  private readonly owed = new Set<string>();
  private closed = false;
  /** Counted against its author's cap (McpSessions). */
  counted = false;
  /**
   * What the subscriptions' watches check again: the latest credential the client sent (a
   * client may refresh its token on any request of the session).
   */
  private readonly credential: Credential;

  constructor(
    private readonly registry: McpSessions,
    private readonly s: AppServices,
    readonly author: string,
    private latest: Credential,
    opts: McpOptions,
    private readonly log: Logger,
  ) {
    const current = () => this.latest;
    this.credential = {
      get expiresAt() {
        return current().expiresAt;
      },
      check: () => current().check(),
    };
    this.transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      enableJsonResponse: true,
      maxRequestBodySize: MAX_MCP_BODY_BYTES,
      // DELETE ends the session.
      onsessionclosed: () => void this.close(),
    });
    this.server = createMcpServer(callerOf, opts, {
      subscribe: (uri, extra) => this.subscribe(uri, callerOf(extra)),
      unsubscribe: async (uri) => this.unsubscribe(uri),
    });
    this.server.onclose = () => void this.close();
    this.ready = this.server.connect(this.transport);
  }

  /** Settles once the server is connected to the transport. */
  readonly ready: Promise<void>;

  get subscriptionCount(): number {
    return this.subs.size;
  }

  /** A request of the client: the session is in use, and `credential` is the latest it sent. */
  touch(credential?: Credential): void {
    this.lastUsed = Date.now();
    if (credential) this.latest = credential;
  }

  /** Why the session should end now, if it should. */
  expired(now: number, idleMs: number): 'idle' | 'slow' | null {
    for (const at of this.inflight.values()) if (now - at > idleMs) return 'slow';
    if (this.stream === null && now - this.lastUsed > idleMs) return 'idle';
    return null;
  }

  /**
   * `resources/subscribe`: the resource must be readable now (the checks of
   * `resources/read`, so the same refusals), then the record's watch runs with the caller's
   * identity and X-Svc-Scope. Subscribing again to a uri already subscribed is a no-op.
   */
  async subscribe(uri: string, caller: Caller): Promise<void> {
    if (this.subs.has(uri)) return;
    if (this.subs.size + this.subscribing >= this.registry.limits.maxSubscriptions) {
      throw new ResourceRefusal(
        new SvcError(
          'UNAVAILABLE',
          `This session holds its maximum of ${this.registry.limits.maxSubscriptions} subscriptions (--mcp-max-subscriptions); unsubscribe from one first.`,
        ),
      );
    }
    this.subscribing++;
    try {
      const route = routeOf(uri);
      if (route.op !== (operations.get as Operation)) {
        throw new ResourceRefusal(
          new SvcError(
            'MALFORMED',
            'Subscriptions are offered on record resources, kslate://records/{class}/{id} (optionally ?fields=a,b); a class or a history changes with its record: subscribe to the record.',
          ),
        );
      }
      // Without the scope: checking that the resource may be read is not a read the scope's
      // premise inference should count. The watch below claims the scope as a read does.
      try {
        await caller.run(route.op, () => route.op.fromHttp({ params: route.params, query: route.query, names: route.names, body: { kind: 'none' } }), {
          unscoped: true,
        });
      } catch (e) {
        throw new ResourceRefusal(caller.errorOf(e));
      }
      const fields = route.query.fields === undefined ? null : new Set(route.query.fields.split(',').map((f) => f.trim()));
      const sub: Subscription = {
        uri,
        cls: route.params.class,
        id: route.params.id,
        fields,
        caller,
        stream: await this.watch(route.params.class, route.params.id, caller, null),
        after: 0,
        ended: false,
      };
      if (this.closed || this.subs.has(uri)) {
        // The session ended, or a concurrent subscribe to the same uri won, meanwhile.
        sub.stream.close();
        return;
      }
      this.subs.set(uri, sub);
      void this.pump(sub);
    } finally {
      this.subscribing--;
    }
  }

  /** `resources/unsubscribe`: stops the watch; unknown uris are a no-op (as MCP allows). */
  unsubscribe(uri: string): void {
    const sub = this.subs.get(uri);
    if (!sub) return;
    this.subs.delete(uri);
    sub.ended = true;
    sub.stream.close();
    this.owed.delete(uri);
  }

  /** The record's watch through its handler: every refusal is the handler's, as a ResourceRefusal. */
  private async watch(cls: string, id: string, caller: Caller, after: number | null): Promise<WatchStream> {
    const input: WatchRecordInput =
      after === null ? { class: cls, id, params: [] } : { class: cls, id, from_record_version: after, params: ['from_record_version'] };
    try {
      const out = await caller.run(watchOperations.watchRecord as Operation<WatchRecordInput>, () => input, { credential: this.credential });
      return out.stream as WatchStream;
    } catch (e) {
      throw new ResourceRefusal(caller.errorOf(e));
    }
  }

  /** Reads a subscription's watch: one notification per visible change; restarts or ends it as the watch ends. */
  private async pump(sub: Subscription): Promise<void> {
    for (;;) {
      let reason: EndReason | 'error' | 'closed' = 'closed';
      try {
        for await (const item of sub.stream.items) {
          if (sub.ended) break;
          if (item.type === 'open' || item.type === 'change') sub.after = Number(item.id);
          if (item.type === 'change' && (sub.fields === null || sub.fields.has(String(item.data.field)))) this.notify(sub.uri);
          if (item.type === 'end') {
            reason = item.reason;
            break;
          }
        }
      } catch (e) {
        reason = 'error';
        this.log.warn('mcp subscription: reading the watch failed; restarting it', { uri: sub.uri, error: (e as Error).message });
      } finally {
        sub.stream.close();
      }
      if (sub.ended || this.closed || reason === 'closed') return;
      if (reason === 'shutdown') {
        void this.close();
        return;
      }
      if (reason === 'revoked') {
        if (!(await this.credential.check().catch(() => true))) {
          // The client's credential is refused now (revoked, or expired and not replaced): the session ends.
          this.log.info('mcp session ended: its credential is no longer accepted', { author: this.author });
          void this.close();
          return;
        }
        // The caller lost its role in the class: the subscription ends (MCP has no message for that).
        this.log.info('mcp subscription ended: the role no longer allows it', { uri: sub.uri, author: this.author });
        this.unsubscribe(sub.uri);
        return;
      }
      // slow (the watch fell behind) or a read error: the client re-reads once, and the watch
      // resumes after the last record_version it reached, so no change goes unnotified.
      // recreated (the record expired and was written again, its versions restart at 1): the
      // resource changed; the watch follows the new record from its first version.
      if (reason === 'recreated') sub.after = 0;
      // max_age: the watch resumes exactly where it was, nothing was missed.
      if (reason !== 'max_age') this.notify(sub.uri);
      await new Promise((r) => setTimeout(r, reason === 'error' ? 1_000 : 0));
      if (sub.ended || this.closed) return;
      try {
        sub.stream = await this.watch(sub.cls, sub.id, sub.caller, sub.after);
      } catch (e) {
        this.log.info('mcp subscription ended: its watch could not restart', { uri: sub.uri, error: (e as Error).message });
        this.unsubscribe(sub.uri);
        return;
      }
    }
  }

  /**
   * One `notifications/resources/updated` for `uri`, unless one is already waiting to be
   * taken by the client (it will re-read after this change anyway), or, with no GET stream
   * open, owed until one opens.
   */
  private notify(uri: string): void {
    if (this.closed || this.inflight.has(uri)) return;
    if (this.stream === null) {
      this.owed.add(uri);
      return;
    }
    this.inflight.set(uri, Date.now());
    this.server.sendResourceUpdated({ uri }).catch((e: unknown) => this.log.warn('mcp notification not sent', { error: (e as Error).message }));
  }

  /**
   * The transport's GET event stream, passed through so that the session knows which
   * notifications the client's connection has taken (each is one chunk) and when the stream
   * ends. `highWaterMark: 0`: a chunk is read from the transport only when the socket wants one.
   */
  attachStream(res: Response): Response {
    const token = {};
    this.stream = token;
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    const ended = () => {
      if (this.stream !== token) return;
      this.stream = null;
      this.touch(); // the idle window starts when the stream ends
      // Whatever the client had not taken is owed to its next stream.
      for (const uri of this.inflight.keys()) this.owed.add(uri);
      this.inflight.clear();
    };
    const body = new ReadableStream<Uint8Array>(
      {
        pull: async (ctrl) => {
          try {
            const { value, done } = await reader.read();
            if (done) {
              ended();
              ctrl.close();
              return;
            }
            this.taken(decoder.decode(value));
            ctrl.enqueue(value);
          } catch (e) {
            ended();
            ctrl.error(e);
          }
        },
        cancel: async (why) => {
          ended();
          await reader.cancel(why).catch(() => undefined);
        },
      },
      { highWaterMark: 0 },
    );
    for (const uri of [...this.owed]) {
      this.owed.delete(uri);
      this.notify(uri);
    }
    return new Response(body, { status: res.status, headers: res.headers });
  }

  /** A chunk the client's connection took: a notification (an SSE event), or a keep-alive comment. */
  private taken(text: string): void {
    if (text.startsWith(':')) return;
    const data = /^data: (.*)$/m.exec(text)?.[1];
    if (data === undefined) return;
    try {
      const msg = JSON.parse(data) as { method?: string; params?: { uri?: string } };
      if (msg.method === NOTIFICATION && typeof msg.params?.uri === 'string') this.inflight.delete(msg.params.uri);
    } catch {
      /* not ours */
    }
  }

  /** End the session: every subscription stops, the GET stream closes, the id is forgotten. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const uri of [...this.subs.keys()]) this.unsubscribe(uri);
    this.owed.clear();
    this.inflight.clear();
    this.registry.forget(this);
    await this.transport.close().catch(() => undefined);
  }
}

function callerOf(extra: McpExtra): Caller {
  const caller = extra.authInfo?.extra?.caller as Caller | undefined;
  if (!caller) throw new Error('MCP session request without its caller');
  return caller;
}
