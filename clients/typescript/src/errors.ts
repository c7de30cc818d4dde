/**
 * Typed errors, one class per error code the gateway answers (docs/api.md, "Errors"), built
 * from the error body by one table (`errorFromBody`). Every class keeps the whole body in
 * `body`, the HTTP status in `status` and the code in `code`.
 */
import type { components } from './schema.js';

type Schemas = components['schemas'];

/** Every error body the gateway sends has `error` (the code) and `message`. */
export interface ErrorBody {
  error: string;
  message?: string;
  record?: string;
  field?: string;
  [key: string]: unknown;
}

export class KslateError extends Error {
  override name = 'KslateError';
  /** The gateway's error code (STALE, HELD, ...), or NETWORK / ABORTED for failures before an answer. */
  readonly code: string;
  /** The HTTP status (0 when no answer came). */
  readonly status: number;
  /** The error body as sent. */
  readonly body: ErrorBody;
  /** The gateway's X-Request-Id of the failed request, when it answered. */
  readonly requestId: string | undefined;
  constructor(status: number, body: ErrorBody, requestId?: string, options?: { cause?: unknown }) {
    super(body.message ?? body.error, options);
    this.code = body.error;
    this.status = status;
    this.body = body;
    this.requestId = requestId;
  }
  get record(): string | undefined {
    return this.body.record;
  }
  get field(): string | undefined {
    return this.body.field;
  }
}

/** STALE: the field moved since the version you sent; `currentValue` is what it holds now. */
export class StaleError extends KslateError {
  override name = 'StaleError';
  declare readonly body: ErrorBody & Schemas['StaleError'];
  /** The field's value now (null when your role may write but not read it). */
  get currentValue(): unknown {
    return this.body.current_value;
  }
  get currentVersion(): number {
    return this.body.current_version;
  }
  get yourVersion(): number {
    return this.body.your_version;
  }
  get currentAuthor(): string | null {
    return this.body.current_author;
  }
  /** Unified diff of the current value and yours, as pretty-printed JSON. */
  get diff(): string {
    return this.body.diff;
  }
  /** False when your role may write the field but not read it (currentValue is then null). */
  get readable(): boolean {
    return this.body.current_author !== null || this.body.current_version === 0;
  }
}

/** STALE_PREMISE: a field your write rests on (based_on) moved; `moved` lists which. */
export class StalePremiseError extends KslateError {
  override name = 'StalePremiseError';
  declare readonly body: ErrorBody & Schemas['StalePremiseError'];
  get moved(): Schemas['StalePremiseError']['moved'] {
    return this.body.moved;
  }
}

/** HELD: another identity holds the task field's lease. */
export class HeldError extends KslateError {
  override name = 'HeldError';
  declare readonly body: ErrorBody & Schemas['HeldError'];
  get owner(): string {
    return this.body.owner;
  }
  get leaseExpiresAt(): string {
    return this.body.lease_expires_at;
  }
}

export class MalformedError extends KslateError {
  override name = 'MalformedError';
}
export class UnauthenticatedError extends KslateError {
  override name = 'UnauthenticatedError';
}
export class NoRoleError extends KslateError {
  override name = 'NoRoleError';
}
export class ScopeDeniedError extends KslateError {
  override name = 'ScopeDeniedError';
}
export class WeakIdentityError extends KslateError {
  override name = 'WeakIdentityError';
}
export class IdentityMismatchError extends KslateError {
  override name = 'IdentityMismatchError';
}
export class NotFoundError extends KslateError {
  override name = 'NotFoundError';
}
export class ClassGoneError extends KslateError {
  override name = 'ClassGoneError';
}
export class ExpiredError extends KslateError {
  override name = 'ExpiredError';
}
/** EVIDENCE_REQUIRED, UNKNOWN_FIELD, NOT_WRITABLE, NOT_APPEND_FIELD, NOT_TASK_FIELD, INVALID_CHECKPOINT. */
export class UnprocessableError extends KslateError {
  override name = 'UnprocessableError';
}
export class RateLimitedError extends KslateError {
  override name = 'RateLimitedError';
}
/** IDEMPOTENCY_KEY_REUSED: the same Idempotency-Key was sent with a different request. */
export class IdempotencyKeyReusedError extends KslateError {
  override name = 'IdempotencyKeyReusedError';
}
/** UNAVAILABLE (503) after the client's retries ran out; `outcome: "unknown"` means a write may have been applied. */
export class UnavailableError extends KslateError {
  override name = 'UnavailableError';
  get outcomeUnknown(): boolean {
    return this.body.outcome === 'unknown';
  }
}
/** No answer: the connection failed (after the client's retries ran out). */
export class NetworkError extends KslateError {
  override name = 'NetworkError';
}

const BY_CODE: Record<string, new (status: number, body: ErrorBody, requestId?: string) => KslateError> = {
  STALE: StaleError,
  STALE_PREMISE: StalePremiseError,
  HELD: HeldError,
  MALFORMED: MalformedError,
  UNAUTHENTICATED: UnauthenticatedError,
  NO_ROLE: NoRoleError,
  SCOPE_DENIED: ScopeDeniedError,
  WEAK_IDENTITY: WeakIdentityError,
  IDENTITY_MISMATCH: IdentityMismatchError,
  NOT_FOUND: NotFoundError,
  CLASS_GONE: ClassGoneError,
  EXPIRED: ExpiredError,
  EVIDENCE_REQUIRED: UnprocessableError,
  UNKNOWN_FIELD: UnprocessableError,
  NOT_WRITABLE: UnprocessableError,
  NOT_APPEND_FIELD: UnprocessableError,
  NOT_TASK_FIELD: UnprocessableError,
  INVALID_CHECKPOINT: UnprocessableError,
  IDEMPOTENCY_KEY_REUSED: IdempotencyKeyReusedError,
  RATE_LIMITED: RateLimitedError,
  UNAVAILABLE: UnavailableError,
};

/** The typed error for an error answer (a body without a code becomes KslateError with code HTTP_<status>). */
export function errorFromBody(status: number, body: unknown, requestId?: string): KslateError {
  const b: ErrorBody =
    body && typeof body === 'object' && typeof (body as ErrorBody).error === 'string'
      ? (body as ErrorBody)
      : { error: `HTTP_${status}`, message: typeof body === 'string' && body ? body.slice(0, 1024) : `HTTP ${status}` };
  const Cls = BY_CODE[b.error] ?? KslateError;
  return new Cls(status, b, requestId);
}
