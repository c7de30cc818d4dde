/**
 * The request context every handler receives: identity, scope, clock, logger, metrics,
 * class registry and the database port. Built once per request by a transport from
 * process-wide services (style habit 7).
 */
import type { Db } from '../db/port.js';
import type { ClassRegistry } from './class-registry.js';
import type { Identity } from './types.js';
import type { WatchFeed } from './watch-feed.js';

export interface Logger {
  debug(msg: string, data?: Record<string, unknown>): void;
  info(msg: string, data?: Record<string, unknown>): void;
  warn(msg: string, data?: Record<string, unknown>): void;
  error(msg: string, data?: Record<string, unknown>): void;
}

/** Labels a handler learns while it runs, read by the instrumentation after it returns. */
export interface Trace {
  class?: string;
  field?: string;
  role?: string;
}

/** The metrics of the spec's Limits section; a no-op implementation is fine in tests. */
export interface Metrics {
  write(cls: string, field: string, outcome: string): void;
  rejection(cls: string, field: string, role: string, outcome: string): void;
  claim(cls: string, field: string, outcome: string): void;
  takeover(): void;
  checkpoint(cls: string, role: string): void;
  writeLatency(seconds: number): void;
}

/**
 * The request's credential, kept for what outlives the request (a watch stream): checked
 * again while the stream runs and at its expiry, so a revoked key or an expired token ends it.
 */
export interface Credential {
  /** When the credential stops being valid (milliseconds since the epoch: a JWT's `exp`), or null when it does not say. */
  readonly expiresAt: number | null;
  /**
   * Authenticate it again: true while it still names the same caller, false once it is
   * refused (or names someone else). Throws when the provider cannot judge right now (an
   * outage is not a revocation).
   */
  check(): Promise<boolean>;
}

export interface Ctx {
  identity: Identity;
  /** `X-Svc-Scope` (or gRPC `x-svc-scope`), at most 256 bytes; undefined when absent. */
  scope: string | undefined;
  requestId: string;
  now(): Date;
  log: Logger;
  metrics: Metrics;
  classes: ClassRegistry;
  db: Db;
  /** HMAC key for cursors, shared by every replica through the database. */
  cursorKey(): Promise<string>;
  trace: Trace;
  /** The process's change hub (watch streams); absent where no process outlives a request (Workers). */
  watch?: WatchFeed;
  /** The credential the request authenticated with, for streams that outlive it; absent where nothing outlives a request. */
  credential?: Credential;
  /** A write's idempotency key and dry-run flag, as the transport read them (handlers/write-once.ts). */
  writeOptions?: WriteOptions;
  /** How long a write's answer is kept under its idempotency key (`--idempotency-ttl`); default 24 h. */
  idempotencyTtlSeconds?: number;
}

export const noopMetrics: Metrics = {
  write() {},
  rejection() {},
  claim() {},
  takeover() {},
  checkpoint() {},
  writeLatency() {},
};

/** A write's idempotency key and dry-run flag, as the transport read them (used by handlers/write-once.ts). */
export interface WriteOptions {
  /** `Idempotency-Key` (HTTP), `idempotency_key` (MCP), `idempotency-key` metadata (gRPC). */
  idempotencyKey?: string;
  /** `?dry_run=true` (HTTP), `dry_run` (MCP, gRPC). */
  dryRun?: boolean;
}
