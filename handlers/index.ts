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
import { get, getParams, type GetInput } from './get.js';
import { history, type HistoryInput } from './history.js';
import { put, putBody, type PutInput } from './put.js';
import { append, appendBody, type AppendInput } from './append.js';
import { claim, claimBody, type ClaimInput } from './claim.js';
import { transaction, transactionBody, MAX_TRANSACTION_WRITES, type TransactionInput } from './transaction.js';
import { checkpointSave, saveBody, type CheckpointSaveInput } from './checkpoint-save.js';
import { checkpointLoad, loadParams, type CheckpointLoadInput } from './checkpoint-load.js';
import { query, queryParams, QUERY_LIMIT_DEFAULT, QUERY_LIMIT_MAX, type QueryInput } from './query.js';
import type { McpSurface } from './types.js';
import { UNKNOWN_LABEL, type Outcome } from './pipeline.js';
import type { FieldBodyInput, RawBody, RecordBodyInput } from './body.js';
import { writeOnce } from './write-once.js';

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
  /** The MCP tool that carries it: name, `action`, listing text and arguments (decisions §7). */
  mcp?: McpSurface;
}

const op = <I>(o: Operation<I>) => o;

/** The HTTP translation of an operation on one record that takes a body. */
const recordBody = ({ params, body, names }: HttpInput): RecordBodyInput => ({ class: params.class, id: params.id, body, params: names });
/** The HTTP translation of a write to one field. */
const fieldBody = (req: HttpInput): FieldBodyInput => ({ ...recordBody(req), field: req.params.field });

/** Entries of a schema without the named keys. */
function without<E extends Record<string, unknown>, K extends keyof E>(entries: E, ...keys: K[]): Omit<E, K> {
  const out = { ...entries };
  for (const k of keys) delete out[k];
  return out;
}

/** Ends every tool description. */
const REFUSALS =
  'A refusal is an error result whose JSON has `error` (the code), `message` (what to do) and the details; nothing was written.';
/** No tool reaches outside kslate. */
const CLOSED = { openWorldHint: false } as const;
// `declare_no_premises` is gRPC's spelling of `based_on: []` (protobuf cannot tell an empty
// list from none); MCP sends JSON, so its tools list based_on only.
const JSON_PREMISES = 'declare_no_premises';

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
    // An addition to decisions §7 (issue 16): §7 left history to HTTP.
    grpc: 'History',
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
    mcp: {
      tool: 'svc_get',
      title: 'Read a shared record',
      description: [
        'Read a shared record. Returns {record, record_version, fields: {<field>: {value, version, author, identity_strength, evidence?, based_on?, invocation?, updated_at}}}.',
        "Keep each field's `version`: svc_put of that field needs it as expected_version, and based_on premises cite it.",
        'Only fields with a value appear; a field that is absent has version 0.',
        'Task fields show `owner` and `lease_expires_at` while someone holds them; append fields show `version` (entry count) and `entries`.',
        '`fields` limits the answer to the named fields; `entries_limit` caps the entries returned per append field.',
        'A response stops at about 16 MiB: fields that did not fit are named in `omitted_fields` (read them with `fields`), and an append field whose older entries did not fit carries `next_entries_before` (send it as `entries_before` with `fields` = [that field]).',
        'NOT_FOUND: nobody has written the record yet; create it with svc_put and expected_version 0.',
        REFUSALS,
      ],
      annotations: { readOnlyHint: true, ...CLOSED },
      args: getParams.entries,
    },
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
    mcp: {
      tool: 'svc_query',
      title: 'Find records by field values',
      description: [
        'Find records of a class whose current field values match every filter, oldest first.',
        '`filters` {<field>: <value>}: exact match; a number, boolean or string matches that JSON value; a task field matches its owner (e.g. "apikey:alice"); append fields cannot be filtered.',
        'Returns {class, records: [{record, record_version, fields}], next_after?}; append fields show only their entry count and latest entry.',
        `\`limit\` 1 to ${QUERY_LIMIT_MAX} (default ${QUERY_LIMIT_DEFAULT}); when next_after is present, call again with the same filters and after = next_after for the next page.`,
        REFUSALS,
      ],
      annotations: { readOnlyHint: true, ...CLOSED },
      args: queryParams.entries,
    },
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
    mcp: {
      tool: 'svc_checkpoint',
      action: 'save',
      title: "Save or load your role's progress",
      description: [
        "A checkpoint is your role's progress document on a record, so that you or a replacement agent can continue the work.",
        'action "save" with `document`: a JSON object of at most 64 KiB containing every section the class requires (e.g. {"summary": ..., "next_steps": ...}; INVALID_CHECKPOINT names missing ones).',
        'It is saved for your role (one per role and record, the latest wins); the record must exist. Returns {record, role, checkpoint_id, record_version}.',
        'Some classes require a role\'s checkpoint before status may be set to "resolved" (INVALID_CHECKPOINT on that svc_put): save first.',
      ],
      annotations: { destructiveHint: false, ...CLOSED },
      args: saveBody.entries,
    },
    method: 'PUT',
    path: '/v1/records/:class/:id/checkpoint',
    write: true,
    handler: checkpointSave,
    fromHttp: recordBody,
  }),
  checkpointLoad: op<CheckpointLoadInput>({
    name: 'checkpointLoad',
    grpc: 'CheckpointLoad',
    mcp: {
      tool: 'svc_checkpoint',
      action: 'load',
      title: "Save or load your role's progress",
      description: [
        'action "load" returns {record, role, document, record_version, changed_fields: [{field, version, author, evidence}]}: changed_fields are the fields written since the checkpoint was saved; re-read them with svc_get before acting on the document.',
        'Without a checkpoint, document is null and changed_fields lists every field written so far.',
        '`role`: load only, needed when you hold several roles in the class.',
        REFUSALS,
      ],
      annotations: { readOnlyHint: true, ...CLOSED },
      args: loadParams.entries,
    },
    method: 'GET',
    path: '/v1/records/:class/:id/checkpoint',
    write: false,
    handler: checkpointLoad,
    fromHttp: ({ params, query: q, names }) => ({ class: params.class, id: params.id, role: q.role, params: names }),
  }),
  claim: op<ClaimInput>({
    name: 'claim',
    grpc: 'Claim',
    mcp: {
      tool: 'svc_claim',
      title: 'Take, renew or release a task lease',
      description: [
        'Leases make one agent at a time work on a task field. Claim before you start the task:',
        "`lease_seconds` (1 to 86400; omit for the field's default lease) takes the lease; `renew: true` extends a lease you hold (renew before lease_expires_at while still working);",
        '`lease_seconds: 0` releases it when you finish or give up.',
        'Returns {record, field, owner, lease_expires_at, version, record_version, took_over_from?}; after a release there is no owner.',
        'HELD means another identity holds the lease (`owner`, `lease_expires_at`): do not work on that task; wait until lease_expires_at or pick another task.',
        'An expired lease is taken over: took_over_from names the previous owner; load the checkpoint (svc_checkpoint) to continue its work.',
        'To make a write conditional on still holding the lease, add {"field":"<task field>","version":<version returned here>,"kind":"fence"} to its based_on.',
        '`invocation` as for svc_put.',
        REFUSALS,
      ],
      annotations: { destructiveHint: false, idempotentHint: false, ...CLOSED },
      args: claimBody.entries,
    },
    method: 'PUT',
    path: '/v1/records/:class/:id/fields/:field/claim',
    write: true,
    handler: claim,
    fromHttp: fieldBody,
  }),
  append: op<AppendInput>({
    name: 'append',
    grpc: 'Append',
    mcp: {
      tool: 'svc_append',
      title: 'Add an entry to a list field',
      description: [
        "Add an entry to an append (list) field of a record, e.g. a note or a finding. Appends never conflict: no expected_version; the field's version is its entry count.",
        "`entry` must match the field's type. `evidence` is always required: where the entry comes from.",
        '`based_on` and `invocation` work as for svc_put (STALE_PREMISE if a premise moved; based_on: [] disables inference).',
        'Returns {record, field, seq, record_version}.',
        REFUSALS,
      ],
      annotations: { destructiveHint: false, idempotentHint: false, ...CLOSED },
      args: without(appendBody.entries, JSON_PREMISES),
      required: ['evidence'],
    },
    method: 'POST',
    path: '/v1/records/:class/:id/fields/:field/entries',
    write: true,
    handler: append,
    fromHttp: fieldBody,
  }),
  put: op<PutInput>({
    name: 'put',
    grpc: 'Put',
    mcp: {
      tool: 'svc_put',
      title: 'Write a field (compare-and-set)',
      description: [
        'Write one field of a record, only if it has not changed since you read it.',
        'First read it with svc_get and send its `version` as `expected_version` (0 = the field has no value yet; the first write creates the record).',
        'STALE means someone else wrote the field after your read; nothing was written. The error carries current_version, current_value, current_author, current_evidence and a diff of current vs your value.',
        'Do not just resend: re-read (svc_get), decide again in the light of the current value, then put again with expected_version = current_version (or leave it if your change is no longer right).',
        "Soft fields ignore expected_version (last write wins). `value` must match the field's type and enum.",
        '`evidence`: why the value is right (source, observation, link); required where the class or field demands it (EVIDENCE_REQUIRED).',
        '`based_on`: premises, e.g. [{"field":"severity","version":3}]: other fields of the record your decision relies on, at the versions you read. If any moved, the write is refused with STALE_PREMISE listing `moved`: re-read and decide again.',
        'Add {"field":"<task field>","version":<version from your latest svc_claim>,"kind":"fence"} to write only while you still hold that task\'s lease.',
        'Without based_on, and with an X-Svc-Scope header, premises are inferred from what you read in that scope in the last 15 minutes; based_on: [] declares the write rests on nothing and disables inference.',
        '`invocation`: optional JSON object of at most 1 KiB identifying this call (agent run, tool call id), recorded with the write and returned unchanged.',
        'Returns {record, field, version, record_version}.',
        REFUSALS,
      ],
      annotations: { destructiveHint: true, idempotentHint: false, ...CLOSED },
      args: without(putBody.entries, JSON_PREMISES),
    },
    method: 'PUT',
    path: '/v1/records/:class/:id/fields/:field',
    write: true,
    handler: put,
    fromHttp: fieldBody,
  }),
  transaction: op<TransactionInput>({
    name: 'transaction',
    // An addition (issue 33).
    grpc: 'Transact',
    mcp: {
      tool: 'svc_transaction',
      title: 'Write several fields of one record at once (all or nothing)',
      description: [
        `Apply 1 to ${MAX_TRANSACTION_WRITES} writes to one record together: either every write is applied, with one new record_version, or none is.`,
        '`writes`: in order, each {"op":"put","field","value","expected_version"} (as svc_put), {"op":"append","field","entry","evidence"} (as svc_append) or {"op":"claim","field","lease_seconds","renew"} (as svc_claim).',
        'Each write is checked as it would be alone, against the record as the earlier writes leave it: e.g. claim a task, then put with based_on [{"field":"<task>","version":<the task version + 1>,"kind":"fence"}] (the version the claim gives it).',
        '`based_on`, `evidence` and `invocation` at the top level apply to every write that has none of its own.',
        'Returns {record, record_version, transaction, writes: [{op, field, version | seq | owner...}]}.',
        'A refusal is the error the failing write alone would get (STALE, HELD, STALE_PREMISE, ...) plus `index`, the failing write; nothing was written.',
      ],
      annotations: { destructiveHint: true, idempotentHint: false, ...CLOSED },
      args: without(transactionBody.entries, JSON_PREMISES),
    },
    method: 'POST',
    path: '/v1/records/:class/:id/transactions',
    write: true,
    handler: transaction,
    fromHttp: recordBody,
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
    // Every write goes through its idempotency key and dry run here, on every transport.
    return op.write ? await writeOnce(op.name, ctx, input, (c) => op.handler(c, input)) : await op.handler(ctx, input);
  } catch (e) {
    const err = asSvcError(e, ctx);
    // A replayed or dry-run rejection was not a new rejection.
    if (err.code !== 'INTERNAL' && err.code !== 'UNAVAILABLE' && !err.replayed && !err.dryRun) {
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
    case 'lost':
      // Like a timeout, the statement may have committed with its answer lost: "retry shortly"
      // would invite a second append or a claim of what is already yours.
      return new SvcError(
        'UNAVAILABLE',
        'The connection to the database was lost while this request was in flight, so a write may have been applied: retry it with the same Idempotency-Key (MCP idempotency_key, gRPC idempotency-key) to get its answer without writing twice, or without a key read before retrying it (the gateway reconnects by itself).',
        // Said in the body too, for a client to act on without reading the message (docs/ha.md).
        { outcome: 'unknown' },
      );
    case 'timeout':
      return new SvcError(
        'UNAVAILABLE',
        // The server's own timeouts: the statement (or its transaction) was rolled back. The
        // client-side bound, after which a commit may still land, is 'lost' (db/errors.ts).
        'The database did not finish this request within its time budget (--db-timeout) and it was cancelled, so nothing was changed; retry shortly.',
      );
    case 'busy':
      // The batcher's own words (how many writes wait, the flag that bounds them).
      return new SvcError(
        'UNAVAILABLE',
        f.cause instanceof Error ? f.cause.message : 'This gateway has too many writes waiting for the database; this one was not sent, so nothing changed: retry shortly.',
      );
    case 'data':
      return new SvcError(
        'MALFORMED',
        'The request holds a value the database cannot store (a NUL character, invalid Unicode or an integer out of range); remove it.',
      );
    case 'schema':
      // Only a gateway that applies the schema itself (Node) can promise it; elsewhere (Workers)
      // it stays missing until someone runs the migration.
      return f.reapplying
        ? new SvcError('UNAVAILABLE', 'The database schema is missing and is being re-applied; retry shortly.')
        : new SvcError(
            'UNAVAILABLE',
            'The database schema is missing and this gateway does not apply it: run `kslate migrate --database-url <direct URL>` against this database, then retry.',
          );
  }
}

/** UNAVAILABLE errors already logged: a request's error passes several layers (invoke, Caller.run, the transport), each mapping it. */
const loggedUnavailable = new WeakSet<SvcError>();

/**
 * Any error as the SvcError a caller is answered. Logs what the operator must see once per
 * error, however many layers map it: an UNAVAILABLE as a warning, an unknown fault (which
 * becomes INTERNAL with the request id) as an error with its cause.
 */
export function asSvcError(e: unknown, ctx: Pick<Ctx, 'log' | 'requestId'>): SvcError {
  if (e instanceof StorageFault) e = storageFaultError(e);
  if (e instanceof SvcError) {
    if (e.code === 'UNAVAILABLE' && !loggedUnavailable.has(e)) {
      loggedUnavailable.add(e);
      ctx.log.warn(e.message, { request_id: ctx.requestId });
    }
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
