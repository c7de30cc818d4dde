/**
 * The operation table: every transport mounts these and nothing else (style habit 2), and
 * `invoke` is the one instrumentation point (latency, rejection counts, fault logging) that
 * HTTP, MCP and gRPC all pass through.
 */
import type { Ctx } from './context.js';
import { StorageFault } from '../db/port.js';
import { SvcError } from './errors.js';
import { classes } from './classes.js';
import { getClass } from './class.js';
import { get, type GetInput } from './get.js';
import { history, type HistoryInput } from './history.js';
import { put, type PutInput } from './put.js';
import { append, type AppendInput } from './append.js';
import { claim, type ClaimInput } from './claim.js';
import { checkpointSave, type CheckpointSaveInput } from './checkpoint-save.js';
import { checkpointLoad, type CheckpointLoadInput } from './checkpoint-load.js';
import { query, type QueryInput } from './query.js';
import { UNKNOWN_LABEL, type Outcome } from './pipeline.js';
import type { RawBody } from './body.js';

export type Handler<I> = (ctx: Ctx, input: I) => Promise<Outcome>;

/** What the HTTP transport knows of a request: path parameters, query string and raw body. */
export interface HttpInput {
  params: Record<string, string>;
  /** The first value of each query parameter. */
  query: Record<string, string>;
  /** Every query parameter name as sent, repeats included (the handler refuses unknown and repeated ones). */
  names: string[];
  body: RawBody;
}

export interface Operation<I = any> {
  name: string;
  method: 'GET' | 'PUT' | 'POST';
  /** Hono-style path. */
  path: string;
  /** Writes are timed in svc_write_latency_seconds and are the only ones reading a body. */
  write: boolean;
  handler: Handler<I>;
  /** Translate an HTTP request into the handler's input: names only, no checks. */
  fromHttp(req: HttpInput): I;
  /** The RPC of svc.v1.SvcService that carries it; absent = not on gRPC (decisions §7). */
  grpc?: string;
  /** The MCP tool that carries it, and the `action` argument that selects it when one tool carries two. */
  mcp?: { tool: string; action?: string };
}

const op = <I>(o: Operation<I>) => o;

export const operations = {
  classes: op({
    name: 'classes',
    method: 'GET',
    path: '/v1/classes',
    write: false,
    handler: classes,
    fromHttp: ({ names }) => ({ params: names }),
  }),
  class: op({
    name: 'class',
    method: 'GET',
    path: '/v1/classes/:name',
    write: false,
    handler: getClass,
    fromHttp: ({ params, names }) => ({ name: params.name, params: names }),
  }),
  history: op<HistoryInput>({
    name: 'history',
    method: 'GET',
    path: '/v1/records/:class/:id/history',
    write: false,
    handler: history,
    fromHttp: ({ params, query, names }) => ({
      class: params.class,
      id: params.id,
      field: query.field,
      limit: query.limit,
      before: query.before,
      params: names,
    }),
  }),
  get: op<GetInput>({
    name: 'get',
    grpc: 'Get',
    mcp: { tool: 'svc_get' },
    method: 'GET',
    path: '/v1/records/:class/:id',
    write: false,
    handler: get,
    fromHttp: ({ params, query, names }) => ({
      class: params.class,
      id: params.id,
      fields: query.fields,
      entries_limit: query.entries_limit,
      entries_before: query.entries_before,
      params: names,
    }),
  }),
  query: op<QueryInput>({
    name: 'query',
    grpc: 'Query',
    mcp: { tool: 'svc_query' },
    method: 'GET',
    path: '/v1/records/:class',
    write: false,
    handler: query,
    fromHttp: ({ params, query: q, names }) => {
      const { limit, after, ...filters } = q;
      return { class: params.class, filters, limit, after, params: names };
    },
  }),
  checkpointSave: op<CheckpointSaveInput>({
    name: 'checkpointSave',
    grpc: 'CheckpointSave',
    mcp: { tool: 'svc_checkpoint', action: 'save' },
    method: 'PUT',
    path: '/v1/records/:class/:id/checkpoint',
    write: true,
    handler: checkpointSave,
    fromHttp: ({ params, body, names }) => ({ class: params.class, id: params.id, body, params: names }),
  }),
  checkpointLoad: op<CheckpointLoadInput>({
    name: 'checkpointLoad',
    grpc: 'CheckpointLoad',
    mcp: { tool: 'svc_checkpoint', action: 'load' },
    method: 'GET',
    path: '/v1/records/:class/:id/checkpoint',
    write: false,
    handler: checkpointLoad,
    fromHttp: ({ params, query: q, names }) => ({ class: params.class, id: params.id, role: q.role, params: names }),
  }),
  claim: op<ClaimInput>({
    name: 'claim',
    grpc: 'Claim',
    mcp: { tool: 'svc_claim' },
    method: 'PUT',
    path: '/v1/records/:class/:id/fields/:field/claim',
    write: true,
    handler: claim,
    fromHttp: ({ params, body, names }) => ({ class: params.class, id: params.id, field: params.field, body, params: names }),
  }),
  append: op<AppendInput>({
    name: 'append',
    grpc: 'Append',
    mcp: { tool: 'svc_append' },
    method: 'POST',
    path: '/v1/records/:class/:id/fields/:field/entries',
    write: true,
    handler: append,
    fromHttp: ({ params, body, names }) => ({ class: params.class, id: params.id, field: params.field, body, params: names }),
  }),
  put: op<PutInput>({
    name: 'put',
    grpc: 'Put',
    mcp: { tool: 'svc_put' },
    method: 'PUT',
    path: '/v1/records/:class/:id/fields/:field',
    write: true,
    handler: put,
    fromHttp: ({ params, body, names }) => ({ class: params.class, id: params.id, field: params.field, body, params: names }),
  }),
};

/** Rejection codes whose outcomes already reach history with their own names. */
const OUTCOME_OF: Record<string, string> = {
  STALE: 'stale',
  STALE_PREMISE: 'stale_premise',
  HELD: 'held',
  SCOPE_DENIED: 'scope_denied',
  WEAK_IDENTITY: 'weak_identity',
  EVIDENCE_REQUIRED: 'evidence_required',
  IDENTITY_MISMATCH: 'identity_mismatch',
};

/**
 * Run one operation: returns the outcome, or throws a SvcError (an unknown fault becomes
 * INTERNAL with the request id; its cause is logged, never echoed).
 */
export async function invoke<I>(
  op: Operation<I>,
  ctx: Ctx,
  input: I,
  /** Count in svc_write_latency_seconds: every non-GET request (MCP tool calls are POSTs). */
  opts: { timed?: boolean } = {},
): Promise<Outcome> {
  const started = performance.now();
  try {
    return await op.handler(ctx, input);
  } catch (e) {
    const err = asSvcError(e, ctx);
    if (err.code !== 'INTERNAL' && err.code !== 'UNAVAILABLE') {
      // Labels are names the pipeline verified (class, field, roles of the registry), else fixed
      // values, so no request can mint a series (svc_rejections_total once grew to 1.4 GB).
      ctx.metrics.rejection(
        ctx.trace.class ?? UNKNOWN_LABEL,
        ctx.trace.field ?? '',
        ctx.trace.role ?? '',
        OUTCOME_OF[err.code] ?? err.code.toLowerCase(),
      );
    }
    throw err;
  } finally {
    if (opts.timed ?? op.write) ctx.metrics.writeLatency((performance.now() - started) / 1000);
  }
}

/** The spec's answer to a storage fault (db/port.ts): what happened and what to do. */
export function storageFaultError(f: StorageFault): SvcError {
  switch (f.kind) {
    case 'unreachable':
      return new SvcError('UNAVAILABLE', 'The database is unreachable; retry shortly (the gateway reconnects by itself).');
    case 'timeout':
      return new SvcError(
        'UNAVAILABLE',
        'The database did not finish this request within its time budget (--db-timeout) and it was cancelled; retry shortly (a write that timed out may need a read first to see whether it applied).',
      );
    case 'data':
      return new SvcError(
        'MALFORMED',
        'The request holds a value the database cannot store (a NUL character, invalid Unicode or an integer out of range); remove it.',
      );
    case 'schema':
      return new SvcError('UNAVAILABLE', 'The database schema is missing and is being re-applied; retry shortly.');
  }
}

export function asSvcError(e: unknown, ctx: Pick<Ctx, 'log' | 'requestId'>): SvcError {
  if (e instanceof StorageFault) e = storageFaultError(e);
  if (e instanceof SvcError) {
    if (e.code === 'UNAVAILABLE') ctx.log.warn(e.message, { request_id: ctx.requestId });
    return e;
  }
  ctx.log.error('internal fault', {
    request_id: ctx.requestId,
    error: e instanceof Error ? (e.stack ?? e.message) : String(e),
  });
  return new SvcError('INTERNAL', `Internal error; report request id ${ctx.requestId} to the operator.`, {
    request_id: ctx.requestId,
  });
}
