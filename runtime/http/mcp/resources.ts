/**
 * MCP resources (issue 16, discovery): the classes the caller may use as resources
 * `kslate://classes/{name}`, and records and their history as resource templates
 * `kslate://records/{class}/{id}` and `kslate://records/{class}/{id}/history`.
 *
 * A resource URI is read exactly as the HTTP request it names: its path segments are the
 * route's path parameters (percent-decoded, as HTTP decodes them), its query string the
 * route's query parameters, and the operation table's own `fromHttp` builds the handler
 * input, which the caller's `run` (runtime/request.ts) runs with its identity and X-Svc-Scope. So a resource's
 * contents are the HTTP body byte for byte (the same JSON text, or JSON.stringify of the same object), and every
 * refusal (NO_ROLE, SCOPE_DENIED, NOT_FOUND, MALFORMED, read-scope redaction) is the
 * handler's own. No rule lives here.
 *
 * A resource read has no error result (tools have `isError`), so a refusal is a JSON-RPC
 * error (see `refusal`).
 */
import type { ListResourcesResult, ListResourceTemplatesResult, ReadResourceResult, Resource, ResourceTemplate } from '@modelcontextprotocol/sdk/types.js';
import { SvcError } from '../../../handlers/errors.js';
import { jsonText, type Outcome } from '../../../handlers/pipeline.js';
import { operations, type Operation } from '../../../handlers/index.js';
import type { Caller } from '../../request.js';

export const RESOURCE_SCHEME = 'kslate://';
export const MIME_JSON = 'application/json';

/**
 * The longest resource URI read: far above any real one (a class name, a 256-byte id, a
 * query string with a cursor), far below the MCP message limit, so a URI is refused before
 * it is split or decoded.
 */
export const MAX_RESOURCE_URI_BYTES = 8 * 1024;

/**
 * JSON-RPC error codes of a refused read. MCP's specification gives -32002 for "resource
 * not found" and JSON-RPC -32602 for invalid params and -32603 for internal errors; every
 * other refusal (NO_ROLE, SCOPE_DENIED, UNAVAILABLE, ...) is -32000, the first code of
 * JSON-RPC's implementation-defined server-error range, which /mcp already uses for an
 * oversized message. Clients tell them apart by `data.error`, the spec's code.
 */
export const RESOURCE_NOT_FOUND = -32002;
const INVALID_PARAMS = -32602;
const INTERNAL_ERROR = -32603;
const SERVER_ERROR = -32000;

const JSONRPC_CODE: Record<string, number> = { NOT_FOUND: RESOURCE_NOT_FOUND, MALFORMED: INVALID_PARAMS, INTERNAL: INTERNAL_ERROR };

/**
 * A refused read as the SDK sends it: the protocol layer answers a thrown error's `code`,
 * `message` and `data` as the JSON-RPC error. The message is `<CODE>: <message>` (the spec's
 * code and the HTTP body's message) and `data` the whole HTTP error body.
 */
export class ResourceRefusal extends Error {
  readonly code: number;
  readonly data: Record<string, unknown>;
  constructor(err: SvcError) {
    const body = err.body();
    super(`${err.code}: ${String(body.message ?? err.message)}`);
    this.name = 'ResourceRefusal';
    this.code = JSONRPC_CODE[err.code] ?? SERVER_ERROR;
    this.data = body;
  }
}

// Every resource read is a POST on /mcp, so it is timed like a tool call (interface.md, Metrics).
const TIMED = { timed: true } as const;

const reads = {
  classes: operations.classes as Operation,
  class: operations.class as Operation,
  get: operations.get as Operation,
  history: operations.history as Operation,
};

/** The record templates: what `resources/templates/list` answers, built once. */
export const RESOURCE_TEMPLATES: ResourceTemplate[] = [
  {
    uriTemplate: `${RESOURCE_SCHEME}records/{class}/{id}`,
    name: 'record',
    title: 'A shared record',
    description: [
      'A record as svc_get returns it (GET /v1/records/{class}/{id}): {record, record_version, fields}, only the fields your role may read.',
      'The query parameters of that route work here too, e.g. ?fields=status,severity or ?entries_limit=10.',
      'A refusal is a JSON-RPC error whose message starts with the code (NOT_FOUND, NO_ROLE, SCOPE_DENIED, MALFORMED) and whose data is the HTTP error body.',
    ].join(' '),
    mimeType: MIME_JSON,
  },
  {
    uriTemplate: `${RESOURCE_SCHEME}records/{class}/{id}/history`,
    name: 'record-history',
    title: "A record's history",
    description: [
      "The newest page of a record's audit history (GET /v1/records/{class}/{id}/history): {record, history: [{seq, field, op, version, value, author, outcome, created_at, ...}], truncated_before?, next_before?}, newest first, only fields your role may read; truncated_before says the page reaches rows purged by the class history retention.",
      'Query parameters as on HTTP: ?field=<name>, ?limit=N (1 to 10000), ?before=<next_before> for the next older page.',
    ].join(' '),
    mimeType: MIME_JSON,
  },
];

/** `resources/list`: a resource per class the caller has a role in, as GET /v1/classes decides. */
export async function listResources(caller: Caller): Promise<ListResourcesResult> {
  const { body } = await run(caller, reads.classes, { params: {}, query: {}, names: [] });
  const list = (body.classes as { name: string; gone?: boolean }[]) ?? [];
  const resources: Resource[] = list.map((c) => ({
    uri: `${RESOURCE_SCHEME}classes/${encodeURIComponent(c.name)}`,
    name: c.name,
    title: `Class ${c.name}`,
    description: c.gone
      ? `Class "${c.name}" (deleted: its records can be read, not written). Its definition as GET /v1/classes/${c.name} returns it.`
      : `Class "${c.name}": its fields (kind, type, enum), roles (who may read and write which fields), checkpoint sections and idPattern, as GET /v1/classes/${c.name} returns it.`,
    mimeType: MIME_JSON,
  }));
  return { resources };
}

export function listResourceTemplates(): ListResourceTemplatesResult {
  return { resourceTemplates: RESOURCE_TEMPLATES };
}

/** `resources/read`: the URI's operation, run as the HTTP request it names. */
export async function readResource(uri: string, caller: Caller): Promise<ReadResourceResult> {
  const route = routeOf(uri);
  const out = await run(caller, route.op, { params: route.params, query: route.query, names: route.names });
  return { contents: [{ uri, mimeType: MIME_JSON, text: out.json !== undefined ? jsonText(out.json) : JSON.stringify(out.body) }] };
}

/** Run one read as the caller; a refusal becomes a ResourceRefusal. */
async function run(
  caller: Caller,
  op: Operation,
  req: { params: Record<string, string>; query: Record<string, string>; names: string[] },
): Promise<Outcome> {
  try {
    return await caller.run(op, () => op.fromHttp({ ...req, body: { kind: 'none' } }), TIMED);
  } catch (e) {
    throw new ResourceRefusal(caller.errorOf(e));
  }
}

interface Route {
  op: Operation;
  params: Record<string, string>;
  query: Record<string, string>;
  names: string[];
}

/**
 * A URI as the HTTP request it names. What no resource answers to is NOT_FOUND, as an HTTP
 * path that matches no endpoint; segments are percent-decoded, so an id containing an
 * encoded "/" reaches the handler, which refuses it as HTTP does.
 */
export function routeOf(uri: string): Route {
  const shown = uri.length > 200 ? `${uri.slice(0, 200)}…` : uri;
  if (new TextEncoder().encode(uri).length > MAX_RESOURCE_URI_BYTES) {
    throw new ResourceRefusal(new SvcError('MALFORMED', `The resource URI is longer than ${MAX_RESOURCE_URI_BYTES} bytes.`));
  }
  const unknown = () =>
    new ResourceRefusal(
      new SvcError(
        'NOT_FOUND',
        `No resource ${JSON.stringify(shown)}; the resources are kslate://classes/{name}, kslate://records/{class}/{id} and kslate://records/{class}/{id}/history (resources/list, resources/templates/list).`,
      ),
    );
  if (!uri.startsWith(RESOURCE_SCHEME) || uri.includes('#')) throw unknown();
  const rest = uri.slice(RESOURCE_SCHEME.length);
  const q = rest.indexOf('?');
  const path = q < 0 ? rest : rest.slice(0, q);
  const search = q < 0 ? '' : rest.slice(q + 1);
  let segments: string[];
  try {
    segments = path.split('/').map((s) => decodeURIComponent(s));
  } catch {
    throw new ResourceRefusal(new SvcError('MALFORMED', `The resource URI ${JSON.stringify(shown)} holds an invalid percent-encoding.`));
  }
  const sp = new URLSearchParams(search);
  const names = [...sp.keys()];
  const query: Record<string, string> = {};
  for (const [k, v] of sp) if (!(k in query)) query[k] = v;
  const at = (op: Operation, params: Record<string, string>): Route => ({ op, params, query, names });

  const [root, ...p] = segments;
  if (root === 'classes' && p.length === 1) return at(reads.class, { name: p[0] });
  if (root === 'records' && p.length === 2) return at(reads.get, { class: p[0], id: p[1] });
  if (root === 'records' && p.length === 3 && p[2] === 'history') return at(reads.history, { class: p[0], id: p[1] });
  throw unknown();
}
