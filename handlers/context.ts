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
}

export const noopMetrics: Metrics = {
  write() {},
  rejection() {},
  claim() {},
  takeover() {},
  checkpoint() {},
  writeLatency() {},
};
