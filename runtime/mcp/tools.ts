/**
 * The six MCP tools (decisions §7): each one translates its arguments into the input of one
 * operation of the table and calls `invoke`, so the MCP answer is the HTTP body. No rule lives
 * here: arguments are not validated (the JSON Schemas are for the client and the model), the
 * handlers produce MALFORMED at their step of the rejection order, with HTTP's message.
 */
import * as v from 'valibot';
import { toJsonSchema } from '@valibot/to-json-schema';
import { ErrorCode, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { jsonProblem, type RawBody } from '../../handlers/body.js';
import type { Ctx } from '../../handlers/context.js';
import { SvcError } from '../../handlers/errors.js';
import type { CheckpointLoadInput } from '../../handlers/checkpoint-load.js';
import type { GetInput } from '../../handlers/get.js';
import { asSvcError, invoke, operations, type Operation } from '../../handlers/index.js';
import type { Outcome } from '../../handlers/pipeline.js';
import type { QueryInput } from '../../handlers/query.js';

/** Tool arguments as the client sent them (any JSON object). */
export type ToolArgs = Record<string, unknown>;

/** One MCP tool: its listing and its translation onto an operation. */
export interface ToolDef {
  name: string;
  title: string;
  description: string;
  schema: v.GenericSchema;
  annotations?: Tool['annotations'];
  run(ctx: Ctx, args: ToolArgs): Promise<Outcome>;
}

// The table infers a read's input type from its HTTP mapping, where query values are text; the
// handlers take the wider inputs (lists, numbers, absent keys) that MCP and gRPC send.
const reads = {
  get: operations.get as Operation<GetInput>,
  query: operations.query as Operation<QueryInput>,
  checkpointLoad: operations.checkpointLoad as Operation<CheckpointLoadInput>,
};

// Every tool call is a POST on /mcp, so it counts in svc_write_latency_seconds (interface.md, Metrics).
const TIMED = { timed: true } as const;

// ---- argument translation ---------------------------------------------------------------

/**
 * `<class>/<id>` → class and id. Split at the first '/': the rest is the id, so an id
 * containing '/' reaches the handler, which refuses it (MALFORMED); a string without '/' gives
 * an empty id, which the handler refuses after the class checks, as the order wants.
 */
export function splitRecord(record: string): { class: string; id: string } {
  const slash = record.indexOf('/');
  return slash < 0 ? { class: record, id: '' } : { class: record.slice(0, slash), id: record.slice(slash + 1) };
}

/**
 * A required addressing argument (record, field, class, action): the MCP counterpart of a
 * URL path segment. Without it there is no operation to call, so, like an unroutable URL,
 * it is refused here; everything else is left to the handler.
 */
function address(args: ToolArgs, key: string, what: string, where: Record<string, unknown> = {}): string {
  const value = args[key];
  if (typeof value !== 'string') throw new SvcError('MALFORMED', `\`${key}\` is required: ${what}.`, where);
  return value;
}

function recordOf(args: ToolArgs): { class: string; id: string } {
  return splitRecord(address(args, 'record', 'a string "<class>/<id>", e.g. "incident/db-outage"'));
}

function fieldOf(args: ToolArgs): string {
  return address(args, 'field', 'the name of the field', typeof args.record === 'string' ? { record: args.record } : {});
}

/**
 * The arguments that are not the call's address (record, field, action), as the JSON body of
 * the write: nothing added, nothing dropped, so a key the operation does not take is refused
 * by the handler (`unknown key "x"`), as on HTTP.
 */
function body(args: ToolArgs, address: readonly string[]): RawBody {
  const value: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(args)) if (!address.includes(k)) value[k] = v;
  return { kind: 'json', value };
}

/** A read tool's arguments other than its address: the handler refuses those it does not take, as HTTP query parameters. */
function params(args: ToolArgs, address: readonly string[]): string[] {
  return Object.keys(args).filter((k) => !address.includes(k));
}

/**
 * A JSON argument that must become text (a filter value, a field name) is refused when it
 * nests deeper than bodies may, before JSON.stringify could exhaust the stack on it.
 */
function shallow(x: unknown, what: string): unknown {
  if (x !== null && typeof x === 'object') {
    const problem = jsonProblem({ x });
    if (problem) throw new SvcError('MALFORMED', `\`${what}\` cannot be used: ${problem}.`);
  }
  return x;
}

/**
 * A value the HTTP transport would take from the query string. Text passes as is; null means
 * not given (a query string cannot say null); any other JSON value goes as its JSON text, which
 * the handler then judges exactly as it would the same text in a URL.
 */
function queryText(x: unknown, what = 'argument'): string | undefined {
  if (x === undefined || x === null) return undefined;
  return typeof x === 'string' ? x : JSON.stringify(shallow(x, what));
}

/** As `queryText`, but numbers pass as numbers (the handlers accept both for limits). */
function queryNumber(x: unknown): string | number | undefined {
  return typeof x === 'number' ? x : queryText(x);
}

/** `fields` of svc_get: a list of names (or HTTP's comma-separated text). */
function fieldList(x: unknown): string | string[] | undefined {
  return Array.isArray(x) ? x.map((n) => (typeof n === 'string' ? n : JSON.stringify(shallow(n, 'fields')))) : queryText(x, 'fields');
}

/** svc_query `filters`: each value as an HTTP query parameter would carry it. */
function filtersOf(args: ToolArgs, cls: string): Record<string, string> {
  const f = args.filters;
  if (f === undefined || f === null) return {};
  if (typeof f !== 'object' || Array.isArray(f)) {
    throw new SvcError('MALFORMED', '`filters` must be an object {<field>: <value>}.', { class: cls });
  }
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(f)) out[k] = typeof val === 'string' ? val : JSON.stringify(shallow(val, `filters.${k}`));
  return out;
}

/** The `action` values the operation table declares for a tool that carries several operations. */
function actionsOf(tool: string): [string, ...string[]] {
  const actions = (Object.values(operations) as Operation[]).flatMap((o) => (o.mcp?.tool === tool && o.mcp.action ? [o.mcp.action] : []));
  if (actions.length === 0) throw new Error(`no operation declares an action of ${tool}`);
  return actions as [string, ...string[]];
}

// ---- schemas (for the client; never enforced here) --------------------------------------

const d = v.description;
const record = v.pipe(v.string(), d('The record, "<class>/<id>", e.g. "incident/db-outage".'));
const field = v.pipe(v.string(), d('The field name, as defined by the class.'));
const premise = v.strictObject({
  field: v.pipe(v.string(), d('A field of the same record your decision relies on.')),
  version: v.pipe(v.number(), v.integer(), v.minValue(0), d('The version of that field you read (0 = it had no value).')),
  kind: v.optional(
    v.pipe(v.picklist(['fence']), d('"fence": a task field; the write holds only while you still hold its lease.')),
  ),
});
const basedOn = v.optional(
  v.pipe(
    v.array(premise),
    d('Premises: fields (with the versions you read) this write rests on. [] = rests on nothing (disables inference).'),
  ),
);
const invocation = v.optional(
  v.pipe(v.looseObject({}), d('Optional JSON object, at most 1 KiB, identifying this call (run id, tool call id); stored with the write.')),
);

// ---- the tools --------------------------------------------------------------------------

const ERRORS =
  'A refusal is an error result whose JSON has `error` (the code), `message` (what to do) and the details; nothing was written.';

export const TOOLS: readonly ToolDef[] = [
  {
    name: 'svc_get',
    title: 'Read a shared record',
    description: [
      'Read a shared record. Returns {record, record_version, fields: {<field>: {value, version, author, identity_strength, evidence?, based_on?, invocation?, updated_at}}}.',
      'Keep each field\'s `version`: svc_put of that field needs it as expected_version, and based_on premises cite it.',
      'Only fields with a value appear; a field that is absent has version 0.',
      'Task fields show `owner` and `lease_expires_at` while someone holds them; append fields show `version` (entry count) and `entries`.',
      '`fields` limits the answer to the named fields; `entries_limit` caps the entries returned per append field.',
      'A response stops at about 16 MiB: fields that did not fit are named in `omitted_fields` (read them with `fields`), and an append field whose older entries did not fit carries `next_entries_before` (send it as `entries_before` with `fields` = [that field]).',
      'NOT_FOUND: nobody has written the record yet; create it with svc_put and expected_version 0.',
      ERRORS,
    ].join(' '),
    schema: v.strictObject({
      record,
      fields: v.optional(v.pipe(v.array(v.string()), d('Only these fields (default: every field your role may read).'))),
      entries_limit: v.optional(
        v.pipe(v.number(), v.integer(), v.minValue(0), d('At most this many entries per append field (the newest).')),
      ),
      entries_before: v.optional(
        v.pipe(
          v.string(),
          d('Continue an append field whose entries did not all fit: its next_entries_before, with fields = [that field].'),
        ),
      ),
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    run(ctx, a) {
      const r = recordOf(a);
      const input = {
        ...r,
        fields: fieldList(a.fields),
        entries_limit: queryNumber(a.entries_limit),
        entries_before: queryText(a.entries_before, 'entries_before'),
        params: params(a, ['record']),
      };
      return invoke(reads.get, ctx, input, TIMED);
    },
  },
  {
    name: 'svc_put',
    title: 'Write a field (compare-and-set)',
    description: [
      'Write one field of a record, only if it has not changed since you read it.',
      'First read it with svc_get and send its `version` as `expected_version` (0 = the field has no value yet; the first write creates the record).',
      'STALE means someone else wrote the field after your read; nothing was written. The error carries current_version, current_value, current_author, current_evidence and a diff of current vs your value.',
      'Do not just resend: re-read (svc_get), decide again in the light of the current value, then put again with expected_version = current_version (or leave it if your change is no longer right).',
      'Soft fields ignore expected_version (last write wins). `value` must match the field\'s type and enum.',
      '`evidence`: why the value is right (source, observation, link); required where the class or field demands it (EVIDENCE_REQUIRED).',
      '`based_on`: premises, e.g. [{"field":"severity","version":3}]: other fields of the record your decision relies on, at the versions you read. If any moved, the write is refused with STALE_PREMISE listing `moved`: re-read and decide again.',
      'Add {"field":"<task field>","version":<version from your latest svc_claim>,"kind":"fence"} to write only while you still hold that task\'s lease.',
      'Without based_on, and with an X-Svc-Scope header, premises are inferred from what you read in that scope in the last 15 minutes; based_on: [] declares the write rests on nothing and disables inference.',
      '`invocation`: optional JSON object of at most 1 KiB identifying this call (agent run, tool call id), recorded with the write and returned unchanged.',
      'Returns {record, field, version, record_version}.',
      ERRORS,
    ].join(' '),
    schema: v.strictObject({
      record,
      field,
      value: v.pipe(v.unknown(), d('The new value: any JSON matching the field\'s type and enum.')),
      expected_version: v.optional(
        v.pipe(v.number(), v.integer(), v.minValue(0), d('The field version you last read; 0 if it has no value yet. Required on versioned fields.')),
      ),
      evidence: v.optional(v.pipe(v.string(), d('Why this value is right; required where the class or field demands it.'))),
      based_on: basedOn,
      invocation,
    }),
    annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
    run(ctx, a) {
      const input = {
        ...recordOf(a),
        field: fieldOf(a),
        body: body(a, ['record', 'field']),
      };
      return invoke(operations.put, ctx, input, TIMED);
    },
  },
  {
    name: 'svc_append',
    title: 'Add an entry to a list field',
    description: [
      'Add an entry to an append (list) field of a record, e.g. a note or a finding. Appends never conflict: no expected_version; the field\'s version is its entry count.',
      '`entry` must match the field\'s type. `evidence` is always required: where the entry comes from.',
      '`based_on` and `invocation` work as for svc_put (STALE_PREMISE if a premise moved; based_on: [] disables inference).',
      'Returns {record, field, seq, record_version}.',
      ERRORS,
    ].join(' '),
    schema: v.strictObject({
      record,
      field,
      entry: v.pipe(v.unknown(), d('The entry: any JSON matching the field\'s type.')),
      evidence: v.pipe(v.string(), d('Where the entry comes from (source, observation, link). Always required.')),
      based_on: basedOn,
      invocation,
    }),
    annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: false },
    run(ctx, a) {
      const input = { ...recordOf(a), field: fieldOf(a), body: body(a, ['record', 'field']) };
      return invoke(operations.append, ctx, input, TIMED);
    },
  },
  {
    name: 'svc_claim',
    title: 'Take, renew or release a task lease',
    description: [
      'Leases make one agent at a time work on a task field. Claim before you start the task:',
      '`lease_seconds` (1 to 86400; omit for the field\'s default lease) takes the lease; `renew: true` extends a lease you hold (renew before lease_expires_at while still working);',
      '`lease_seconds: 0` releases it when you finish or give up.',
      'Returns {record, field, owner, lease_expires_at, version, record_version, took_over_from?}; after a release there is no owner.',
      'HELD means another identity holds the lease (`owner`, `lease_expires_at`): do not work on that task; wait until lease_expires_at or pick another task.',
      'An expired lease is taken over: took_over_from names the previous owner; load the checkpoint (svc_checkpoint) to continue its work.',
      'To make a write conditional on still holding the lease, add {"field":"<task field>","version":<version returned here>,"kind":"fence"} to its based_on.',
      '`invocation` as for svc_put.',
      ERRORS,
    ].join(' '),
    schema: v.strictObject({
      record,
      field: v.pipe(v.string(), d('The task field to claim.')),
      lease_seconds: v.optional(
        v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(86_400), d('Lease length; 0 releases; omit for the field\'s default.')),
      ),
      renew: v.optional(v.pipe(v.boolean(), d('true: extend the lease you hold.'))),
      invocation,
    }),
    annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: false },
    run(ctx, a) {
      const input = { ...recordOf(a), field: fieldOf(a), body: body(a, ['record', 'field']) };
      return invoke(operations.claim, ctx, input, TIMED);
    },
  },
  {
    name: 'svc_checkpoint',
    title: 'Save or load your role\'s progress',
    description: [
      'A checkpoint is your role\'s progress document on a record, so that you or a replacement agent can continue the work.',
      'action "save" with `document`: a JSON object of at most 64 KiB containing every section the class requires (e.g. {"summary": ..., "next_steps": ...}; INVALID_CHECKPOINT names missing ones).',
      'It is saved for your role (one per role and record, the latest wins); the record must exist. Returns {record, role, checkpoint_id, record_version}.',
      'Some classes require a role\'s checkpoint before status may be set to "resolved" (INVALID_CHECKPOINT on that svc_put): save first.',
      'action "load" returns {record, role, document, record_version, changed_fields: [{field, version, author, evidence}]}: changed_fields are the fields written since the checkpoint was saved; re-read them with svc_get before acting on the document.',
      'Without a checkpoint, document is null and changed_fields lists every field written so far.',
      '`role`: load only, needed when you hold several roles in the class.',
      ERRORS,
    ].join(' '),
    schema: v.strictObject({
      record,
      action: v.pipe(v.picklist(actionsOf('svc_checkpoint')), d('"save" your progress or "load" the last saved one.')),
      document: v.optional(v.pipe(v.looseObject({}), d('save: the progress document, with every section the class requires.'))),
      role: v.optional(v.pipe(v.string(), d('load: which of your roles (only when you hold several).'))),
    }),
    annotations: { destructiveHint: false, openWorldHint: false },
    run(ctx, a) {
      const r = recordOf(a);
      const action = address(a, 'action', '"save" or "load"', { record: a.record });
      if (action === 'save') return invoke(operations.checkpointSave, ctx, { ...r, body: body(a, ['record', 'action']) }, TIMED);
      if (action === 'load') {
        const input = { ...r, role: queryText(a.role, 'role'), params: params(a, ['record', 'action']) };
        return invoke(reads.checkpointLoad, ctx, input, TIMED);
      }
      throw new SvcError('MALFORMED', '`action` must be "save" or "load".', { record: a.record });
    },
  },
  {
    name: 'svc_query',
    title: 'Find records by field values',
    description: [
      'Find records of a class whose current field values match every filter, oldest first.',
      '`filters` {<field>: <value>}: exact match; a number, boolean or string matches that JSON value; a task field matches its owner (e.g. "apikey:alice"); append fields cannot be filtered.',
      'Returns {class, records: [{record, record_version, fields}], next_after?}; append fields show only their entry count and latest entry.',
      '`limit` 1 to 1000 (default 100); when next_after is present, call again with the same filters and after = next_after for the next page.',
      ERRORS,
    ].join(' '),
    schema: v.strictObject({
      class: v.pipe(v.string(), d('The class name, e.g. "incident".')),
      filters: v.optional(v.pipe(v.looseObject({}), d('{<field>: <value>}: every filter must match.'))),
      limit: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1000), d('Records per page (default 100).'))),
      after: v.optional(v.pipe(v.string(), d('The next_after of the previous page.'))),
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    run(ctx, a) {
      const cls = address(a, 'class', 'the class name, e.g. "incident"');
      const input = {
        class: cls,
        filters: filtersOf(a, cls),
        limit: queryNumber(a.limit),
        after: queryText(a.after, 'after'),
        // The filters are one argument here, so the other arguments are checked like parameters.
        params: params(a, ['class', 'filters']),
      };
      return invoke(reads.query, ctx, input, TIMED);
    },
  },
];

const BY_NAME = new Map(TOOLS.map((t) => [t.name, t]));

/**
 * The tools are the ones the operation table declares (handlers/index.ts `mcp`), no more and
 * no fewer: a tool nobody declares, or a declared one missing here, stops the start.
 */
const declared = new Set((Object.values(operations) as Operation[]).flatMap((o) => (o.mcp ? [o.mcp.tool] : [])));
const undeclared = TOOLS.map((t) => t.name).filter((n) => !declared.has(n));
const missing = [...declared].filter((n) => !BY_NAME.has(n));
if (undeclared.length > 0 || missing.length > 0) {
  throw new Error(`MCP tools and the operation table disagree: not declared ${JSON.stringify(undeclared)}, not defined ${JSON.stringify(missing)}`);
}

/** The tools/list answer; schemas are converted once. */
export const TOOL_LIST: Tool[] = TOOLS.map((t) => ({
  name: t.name,
  title: t.title,
  description: t.description,
  inputSchema: toJsonSchema(t.schema) as Tool['inputSchema'],
  ...(t.annotations ? { annotations: { title: t.title, ...t.annotations } } : {}),
}));

/** `structuredContent` is the HTTP body and `content[0].text` the same JSON (decisions §7). */
export function toolResult(body: Record<string, unknown>, isError: boolean): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(body) }],
    structuredContent: body,
    ...(isError ? { isError: true } : {}),
  };
}

/**
 * Answer a tools/call. An unknown tool is a protocol error (JSON-RPC -32602, as the MCP
 * specification shows for unknown tools); a rejection is the tool's error result with the
 * HTTP error body; an unexpected fault becomes INTERNAL with the request id (logged, never echoed).
 */
export async function callTool(name: string, args: ToolArgs | undefined, newCtx: () => Ctx): Promise<CallToolResult> {
  const tool = BY_NAME.get(name);
  if (!tool) {
    throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}; the tools are ${TOOLS.map((t) => t.name).join(', ')}.`);
  }
  const ctx = newCtx();
  try {
    const out = await tool.run(ctx, args ?? {});
    return toolResult(out.body, false);
  } catch (e) {
    return toolResult(asSvcError(e, ctx).body(), true);
  }
}
