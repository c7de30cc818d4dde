/**
 * What every gRPC call does, unary or streaming: send the request id as initial metadata, and
 * give the one access-log line it writes when it ends or its stream starts (as on HTTP:
 * method, path, status, duration, author; never a credential or a message).
 *
 * A stream sends the metadata at once (`sendNow`); a unary call sends it just before its
 * answer (`sendId`), so grpc-js writes headers, message and trailers in one syscall: sent at
 * the start, the headers went out alone (a write, and a wake-up of the client, per call).
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../../handlers/context.js';

export interface CallLog {
  /** The caller, once known. */
  author: string | undefined;
  /** Write the access-log line with this status (and the spec's error code, if refused). */
  logged(status: number, error?: string): void;
  /** Send the initial metadata (the request id, and `extra`) if it has not gone yet. */
  sendId(extra?: Record<string, string>): void;
}

export function beginCall(
  log: Logger,
  path: string,
  call: { sendMetadata(m: grpc.Metadata): void },
  requestId: string,
  sendNow = true,
): CallLog {
  const started = performance.now();
  let sent = false;
  const sendId = (extra?: Record<string, string>) => {
    if (sent) return;
    sent = true;
    const idMetadata = new grpc.Metadata();
    idMetadata.set('x-request-id', requestId);
    for (const [k, v] of Object.entries(extra ?? {})) idMetadata.set(k, v);
    call.sendMetadata(idMetadata);
  };
  if (sendNow) sendId();
  const c: CallLog = {
    author: undefined,
    sendId,
    logged(status, error) {
      log.info('request', {
        method: 'gRPC',
        path,
        status: grpc.status[status] ?? status,
        duration_ms: Math.round((performance.now() - started) * 10) / 10,
        author: c.author,
        error,
        request_id: requestId,
      });
    },
  };
  return c;
}
