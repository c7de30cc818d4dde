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

/** What a subscription yields. */
export type FeedItem =
  | { type: 'change'; row: ChangeRow }
  /** Nothing happened for the heartbeat interval. */
  | { type: 'heartbeat' }
  /**
   * The subscription ended: `slow` (its queue overflowed), `shutdown` (the process stops),
   * `closed` (by `close`), `recreated` (a record's: it expired and was written again).
   */
  | { type: 'end'; reason: 'slow' | 'shutdown' | 'closed' | 'recreated' };

export interface Subscription {
  /** A class subscription: the position it starts after (`after`, or now). */
  readonly start: LogPosition | null;
  /** The next item; after an `end` item, or after `close`, resolves `end` again. */
  next(): Promise<FeedItem>;
  /** Stop: the client went away. Idempotent. */
  close(): void;
  /** Settles when the subscription ends, with why: a transport blocked on a slow client aborts then. */
  readonly ended: Promise<'slow' | 'shutdown' | 'closed' | 'recreated'>;
}

export interface WatchFeed {
  /**
   * Subscribe. Throws a SvcError UNAVAILABLE when the process holds its maximum of open
   * streams or is shutting down. `after: null` on a class starts from now.
   */
  subscribe(from: WatchFrom): Promise<Subscription>;
  /**
   * The oldest position of the class log still in the window that starts at `since`: just
   * before its first change since then, or the log's position now when it has none.
   */
  oldest(cls: string, since: Date): Promise<{ pos: LogPosition; at: Date }>;
  /** The retained window of the class log, in milliseconds. */
  readonly retentionMs: number;
}

/** One item of a rendered watch stream. */
export type WatchItem =
  /** The first item: where the stream starts (`id` resumes there). */
  | { type: 'open'; id: string; data: Record<string, unknown> }
  /** `id` is the resume token (a record_version, or a class cursor); `data` the event body. */
  | { type: 'change'; id: string; data: Record<string, unknown> }
  | { type: 'heartbeat' }
  /** The last item: why the stream ends and what the client should do. */
  | { type: 'end'; reason: 'slow' | 'shutdown' | 'revoked' | 'recreated'; message: string };

export interface WatchStream {
  items: AsyncIterable<WatchItem>;
  /** Stop (the client went away). Idempotent. */
  close(): void;
  /** Settles when the stream ends; any reason but `closed` means the transport should stop writing soon. */
  readonly ended: Promise<'slow' | 'shutdown' | 'closed' | 'recreated'>;
}
