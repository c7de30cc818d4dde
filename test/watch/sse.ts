/**
 * A Server-Sent Events client for the watch tests: fetch over a real socket, the response
 * body parsed as the SSE format (events, ids, comment lines), no library in between.
 */
import { KEYS } from '../setup/gateway.js';
import { CITUS } from '../setup/citus.js';

export interface SseEvent {
  event: string;
  id?: string;
  data: any;
}

export interface Watch {
  status: number;
  headers: Headers;
  /** The JSON body of a refusal (no stream). */
  body?: any;
  /** Comment lines (heartbeats) seen so far. */
  comments: number;
  /** Events received so far, in order. */
  events: SseEvent[];
  /** True once the server ended the stream. */
  done: boolean;
  /** The next event not yet taken by `next`; rejects after `ms` without one. */
  next(ms?: number): Promise<SseEvent>;
  /** Wait until `n` events (in total) have arrived. */
  until(n: number, ms?: number): Promise<SseEvent[]>;
  /** Resolves when the server ends the stream. */
  ended(ms?: number): Promise<void>;
  /** Stop reading (pause) or resume, for slow-consumer tests. */
  pause(): void;
  resume(): void;
  close(): void;
}

/**
 * How long a watch case waits for an event by default. On Citus (the shared test cluster) a
 * change waits for the oldest open transaction on its worker, and other files' transactions
 * held credential.test's revoke past 10 s once (2026-11-27); under the 60 s test timeout.
 */
const WAIT_MS = CITUS ? 40_000 : 10_000;

export async function openWatch(baseUrl: string, who: string, path: string, headers: Record<string, string> = {}): Promise<Watch> {
  const ac = new AbortController();
  const res = await fetch(baseUrl + path, {
    headers: { authorization: `Bearer ${KEYS[who] ?? who}`, accept: 'text/event-stream', ...headers },
    signal: ac.signal,
  });
  const w: Watch & { taken: number } = {
    status: res.status,
    headers: res.headers,
    comments: 0,
    events: [],
    done: false,
    taken: 0,
    next: async (ms = WAIT_MS) => {
      const [e] = (await w.until(w.taken + 1, ms)).slice(w.taken);
      w.taken++;
      return e;
    },
    until: (n, ms = WAIT_MS) => waitFor(() => w.events.length >= n || w.done, ms, () => `${w.events.length} of ${n} events`).then(() => {
      if (w.events.length < n) throw new Error(`stream ended after ${w.events.length} of ${n} events`);
      return w.events;
    }),
    ended: (ms = WAIT_MS) => waitFor(() => w.done, ms, () => 'the stream to end'),
    pause: () => void (paused = true),
    resume: () => {
      paused = false;
      const r = resumeRead;
      resumeRead = null;
      r?.();
    },
    close: () => ac.abort(),
  };
  let paused = false;
  let resumeRead: (() => void) | null = null;
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const text = await res.text();
    try {
      w.body = JSON.parse(text);
    } catch {
      w.body = text;
    }
    w.done = true;
    return w;
  }
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  void (async () => {
    try {
      for (;;) {
        if (paused) await new Promise<void>((r) => (resumeRead = r));
        const { done, value } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let at: number;
        while ((at = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, at);
          buf = buf.slice(at + 2);
          const ev: SseEvent = { event: 'message', data: undefined };
          const data: string[] = [];
          let comment = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comment = true;
            else if (line.startsWith('event: ')) ev.event = line.slice(7);
            else if (line.startsWith('id: ')) ev.id = line.slice(4);
            else if (line.startsWith('data: ')) data.push(line.slice(6));
          }
          if (data.length > 0) {
            ev.data = JSON.parse(data.join('\n'));
            w.events.push(ev);
          } else if (comment) w.comments++;
        }
      }
    } catch {
      /* aborted */
    } finally {
      w.done = true;
    }
  })();
  return w;
}

export async function waitFor(cond: () => boolean, ms: number, what: () => string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
