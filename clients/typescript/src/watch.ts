/**
 * Watch streams (docs/watch.md) as async iterators: Server-Sent Events read from fetch's body,
 * resumed with `Last-Event-ID` = the last event's id after any dropped connection or `end`
 * event, so the caller sees every change once, in order, across reconnects.
 */
import { toError, backoff, sleep, type Transport } from './transport.js';

/** One applied change (docs/watch.md, "Events"), with `id`: its resume token. */
export interface WatchChange {
  /** The event id: a record_version (record streams) or a cursor (class streams). */
  id: string;
  seq: number;
  record: string;
  field: string;
  op: 'put' | 'append' | 'claim' | 'release' | 'takeover' | string;
  version: number;
  record_version: number;
  value?: unknown;
  author: string;
  identity_strength?: string;
  evidence?: string;
  based_on?: { field: string; version: number; kind?: string }[];
  invocation?: Record<string, unknown>;
  created_at: string;
  [key: string]: unknown;
}

export interface WatchOptions {
  /** Stops the stream (the iterator then ends). */
  signal?: AbortSignal;
  /** Called when a connection is open (its `open` event came), with the position it starts from. */
  onOpen?: (info: { lastEventId: string | undefined }) => void;
  /** Called when the stream reconnects (after a drop or an `end` event), with why. */
  onReconnect?: (info: { lastEventId: string | undefined; reason: string }) => void;
}

interface SseEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/** Splits an SSE byte stream into events (WHATWG "Server-sent events", interpreting the stream). */
async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  let event = '';
  let data: string[] = [];
  let id: string | undefined;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buf);
        if (!m) break;
        // A lone \r at the very end may be the first half of \r\n: wait for more.
        if (m[0] === '\r' && m.index === buf.length - 1) break;
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        if (line === '') {
          if (data.length || event) yield { event: event || 'message', data: data.join('\n'), id };
          event = '';
          data = [];
          id = undefined;
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const name = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (name === 'event') event = val;
        else if (name === 'data') data.push(val);
        else if (name === 'id') id = val;
      }
    }
  } finally {
    reader.cancel().catch(() => undefined);
  }
}

/**
 * The changes of a stream at `path`, from `from` (an event id; undefined = from now), resumed
 * after every drop. Ends only when the signal aborts or the caller stops iterating; a refusal
 * (4xx) is thrown as its typed error.
 */
export async function* watchChanges(transport: Transport, path: string, from: string | undefined, opts: WatchOptions = {}): AsyncGenerator<WatchChange> {
  let last = from;
  let failures = 0;
  for (;;) {
    if (opts.signal?.aborted) return;
    const ac = new AbortController();
    const onAbort = () => ac.abort(opts.signal!.reason);
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    let reason = 'dropped';
    try {
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (last !== undefined) headers['last-event-id'] = last;
      let res: Response;
      try {
        res = await transport.send(new Request(transport.baseUrl + path, { headers, signal: ac.signal }));
      } catch (e) {
        if (opts.signal?.aborted) return;
        reason = `connect failed: ${(e as Error)?.message ?? e}`;
        res = undefined as never;
      }
      if (res) {
        if (!res.ok) {
          const text = await res.text();
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {
            /* keep the text */
          }
          if (res.status < 500) throw toError(res, body);
          reason = `HTTP ${res.status}`;
        } else if (res.body) {
          try {
            for await (const ev of sseEvents(res.body)) {
              if (ev.event === 'end') {
                let data: { reason?: string } = {};
                try {
                  data = JSON.parse(ev.data);
                } catch {
                  /* no body */
                }
                reason = `end: ${data.reason ?? 'unknown'}`;
                // The record was written again as a new record: its versions start over.
                if (data.reason === 'recreated') last = '0';
                break;
              }
              if (ev.id !== undefined) last = ev.id;
              if (ev.event === 'open') opts.onOpen?.({ lastEventId: last });
              if (ev.event === 'change') {
                failures = 0;
                yield { ...(JSON.parse(ev.data) as Omit<WatchChange, 'id'>), id: ev.id ?? '' } as WatchChange;
              }
            }
          } catch (e) {
            if (opts.signal?.aborted) return;
            reason = `dropped: ${(e as Error)?.message ?? e}`;
          }
        }
      }
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      ac.abort();
    }
    if (opts.signal?.aborted) return;
    opts.onReconnect?.({ lastEventId: last, reason });
    try {
      await sleep(backoff(failures++, 100, 5_000), opts.signal);
    } catch {
      return;
    }
  }
}
