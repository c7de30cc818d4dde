/**
 * What every gRPC call does first, unary or streaming: send the request id as initial
 * metadata, and give the one access-log line it writes when it ends or its stream starts (as
 * on HTTP: method, path, status, duration, author; never a credential or a message).
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../../handlers/context.js';

export interface CallLog {
  /** The caller, once known. */
  author: string | undefined;
  /** Write the access-log line with this status (and the spec's error code, if refused). */
  logged(status: number, error?: string): void;
}

export function beginCall(log: Logger, path: string, call: { sendMetadata(m: grpc.Metadata): void }, requestId: string): CallLog {
  const started = performance.now();
  const idMetadata = new grpc.Metadata();
  idMetadata.set('x-request-id', requestId);
  call.sendMetadata(idMetadata);
  const c: CallLog = {
    author: undefined,
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
