/**
 * watch (issue 16): the applied changes of one record, or of every record of a class, as
 * they commit.
 *
 *   GET /v1/records/{class}/{id}/watch?from_record_version=N   (resume: Last-Event-ID = a record_version)
 *   GET /v1/classes/{class}/watch?from=CURSOR                   (resume: Last-Event-ID = a cursor)
 *
 * The checks are a read's (steps 2–7 and 10, then parameters), made before any stream
 * starts, so every refusal is an ordinary error answer. What passes returns
 * `Outcome.stream`: an async iterable of rendered items (handlers/watch-feed.ts) that HTTP
 * writes as Server-Sent Events and that a gRPC stream or an MCP subscription can reuse.
 * The read scope is applied here, per change, with the pipeline's own rules: a change of a
 * field the caller's role may not read is left out, premises on such fields too.
 */
import * as v from 'valibot';
import type { ChangeRow, LogPosition } from '../db/port.js';
import type { Ctx } from './context.js';
import { decodeWatchCursor, encodeWatchCursor } from './cursor.js';
import { SvcError } from './errors.js';
import { parseRetention } from './class-schema.js';
import { formatTime } from './format.js';
import { parseCount } from './limits.js';
import { authorize, canRead, checkParams, checkRecordId, checkScopeOwner, renderWritten, type Access, type Outcome } from './pipeline.js';
import type { HttpInput, Operation } from './index.js';
import type { EndReason, FeedItem, Subscription, WatchFeed, WatchItem, WatchStream } from './watch-feed.js';

export interface WatchRecordInput {
  class: string;
  id: string;
  from_record_version?: string | number;
  /** The transport's resume token (HTTP: Last-Event-ID); wins over `from_record_version`. */
  last_event_id?: string;
  params?: readonly string[];
}

export interface WatchClassInput {
  class: string;
  from?: string;
  /** The transport's resume token (HTTP: Last-Event-ID); wins over `from`. */
  last_event_id?: string;
  params?: readonly string[];
}

/** The query parameters of each watch (the handler refuses others; the OpenAPI document shows these). */
export const watchRecordParams = v.strictObject({
  from_record_version: v.optional(
    v.pipe(
      v.number(),
      v.integer(),
      v.minValue(0),
      v.description('Send every applied change with a higher record_version first (default: the current version). Last-Event-ID wins over it.'),
    ),
  ),
});
export const watchClassParams = v.strictObject({
  from: v.optional(
    v.pipe(v.string(), v.description('A cursor: the id of an event of this class watch; resume right after it (default: now). Last-Event-ID wins over it.')),
  ),
});

/**
 * How often a stream re-reads the caller's roles (the class cache refreshes once a second)
 * and re-authenticates its credential, before the next change or heartbeat it sends.
 */
const ROLE_RECHECK_MS = 1_000;
/** The longest a timer may wait (setTimeout's limit); a stream due later wakes and waits again. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function feedOf(ctx: Ctx): WatchFeed {
  if (!ctx.watch) {
    // The Cloudflare Workers adapter: a request there has no process outliving it.
    throw new SvcError(
      'NOT_FOUND',
      'Watch streams are not served on this runtime (Cloudflare Workers); use a Node gateway (`kslate serve`) for /watch.',
    );
  }
  return ctx.watch;
}

export async function watchRecord(ctx: Ctx, input: WatchRecordInput): Promise<Outcome> {
  const feed = feedOf(ctx);
  const access = await authorize(ctx, input.class, 'read', input.id); // 2–3
  checkRecordId(access, input.id); // 5
  const where = { record: access.record };
  await checkScopeOwner(ctx, access, null); // 10
  checkParams(input.params, Object.keys(watchRecordParams.entries), where, 'watch');
  const raw = input.last_event_id ?? input.from_record_version;
  const name = input.last_event_id !== undefined ? 'Last-Event-ID' : 'from_record_version';
  let after: number;
  if (raw !== undefined) {
    after = parseCount(name, raw, 0, Number.MAX_SAFE_INTEGER, where);
    if (!(await ctx.db.recordOrHistoryExists(input.class, input.id))) {
      throw new SvcError('NOT_FOUND', `Record ${access.record} does not exist and has no history; watch the class to see it created.`, where);
    }
  } else {
    // From now: the record's current version (changes after the read come from its history).
    const row = await ctx.db.readRecord(input.class, input.id, { fields: [], entriesLimit: 0, entriesBeforeSeq: null, maxBytes: 0 });
    if (!row && !(await ctx.db.recordOrHistoryExists(input.class, input.id))) {
      throw new SvcError('NOT_FOUND', `Record ${access.record} does not exist and has no history; watch the class to see it created.`, where);
    }
    after = row?.record_version ?? 0;
  }
  const sub = await feed.subscribe({ kind: 'record', class: input.class, rid: input.id, afterRecordVersion: after }, ctx.identity.author);
  const open: WatchItem = { type: 'open', id: String(after), data: { record: access.record, record_version: after } };
  return { body: {}, stream: render(ctx, access, sub, open, async (row) => String(row.record_version)) };
}

export async function watchClass(ctx: Ctx, input: WatchClassInput): Promise<Outcome> {
  const feed = feedOf(ctx);
  const access = await authorize(ctx, input.class, 'read'); // 2–3
  const where = { class: input.class };
  await checkScopeOwner(ctx, access, null); // 10
  checkParams(input.params, Object.keys(watchClassParams.entries), where, 'watch');
  const key = await ctx.cursorKey();
  const token = input.last_event_id ?? input.from;
  let after: LogPosition | null = null;
  let at = ctx.now().getTime();
  if (token !== undefined) {
    const c = await decodeWatchCursor(key, token, input.class, where);
    // The class log's retained window: --watch-retention, or the class's history maxAge when
    // shorter (issue 37: rows older than it may be purged, so a cursor older than it is stale).
    const maxAge = access.cls.spec.history?.maxAge;
    const maxAgeMs = maxAge === undefined ? null : parseRetention(maxAge);
    const retentionMs = maxAgeMs === null ? feed.retentionMs : Math.min(feed.retentionMs, maxAgeMs);
    const cutoff = ctx.now().getTime() - retentionMs;
    if (c.at < cutoff) {
      // Like the Kubernetes API's 410 Gone: the client re-reads what it needs, then resumes here.
      const first = await feed.oldest(input.class, new Date(cutoff));
      const oldest = await encodeWatchCursor(key, input.class, { pos: first.pos, at: Math.max(first.at.getTime(), cutoff) });
      throw new SvcError(
        'EXPIRED',
        `The cursor is older than the change log's retained window (${Math.round(retentionMs / 1000)}s); re-read the records you need, then watch from \`oldest\` (or without \`from\`).`,
        { class: input.class, oldest },
      );
    }
    after = c.pos;
    at = c.at;
  }
  const sub = await feed.subscribe({ kind: 'class', class: input.class, after }, ctx.identity.author);
  const start = sub.start!;
  const open: WatchItem = {
    type: 'open',
    id: await encodeWatchCursor(key, input.class, { pos: start, at }),
    data: { class: input.class },
  };
  return {
    body: {},
    stream: render(ctx, access, sub, open, (row, pos) => classCursor(key, row, pos)),
  };
}

/**
 * A change's class cursor: the stream's position right after it, computed once per position
 * and key. The hub hands every live subscriber of a class the same position object for a
 * change, so a fan-out to N watchers signs it once, not N times (an HMAC per delivered event
 * was a sixth of the gateway's fan-out CPU).
 */
const cursors = new WeakMap<LogPosition, { key: string; id: Promise<string> }>();
function classCursor(key: string, row: ChangeRow, pos: LogPosition | undefined): Promise<string> {
  const at = row.created_at.getTime();
  if (!pos) return encodeWatchCursor(key, row.class, { pos: { [row.group]: { tx: row.tx!, id: row.id } }, at });
  const hit = cursors.get(pos);
  if (hit && hit.key === key) return hit.id;
  const id = encodeWatchCursor(key, row.class, { pos, at });
  cursors.set(pos, { key, id });
  return id;
}

const END_MESSAGES = {
  slow: 'The stream fell too far behind (the client did not read fast enough) and was closed; reconnect with your last event id.',
  shutdown: 'The gateway is shutting down; reconnect (to another replica) with your last event id.',
  revoked: 'Your role in the class no longer allows this watch; the stream is closed.',
  credential: 'Your credential is no longer accepted (revoked or expired); reconnect with a valid one and your last event id.',
  max_age: 'The stream reached its maximum age (--watch-max-age); reconnect with your last event id to go on.',
  recreated:
    'The record expired and was written again: a new record under the same id, whose record_version starts at 1; reconnect with from_record_version=0.',
} as const;

/** Settles with the first of `p` and a timer of `ms` (null). */
function firstOf<T>(p: Promise<T>, ms: number): Promise<T | null> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => resolve(null), Math.max(0, Math.min(ms, MAX_TIMER_MS)));
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

/**
 * The rendered stream: the open item, then each change the caller may read, heartbeats, and
 * an end. Before it sends anything (at most once a second) it re-reads the caller's roles
 * and re-authenticates the credential the stream was opened with; it also does so when the
 * credential expires (a JWT's `exp`), without waiting for a change. A stream lives at most
 * the feed's maxAgeMs (spread over its last tenth, so streams opened together do not all
 * end together), then ends `max_age` and the client resumes with its last id.
 */
function render(ctx: Ctx, initial: Access, sub: Subscription, open: WatchItem, idOf: (row: ChangeRow, pos: LogPosition | undefined) => Promise<string>): WatchStream {
  let access = initial;
  let checkedAt = Date.now();
  const endAt = Date.now() + (ctx.watch?.maxAgeMs ?? Infinity) * (1 - Math.random() / 10);
  /** When the credential must be checked again without waiting for an item (its expiry). */
  let credentialDue = ctx.credential?.expiresAt ?? Infinity;
  let settle!: (reason: EndReason | 'closed') => void;
  const ended = new Promise<EndReason | 'closed'>((r) => (settle = r));
  // The hub ends it too (slow, shutdown, recreated): the transport stops waiting on the client then.
  void sub.ended.then((reason) => settle(reason));

  /** Whether the credential still names the caller; an outage keeps the stream going (it is checked again). */
  const credentialHolds = async (): Promise<boolean> => {
    const cred = ctx.credential;
    if (!cred) return true;
    let ok: boolean;
    try {
      ok = await cred.check();
    } catch (e) {
      ctx.log.debug('watch: the credential could not be checked again now; the stream goes on', {
        request_id: ctx.requestId,
        error: e instanceof Error ? e.message : String(e),
      });
      return true;
    }
    // Still accepted past its expiry (a provider's clock tolerance): look again shortly.
    if (ok) credentialDue = Math.max(cred.expiresAt ?? Infinity, Date.now() + ROLE_RECHECK_MS);
    return ok;
  };
  /** The caller's roles as the class registry has them now (a manifest may have changed), and its credential. */
  const recheck = async (): Promise<'ok' | 'revoked' | 'credential'> => {
    if (Date.now() - checkedAt < ROLE_RECHECK_MS) return 'ok';
    checkedAt = Date.now();
    if (!(await credentialHolds())) return 'credential';
    try {
      access = { ...(await authorize(ctx, initial.cls.name, 'read')), record: initial.record };
      return 'ok';
    } catch (e) {
      if (e instanceof SvcError && (e.code === 'NO_ROLE' || e.code === 'NOT_FOUND')) return 'revoked';
      throw e;
    }
  };
  const end = (why: EndReason | 'credential'): WatchItem => {
    const reason = why === 'credential' ? 'revoked' : why;
    if (reason === 'revoked' || reason === 'max_age') sub.close(reason);
    settle(reason);
    return { type: 'end', reason, message: END_MESSAGES[why] };
  };
  async function* items(): AsyncGenerator<WatchItem> {
    /** The feed's next item, asked for once the previous one was sent; kept across a timer's wake. */
    let pending: Promise<FeedItem> | null = null;
    try {
      yield open;
      for (;;) {
        const now = Date.now();
        if (now >= endAt) {
          yield end('max_age');
          return;
        }
        if (now >= credentialDue && !(await credentialHolds())) {
          yield end('credential');
          return;
        }
        pending ??= sub.next();
        const item = await firstOf(pending, Math.min(endAt, credentialDue) - now);
        if (item === null) continue; // a deadline came first: see above
        pending = null;
        if (item.type === 'end') {
          if (item.reason === 'closed') return; // the client went away: nobody to tell
          yield end(item.reason);
          return;
        }
        const why = await recheck();
        if (why !== 'ok') {
          yield end(why);
          return;
        }
        if (item.type === 'heartbeat') yield item;
        else {
          const data = renderChange(item.row, access);
          if (data) yield { type: 'change', id: await idOf(item.row, item.pos), data };
        }
      }
    } finally {
      sub.close();
      settle('closed');
    }
  }
  return { items: items(), close: () => sub.close(), ended };
}

/** A change as the caller may see it, or null when its field is outside the caller's read scope. */
export function renderChange(r: ChangeRow, access: Access): Record<string, unknown> | null {
  const def = access.cls.fields.get(r.field);
  if (!def || !canRead(access, r.field)) return null;
  const versions: Record<string, unknown> = { seq: r.id, record: `${r.class}/${r.rid}`, field: r.field, op: r.op };
  if (r.version !== null) versions.version = r.version;
  versions.record_version = r.record_version;
  // As get shows it (renderWritten): a task field has no value (its change is the lease: op and author).
  const out = renderWritten(def.kind, r, {}, 'created_at', formatTime(r.created_at), (f) => canRead(access, f));
  // The change's own keys lead, before the value.
  return { ...versions, ...out };
}

/**
 * The watch routes: mounted by HTTP beside the operation table (they answer streams, not
 * bodies). Both are carried by the one server-streaming RPC `Watch` (an addition to
 * decisions §7): its request's `target` oneof picks the operation (runtime/grpc/server.ts).
 */
export const watchOperations = {
  watchRecord: {
    name: 'watchRecord',
    grpc: 'Watch',
    method: 'GET',
    path: '/v1/records/:class/:id/watch',
    write: false,
    handler: watchRecord,
    fromHttp: ({ params, query, names }: HttpInput): WatchRecordInput => ({
      class: params.class,
      id: params.id,
      from_record_version: query.from_record_version,
      params: names,
    }),
  } satisfies Operation<WatchRecordInput>,
  watchClass: {
    name: 'watchClass',
    grpc: 'Watch',
    method: 'GET',
    path: '/v1/classes/:class/watch',
    write: false,
    handler: watchClass,
    fromHttp: ({ params, query, names }: HttpInput): WatchClassInput => ({ class: params.class, from: query.from, params: names }),
  } satisfies Operation<WatchClassInput>,
};
