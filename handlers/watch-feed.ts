/**
 * The watch's seams (issue 16), transport-neutral:
 *
 * - `WatchFeed`: what the watch handlers need from the process's change hub (one poller per
 *   process fanning out to every subscriber; runtime/watch-hub.ts). It hands out raw
 *   applied changes; the handlers (handlers/watch.ts) apply the read scope and render them.
 * - `WatchStream`: what a watch handler returns in `Outcome.stream` once every check passed:
 *   an async iterable of rendered items and a `close`. HTTP writes it as Server-Sent Events;
 *   a gRPC server-streaming method or an MCP resource subscription can write the same items.
 */
import type { ChangeRow, LogPosition } from '../db/port.js';

/** Where a subscription starts. */
export type WatchFrom =
  /** A class: every change after this log position. */
  | { kind: 'class'; class: string; after: LogPosition | null }
  /** One record: every change with a higher record_version. */
  | { kind: 'record'; class: string; rid: string; afterRecordVersion: number };

/**
 * Why a subscription ended: `slow` (its queue overflowed, or its consumer did not take the
 * next item in time: the client's socket does not drain), `shutdown` (the process stops),
 * `closed` (by `close`), `recreated` (a record's: it expired and was written again), or the
 * reason its stream gave `close` (`revoked`, `max_age`).
 */
export type FeedEnd = 'slow' | 'shutdown' | 'closed' | 'recreated' | 'revoked' | 'max_age';

/** What a subscription yields. */
export type FeedItem =
  /** `pos`: a class stream's position right after the change (its cursor). */
  | { type: 'change'; row: ChangeRow; pos?: LogPosition }
  /** Nothing happened for the heartbeat interval. */
  | { type: 'heartbeat' }
  | { type: 'end'; reason: FeedEnd };

export interface Subscription {
  /** A class subscription: the position it starts after (`after`, or now). */
  readonly start: LogPosition | null;
  /**
   * The next item; after an `end` item, or after `close`, resolves `end` again. Call it only
   * once the previous item has left for the client (its socket drained): the feed counts the
   * item as held until then, and ends a subscription whose consumer does not come back in time.
   */
  next(): Promise<FeedItem>;
  /** Stop: the client went away, or the stream ended for `reason` (counted as such). Idempotent. */
  close(reason?: 'revoked' | 'max_age'): void;
  /** Settles when the subscription ends, with why: a transport blocked on a slow client aborts then. */
  readonly ended: Promise<FeedEnd>;
}

export interface WatchFeed {
  /**
   * Subscribe on behalf of `owner` (the caller's identity). Throws a SvcError UNAVAILABLE
   * when the process holds its maximum of open streams or is shutting down, RATE_LIMITED
   * when the owner holds its own maximum. `after: null` on a class starts from now.
   */
  subscribe(from: WatchFrom, owner: string): Promise<Subscription>;
  /**
   * The oldest position of the class log still in the window that starts at `since`: just
   * before its first change since then, or the log's position now when it has none.
   */
  oldest(cls: string, since: Date): Promise<{ pos: LogPosition; at: Date }>;
  /** The retained window of the class log, in milliseconds. */
  readonly retentionMs: number;
  /** How long a stream may stay open before it ends `max_age` (clients resume with their last id). */
  readonly maxAgeMs: number;
}

/** Why the gateway ended a rendered stream (the `end` item's reason). */
export type EndReason = 'slow' | 'shutdown' | 'revoked' | 'recreated' | 'max_age';

/** One item of a rendered watch stream. */
export type WatchItem =
  /** The first item: where the stream starts (`id` resumes there). */
  | { type: 'open'; id: string; data: Record<string, unknown> }
  /** `id` is the resume token (a record_version, or a class cursor); `data` the event body. */
  | { type: 'change'; id: string; data: Record<string, unknown> }
  | { type: 'heartbeat' }
  /** The last item: why the stream ends and what the client should do. */
  | { type: 'end'; reason: EndReason; message: string };

export interface WatchStream {
  /**
   * The items. Ask for the next one only once the previous one has left for the client (the
   * socket drained): that is the stream's backpressure, and a consumer that does not come
   * back within the feed's slow timeout gets the stream ended (`slow`).
   */
  items: AsyncIterable<WatchItem>;
  /** Stop (the client went away). Idempotent. */
  close(): void;
  /** Settles when the stream ends; any reason but `closed` means the transport should stop writing soon. */
  readonly ended: Promise<EndReason | 'closed'>;
}
