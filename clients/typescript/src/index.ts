/**
 * @kslate/client: a typed client for kslate over fetch (Node >= 20, browsers, Deno,
 * Cloudflare Workers). See README.md.
 */
export { kslate, KslateClient, Records, RecordHandle, Lease } from './client.js';
export type {
  KslateOptions,
  CallOptions,
  WriteOptions,
  PutOptions,
  ClaimOptions,
  GetOptions,
  HistoryOptions,
  QueryOptions,
  UpdateOptions,
  LeaseOptions,
  TransactionWrite,
  TransactionResult,
  RecordData,
  Field,
  PutResult,
  AppendResult,
  ClaimResult,
  CheckpointSaveResult,
  CheckpointLoadResult,
  QueryResult,
  HistoryResult,
  HistoryRow,
  Premise,
  Invocation,
} from './client.js';
export type { WatchChange, WatchOptions } from './watch.js';
export { Transport, lsnValue, newIdempotencyKey, type RetryOptions, type TransportOptions } from './transport.js';
export * from './errors.js';
export type { paths, components, operations } from './schema.js';
