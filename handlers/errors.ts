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
  METHOD_NOT_ALLOWED: { http: 405, grpc: 12 },
};

/**
 * A rejection. `extra` holds the code's body keys (record, field, current_version, ...);
 * the wire body is `{ error, message, ...extra }` on every transport.
 */
export class SvcError extends Error {
  readonly code: ErrorCode;
  readonly extra: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, extra: Record<string, unknown> = {}) {
    super(message);
    this.name = 'SvcError';
    this.code = code;
    this.extra = extra;
  }

  get status(): number {
    return ERROR_TABLE[this.code].http;
  }

  /** The error body, identical on HTTP, MCP and gRPC. */
  body(): Record<string, unknown> {
    return { error: this.code, message: this.message, ...this.extra };
  }
}

export function isSvcError(e: unknown): e is SvcError {
  return e instanceof SvcError;
}
