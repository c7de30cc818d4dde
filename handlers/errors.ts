/**
 * One error class and one table: every transport maps errors through here (style habit 3).
 */

export type ErrorCode =
  | 'MALFORMED'
  | 'UNAUTHENTICATED'
  | 'NO_ROLE'
  | 'SCOPE_DENIED'
  | 'WEAK_IDENTITY'
  | 'IDENTITY_MISMATCH'
  | 'NOT_FOUND'
  | 'STALE'
  | 'STALE_PREMISE'
  | 'HELD'
  | 'CLASS_GONE'
  | 'EVIDENCE_REQUIRED'
  | 'UNKNOWN_FIELD'
  | 'NOT_WRITABLE'
  | 'NOT_APPEND_FIELD'
  | 'NOT_TASK_FIELD'
  | 'INVALID_CHECKPOINT'
  | 'RATE_LIMITED'
  | 'INTERNAL'
  | 'UNAVAILABLE'
  /** A class watch cursor older than the change log's retained window (issue 16; 410 like Kubernetes' Gone). */
  | 'EXPIRED'
  /** The idempotency key was used for a different request (issue 33). */
  | 'IDEMPOTENCY_KEY_REUSED'
  /** A request with the idempotency key is still running (issue 33; Retry-After). */
  | 'IDEMPOTENCY_KEY_IN_USE'
  /** HTTP routing only: a known path with a method it does not take (405 with `Allow`). */
  | 'METHOD_NOT_ALLOWED';

/** HTTP status and gRPC status code (decisions §7) for every error code. */
export const ERROR_TABLE: Record<ErrorCode, { http: number; grpc: number }> = {
  MALFORMED: { http: 400, grpc: 3 },
  UNAUTHENTICATED: { http: 401, grpc: 16 },
  NO_ROLE: { http: 403, grpc: 7 },
  SCOPE_DENIED: { http: 403, grpc: 7 },
  WEAK_IDENTITY: { http: 403, grpc: 7 },
  IDENTITY_MISMATCH: { http: 403, grpc: 7 },
  NOT_FOUND: { http: 404, grpc: 5 },
  STALE: { http: 409, grpc: 10 },
  STALE_PREMISE: { http: 409, grpc: 10 },
  HELD: { http: 409, grpc: 10 },
  CLASS_GONE: { http: 410, grpc: 9 },
  EVIDENCE_REQUIRED: { http: 422, grpc: 9 },
  UNKNOWN_FIELD: { http: 422, grpc: 9 },
  NOT_WRITABLE: { http: 422, grpc: 9 },
  NOT_APPEND_FIELD: { http: 422, grpc: 9 },
  NOT_TASK_FIELD: { http: 422, grpc: 9 },
  INVALID_CHECKPOINT: { http: 422, grpc: 9 },
  RATE_LIMITED: { http: 429, grpc: 8 },
  INTERNAL: { http: 500, grpc: 13 },
  UNAVAILABLE: { http: 503, grpc: 14 },
  EXPIRED: { http: 410, grpc: 11 },
  METHOD_NOT_ALLOWED: { http: 405, grpc: 12 },
  IDEMPOTENCY_KEY_REUSED: { http: 422, grpc: 9 },
  IDEMPOTENCY_KEY_IN_USE: { http: 409, grpc: 10 },
};

/**
 * A rejection. `extra` holds the code's body keys (record, field, current_version, ...);
 * the wire body is `{ error, message, ...extra }` on every transport.
 */
export class SvcError extends Error {
  readonly code: ErrorCode;
  readonly extra: Record<string, unknown>;
  /** The answer stored under the request's idempotency key, replayed (handlers/write-once.ts). */
  replayed = false;
  /** A dry run's rejection: nothing was written. */
  dryRun = false;

  constructor(code: ErrorCode, message: string, extra: Record<string, unknown> = {}) {
    // Messages and the names they echo are bounded: a 70,000-character field name must not
    // make a 70 KB error (on gRPC it travels in trailers, which clients cap at 8 KiB).
    super(clip(message, MAX_MESSAGE_CHARS));
    this.name = 'SvcError';
    this.code = code;
    this.extra = extra;
    for (const k of ECHOED_KEYS) {
      const v = extra[k];
      if (typeof v === 'string' && v.length > MAX_ECHO_CHARS) this.extra = { ...this.extra, [k]: clip(v, MAX_ECHO_CHARS) };
    }
  }

  get status(): number {
    return ERROR_TABLE[this.code].http;
  }

  /** The error body, identical on HTTP, MCP and gRPC. */
  body(): Record<string, unknown> {
    return { error: this.code, message: this.message, ...this.extra };
  }
}

/** Longest error message; longer ones (echoing huge input) are cut with an ellipsis. */
export const MAX_MESSAGE_CHARS = 1024;
/** Longest `record`, `field` or `class` echoed in an error body (ids are at most 256 bytes; names from a URL can be anything). */
export const MAX_ECHO_CHARS = 512;
const ECHOED_KEYS = ['record', 'field', 'class'] as const;

function clip(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

export function isSvcError(e: unknown): e is SvcError {
  return e instanceof SvcError;
}
