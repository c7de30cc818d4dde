/**
 * The gRPC `Watch` RPC (issue 16; docs/grpc.md "Watch"): the server-streaming twin of HTTP's
 * two SSE watch routes. It runs the same watch handlers (handlers/watch.ts) through the same
 * request lifecycle (`runRequest`: credential, x-svc-scope, then the handler's checks), so
 * every refusal is a status with the usual error body before the first message; then it
 * writes the handler's transport-neutral items (`open`, `change`, `heartbeat`, `end`) as
 * WatchEvent messages.
 *
 * Bounded like the SSE stream (issue 31 item 9): the next item is asked of the watch only
 * once the previous message has left, that is when grpc-js calls the write's callback, which
 * it does when the HTTP/2 stream took the message (flow control: the client read enough).
 * Waiting for `write` to return false instead let grpc-js's object stream buffer 16 messages
 * (up to 4 MiB each) per call. A client that stops reading holds one message here, and its
 * stream ends `slow` after --watch-slow-timeout. A stream the gateway ended that still cannot
 * write its last message is reset after END_GRACE_MS. A client cancel closes the
 * subscription (its slot is freed at once).
 */
import { constants as http2 } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import type { MethodDefinition } from '@grpc/proto-loader';
import { MAX_BODY_BYTES } from '../../handlers/body.js';
import { SvcError } from '../../handlers/errors.js';
import { asSvcError, type Operation } from '../../handlers/index.js';
import { watchOperations, type WatchClassInput, type WatchRecordInput } from '../../handlers/watch.js';
import type { WatchItem, WatchStream } from '../../handlers/watch-feed.js';
import { runRequest, type RequestMeta } from '../request.js';
import type { Services } from '../services.js';
import { beginCall } from './call-log.js';
import { jsonToStruct } from './convert.js';
import type { WatchEvent } from './generated/svc/v1/WatchEvent.js';
import type { WatchRequest__Output } from './generated/svc/v1/WatchRequest.js';

/** How long a stream ended by the gateway (slow client, shutdown) may take to write its last message. */
export const END_GRACE_MS = 1_000;

/** What the per-method deserializer hands the handler (runtime/grpc/server.ts). */
type Decoded<T> = { ok: true; msg: T; bytes: number } | { ok: false; bytes: number; problem: string };

export type WatchCall = grpc.ServerWritableStream<Decoded<WatchRequest__Output>, Buffer>;

/**
 * Resets a call's HTTP/2 stream (RST_STREAM CANCEL), keyed by the call's request metadata:
 * grpc-js offers a server no way to end a call whose client stopped reading (its status
 * waits behind the unsent messages), so the first interceptor, which holds the base call,
 * registers one per call (runtime/grpc/server.ts).
 */
export const resetters = new WeakMap<grpc.Metadata, () => void>();

/** The base call's HTTP/2 stream reset, when grpc-js exposes it (it does up to at least 1.14). */
export function resetterOf(base: unknown): () => void {
  return () => {
    const stream = (base as { stream?: { destroyed?: boolean; close?(code: number): void } }).stream;
    if (stream && !stream.destroyed) stream.close?.(http2.NGHTTP2_CANCEL);
  };
}

/** A WatchRequest as the input of the operation it names. */
export function watchInput(msg: WatchRequest__Output): { op: 'watchRecord'; input: WatchRecordInput } | { op: 'watchClass'; input: WatchClassInput } {
  // The names sent, so the handler refuses the other target's resume field as HTTP refuses
  // an unknown query parameter (MALFORMED, "it takes ...").
  const names = [
    ...(msg.from_record_version !== undefined ? ['from_record_version'] : []),
    ...(msg.from !== undefined && msg.from !== '' ? ['from'] : []),
  ];
  if (msg.target === 'record') {
    const r = msg.record ?? '';
    const i = r.indexOf('/');
    return {
      op: 'watchRecord',
      input: {
        ...(i < 0 ? { class: r, id: '' } : { class: r.slice(0, i), id: r.slice(i + 1) }),
        ...(msg.from_record_version !== undefined ? { from_record_version: msg.from_record_version } : {}),
        params: names,
      },
    };
  }
  if (msg.target === 'class') {
    return { op: 'watchClass', input: { class: msg.class ?? '', ...(msg.from ? { from: msg.from } : {}), params: names } };
  }
  throw new SvcError('MALFORMED', 'A WatchRequest names what to watch: set `record` (<class>/<id>) or `class`.');
}

/** A rendered item as the WatchEvent message (the SSE event's JSON in a Struct). */
export function eventMsg(item: WatchItem): WatchEvent {
  switch (item.type) {
    case 'open':
      return { open: { id: item.id, data: jsonToStruct(item.data as never) } };
    case 'change':
      return { change: { id: item.id, data: jsonToStruct(item.data as never) } };
    case 'heartbeat':
      return { heartbeat: {} };
    case 'end':
      return { end: { reason: item.reason, message: item.message } };
  }
}

export interface WatchDeps {
  s: Services;
  method: MethodDefinition<object, object>;
  /** The call's identity metadata and request id (as every RPC reads them). */
  meta(call: WatchCall): RequestMeta;
  toGrpc(err: SvcError, requestId: string): Partial<grpc.StatusObject>;
}

export function watchRpc({ s, method, meta, toGrpc }: WatchDeps) {
  return async (call: WatchCall): Promise<void> => {
    const sent = meta(call);
    const requestId = sent.requestId;
    // The access log line is written when the stream starts (as for SSE) or is refused.
    const log = beginCall(s.log, method.path, call, requestId);
    const m: RequestMeta = { ...sent, access: log };
    const logged = log.logged;
    const req = call.request;
    // Which operation runs is read off the message already decoded; anything wrong with it
    // is refused inside the lifecycle, after the credential check.
    const op = (req.ok && req.msg.target === 'record' ? watchOperations.watchRecord : watchOperations.watchClass) as Operation;
    const r = await runRequest(s, m, op, () => {
      if (!req.ok) throw new SvcError('MALFORMED', req.problem);
      if (req.bytes > MAX_BODY_BYTES) {
        throw new SvcError('MALFORMED', `The request message is larger than ${MAX_BODY_BYTES} bytes (4 MiB); send a smaller one.`);
      }
      return watchInput(req.msg).input;
    });
    if (!r.ok) {
      const status = toGrpc(r.error, requestId);
      call.emit('error', status);
      logged(status.code ?? grpc.status.UNKNOWN);
      return;
    }
    const stream = r.out.stream as WatchStream;
    logged(grpc.status.OK);

    let gone = false; // the client cancelled, or the call was reset
    let wake: (() => void) | null = null;
    const rouse = () => {
      const w = wake;
      wake = null;
      w?.();
    };
    const onCancel = () => {
      gone = true;
      stream.close();
      rouse();
    };
    call.on('cancelled', onCancel);
    if (call.cancelled) onCancel();
    // A client that does not read blocks the writes below; a stream the gateway ended
    // (slow, shutdown) is reset after a grace period instead of waiting for it. Also when the
    // loop below has finished: grpc-js calls a write's callback once the message is in the
    // HTTP/2 stream's buffer, so the `end` and the trailers can sit behind a client's full
    // flow-control window and the call would stay open (holding a graceful shutdown for its
    // whole timeout). The resetter does nothing to a stream that has closed.
    void stream.ended.then((reason) => {
      if (reason === 'closed') return;
      setTimeout(() => {
        if (gone) return;
        resetters.get(call.metadata)?.();
        gone = true;
        rouse();
      }, END_GRACE_MS).unref?.();
    });
    const send = async (msg: WatchEvent): Promise<void> => {
      let bytes: Buffer;
      try {
        bytes = method.responseSerialize(msg as object);
      } catch (e) {
        const why = (e as Error).message ?? String(e);
        throw new SvcError(
          'INTERNAL',
          /depth/i.test(why)
            ? `A change cannot be encoded: a JSON value nested more than about 48 levels deep exceeds the protobuf nesting limit of 100 messages; watch this record over HTTP. Request id ${requestId}.`
            : `A change cannot be encoded. Request id ${requestId}.`,
          { request_id: requestId },
        );
      }
      // Wait until the message has left (or the client went away, or the call was reset):
      // grpc-js drops the callback of a cancelled call, hence `gone`.
      let sent = false;
      call.write(bytes, () => {
        sent = true;
        rouse();
      });
      while (!sent && !gone) await new Promise<void>((res) => (wake = res));
    };
    try {
      for await (const item of stream.items) {
        if (gone) break;
        await send(eventMsg(item));
        if (item.type === 'end') break;
      }
      if (!gone) call.end();
    } catch (e) {
      const err = asSvcError(e, { log: s.log, requestId });
      if (!gone) {
        // As SSE's last `end` event (reason `error`), then the error's status.
        await send({ end: { reason: 'error', message: `${err.message} Reconnect with your last event id.`, error: err.code } }).catch(() => undefined);
        if (!gone) call.emit('error', toGrpc(err, requestId));
      }
    } finally {
      stream.close();
      call.off('cancelled', onCancel);
    }
  };
}
