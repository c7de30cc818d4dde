/**
 * The MCP tools (decisions §7; svc_transaction: issue 33): each one translates its arguments into the input of one
 * operation of the table and calls it through the caller's `run` (runtime/request.ts), so the MCP answer is the HTTP body. No rule lives
 * here: arguments are not validated (the JSON Schemas are for the client and the model), the
 * handlers produce MALFORMED at their step of the rejection order, with HTTP's message.
 */
import * as v from 'valibot';
import { toJsonSchema } from '@valibot/to-json-schema';
import { ErrorCode, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { jsonProblem, type RawBody } from '../../../handlers/body.js';
import { SvcError } from '../../../handlers/errors.js';
import type { CheckpointLoadInput } from '../../../handlers/checkpoint-load.js';
import type { GetInput } from '../../../handlers/get.js';
import { operations, type Operation } from '../../../handlers/index.js';
import type { McpSurface } from '../../../handlers/types.js';
import type { WriteOptions } from '../../../handlers/write-once.js';
import type { Outcome } from '../../../handlers/pipeline.js';
import type { QueryInput } from '../../../handlers/query.js';
import { checkMinLsn, type Caller } from '../../request.js';

/** Tool arguments as the client sent them (any JSON object). */
export type ToolArgs = Record<string, unknown>;

/**
 * One MCP tool: its address (the arguments that name what HTTP names in the path) and its
 * translation onto the operations that declare it. Everything else in its listing (title,
 * description, the other arguments) is the operations' own declaration (handlers/index.ts).
 */
export interface ToolDef {
  name: string;
  address: v.ObjectEntries;
  /** It reads records: it takes `min_lsn`, the read-your-writes token (docs/ha.md). */
  reads?: true;
  run(caller: Caller, args: ToolArgs): Promise<Outcome>;
}

/** The argument a read tool takes for read-your-writes: what HTTP sends as X-Kslate-Min-Lsn. */
export const MIN_LSN_ARG = 'min_lsn';

/** Where a tool result carries the WAL position its write reached (HTTP: X-Kslate-Lsn). */
export const LSN_META_KEY = 'kslate.dev/lsn';

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
  // fromEntries defines own properties, so a "__proto__" filter stays a filter (refused by the
  // handler as an unknown field, as on HTTP and gRPC); assigning it would set the prototype
  // and drop the filter.
  return Object.fromEntries(
    Object.entries(f).map(([k, val]) => [k, typeof val === 'string' ? val : JSON.stringify(shallow(val, `filters.${k}`))]),
  );
}

/** The `action` values the operation table declares for a tool that carries several operations. */
function actionsOf(tool: string): [string, ...string[]] {
  const actions = (Object.values(operations) as Operation[]).flatMap((o) => (o.mcp?.tool === tool && o.mcp.action ? [o.mcp.action] : []));
  if (actions.length === 0) throw new Error(`no operation declares an action of ${tool}`);
  return actions as [string, ...string[]];
}

// ---- addresses ----------------------------------------------------------------------------

// What MCP adds to an operation's own arguments: its address, which HTTP carries in the path.
const d = v.description;
const record = v.pipe(v.string(), d('The record, "<class>/<id>", e.g. "incident/db-outage".'));
const field = v.pipe(v.string(), d('The field name, as defined by the class.'));

// ---- the tools --------------------------------------------------------------------------

export const TOOLS: readonly ToolDef[] = [
  {
    name: 'svc_get',
    address: { record },
    reads: true,
    run(caller, a) {
      const r = recordOf(a);
      const input = {
        ...r,
        fields: fieldList(a.fields),
        entries_limit: queryNumber(a.entries_limit),
        entries_before: queryText(a.entries_before, 'entries_before'),
        params: params(a, ['record']),
      };
      return caller.run(reads.get, () => input, TIMED);
    },
  },
  {
    name: 'svc_put',
    address: { record, field },
    run(caller, a) {
      const input = {
        ...recordOf(a),
        field: fieldOf(a),
        body: body(a, ['record', 'field']),
      };
      return caller.run(operations.put, () => input, TIMED);
    },
  },
  {
    name: 'svc_append',
    address: { record, field },
    run(caller, a) {
      const input = { ...recordOf(a), field: fieldOf(a), body: body(a, ['record', 'field']) };
      return caller.run(operations.append, () => input, TIMED);
    },
  },
  {
    name: 'svc_claim',
    address: { record, field: v.pipe(v.string(), d('The task field to claim.')) },
    run(caller, a) {
      const input = { ...recordOf(a), field: fieldOf(a), body: body(a, ['record', 'field']) };
      return caller.run(operations.claim, () => input, TIMED);
    },
  },
  {
    name: 'svc_transaction',
    address: { record },
    run(caller, a) {
      const input = { ...recordOf(a), body: body(a, ['record']) };
      return caller.run(operations.transaction, () => input, TIMED);
    },
  },
  {
    name: 'svc_checkpoint',
    reads: true,
    address: {
      record,
      action: v.pipe(v.picklist(actionsOf('svc_checkpoint')), d('"save" your progress or "load" the last saved one.')),
    },
    run(caller, a) {
      const r = recordOf(a);
      const action = address(a, 'action', '"save" or "load"', { record: a.record });
      if (action === 'save') return caller.run(operations.checkpointSave, () => ({ ...r, body: body(a, ['record', 'action']) }), TIMED);
      if (action === 'load') {
        const input = { ...r, role: queryText(a.role, 'role'), params: params(a, ['record', 'action']) };
        return caller.run(reads.checkpointLoad, () => input, TIMED);
      }
      throw new SvcError('MALFORMED', '`action` must be "save" or "load".', { record: a.record });
    },
  },
  {
    name: 'svc_query',
    reads: true,
    address: { class: v.pipe(v.string(), d('The class name, e.g. "incident".')) },
    run(caller, a) {
      const cls = address(a, 'class', 'the class name, e.g. "incident"');
      const input = {
        class: cls,
        filters: filtersOf(a, cls),
        limit: queryNumber(a.limit),
        after: queryText(a.after, 'after'),
        // The filters are one argument here, so the other arguments are checked like parameters.
        params: params(a, ['class', 'filters']),
      };
      return caller.run(reads.query, () => input, TIMED);
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

/** The tools that carry a write (one of their operations is): they take `idempotency_key` and `dry_run`. */
const WRITE_TOOLS = new Set((Object.values(operations) as Operation[]).flatMap((o) => (o.write && o.mcp ? [o.mcp.tool] : [])));

/** What MCP adds to a write tool's arguments (issue 33; handlers/write-once.ts). */
export const WRITE_ARGS: v.ObjectEntries = {
  idempotency_key: v.optional(
    v.pipe(
      v.string(),
      v.description(
        'Optional, 1 to 255 printable ASCII characters (e.g. a UUID per logical write): a retry with the same key and arguments returns the first answer and writes nothing again (_meta "kslate/idempotent-replayed": true); kept 24 h. Reusing it for other arguments is IDEMPOTENCY_KEY_REUSED; while the first call still runs, IDEMPOTENCY_KEY_IN_USE (retry shortly).',
      ),
    ),
  ),
  dry_run: v.optional(
    v.pipe(
      v.boolean(),
      v.description('true: run every check against the current state and answer what the write would answer now, with "dry_run": true; nothing is written.'),
    ),
  ),
};

/** The operations that declare a tool, in table order (one, or one per `action`). */
function declaring(tool: string): McpSurface[] {
  return (Object.values(operations) as Operation[]).flatMap((o) => (o.mcp?.tool === tool ? [o.mcp] : []));
}

/**
 * A tool's listing, from its operations' declarations. With several actions, an argument of
 * one action is optional for the tool, the description joins the actions' sentences in order,
 * and the tool is read-only only when every action is.
 */
export function listing(tool: ToolDef): Tool {
  const ops = declaring(tool.name);
  const several = ops.length > 1;
  const entries: v.ObjectEntries = { ...tool.address };
  const required = new Set(Object.keys(tool.address));
  const args = (o: McpSurface, write: boolean) => (write ? { ...o.args, ...WRITE_ARGS } : o.args);
  if (tool.reads) {
    entries[MIN_LSN_ARG] = v.optional(
      v.pipe(
        v.string(),
        d(
          "Read your own writes: the `lsn` a write tool's result gave in `_meta[\"kslate.dev/lsn\"]`. The read then sees that write even when a standby serves it.",
        ),
      ),
    );
  }
  for (const o of ops) {
    const write = (Object.values(operations) as Operation[]).some((x) => x.mcp === o && x.write);
    for (const [k, schema] of Object.entries(args(o, write))) {
      // Several actions: each takes its own arguments, so none is required of the tool.
      entries[k] = several && schema.type !== 'optional' ? v.optional(schema) : schema;
      if (!several && o.required?.includes(k)) required.add(k);
    }
  }
  const json = toJsonSchema(v.strictObject(entries), {
    // v.custom and v.check cannot be said in JSON Schema; the schemas carry v.metadata for them.
    errorMode: 'ignore',
  }) as Record<string, unknown>;
  const props = Object.keys(json.properties as object);
  json.required = props.filter((k) => required.has(k) || (json.required as string[] | undefined)?.includes(k));
  const annotations: NonNullable<Tool['annotations']> = { title: ops[0].title };
  for (const o of ops) {
    for (const [k, val] of Object.entries(o.annotations) as [keyof McpSurface['annotations'], boolean][]) {
      if (k === 'readOnlyHint') continue;
      annotations[k] ??= val;
    }
  }
  if (ops.every((o) => o.annotations.readOnlyHint)) annotations.readOnlyHint = true;
  return {
    name: tool.name,
    title: ops[0].title,
    description: ops.flatMap((o) => o.description).join(' '),
    inputSchema: json as Tool['inputSchema'],
    annotations,
  };
}

/** The tools/list answer, built once. */
export const TOOL_LIST: Tool[] = TOOLS.map(listing);

/** `structuredContent` is the HTTP body and `content[0].text` the same JSON (decisions §7). */
export function toolResult(body: Record<string, unknown>, isError: boolean, lsn: string | null = null): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(body) }],
    structuredContent: body,
    ...(isError ? { isError: true } : {}),
    // In _meta, so structuredContent stays the HTTP body (decisions §7); docs/ha.md.
    ...(lsn !== null ? { _meta: { [LSN_META_KEY]: lsn } } : {}),
  };
}

/**
 * Answer a tools/call. An unknown tool is a protocol error (JSON-RPC -32602, as the MCP
 * specification shows for unknown tools); a rejection is the tool's error result with the
 * HTTP error body; an unexpected fault becomes INTERNAL with the request id (logged, never echoed).
 */
export async function callTool(name: string, args: ToolArgs | undefined, caller: Caller): Promise<CallToolResult> {
  const tool = BY_NAME.get(name);
  if (!tool) {
    throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}; the tools are ${TOOLS.map((t) => t.name).join(', ')}.`);
  }
  let lsn: string | null = null;
  try {
    let a = args ?? {};
    let minLsn: string | null | undefined;
    if (tool.reads && MIN_LSN_ARG in a) {
      const { [MIN_LSN_ARG]: token, ...rest } = a;
      if (typeof token !== 'string') {
        throw new SvcError('MALFORMED', `\`${MIN_LSN_ARG}\` must be a string, the lsn a write's result gave in _meta["${LSN_META_KEY}"].`);
      }
      minLsn = checkMinLsn(token);
      a = rest;
    }
    // The key and the dry-run flag ride on every run of a write tool's call (handlers/write-once.ts).
    let write: WriteOptions | undefined;
    if (WRITE_TOOLS.has(name)) ({ args: a, write } = writeOptionsOf(a));
    // The call's token goes in, the position its write reached comes back (the tools run one operation each).
    const call: Caller = {
      ...caller,
      run: (op, decode, opts = {}) =>
        caller.run(op, decode, { ...opts, ...(minLsn !== undefined ? { minLsn } : {}), ...(write ? { write } : {}), onLsn: (l) => (lsn = l) }),
    };
    const out = await tool.run(call, a);
    return replayMark(toolResult(out.body, false, lsn), out.replayed);
  } catch (e) {
    const err = caller.errorOf(e);
    return replayMark(toolResult(err.body(), true, lsn), err.replayed);
  }
}

/**
 * The key and the dry-run flag taken out of a write tool's arguments. One of another type
 * stays an argument, which the handler refuses (MALFORMED) at its step like any unknown key.
 */
function writeOptionsOf(args: ToolArgs): { args: ToolArgs; write: WriteOptions } {
  const { idempotency_key: key, dry_run: dry, ...rest } = args;
  const out: ToolArgs = { ...rest };
  const write: WriteOptions = {};
  if (typeof key === 'string') write.idempotencyKey = key;
  else if (key !== undefined) out.idempotency_key = key;
  if (typeof dry === 'boolean') write.dryRun = dry;
  else if (dry !== undefined) out.dry_run = dry;
  return { args: out, write };
}

/** A replayed answer says so in `_meta` (MCP's place for what is not the tool's own content). */
function replayMark(r: CallToolResult, replayed: boolean | undefined): CallToolResult {
  return replayed ? { ...r, _meta: { 'kslate/idempotent-replayed': true } } : r;
}
