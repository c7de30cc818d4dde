/**
 * Three client adapters with one interface, for the transport parity test: each takes an
 * operation and its arguments in MCP tool shape (decisions §7) and answers
 * `{ code, created?, body, status }` with `body` in the HTTP shape.
 *
 * - HTTP: fetch on the matching endpoint; code = body.error or OK; created = 201.
 * - MCP: the SDK's Client over StreamableHTTPClientTransport, one per identity and scope;
 *   code = structuredContent.error when isError, else OK. MCP has no `created`. A credential
 *   that is refused never reaches a tool: the transport answers 401 before any MCP method,
 *   so for an unknown key the adapter posts the tools/call itself and reports that answer.
 * - gRPC: a grpc-js client generated at run time from proto/svc/v1/svc.proto with
 *   proto-loader; a rejection's body comes from grpc-status-details-bin (google.rpc.Status,
 *   first detail a google.protobuf.Struct), a response message is turned back into the HTTP
 *   body by the converters below (written here, independently of runtime/grpc/convert.ts).
 *
 * Arguments a transport cannot express throw NotExpressible, so a scenario that needs them
 * must say it does not apply to that transport.
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import type { Struct, Struct__Output } from '../../runtime/grpc/generated/google/protobuf/Struct.js';
import type { Value, Value__Output } from '../../runtime/grpc/generated/google/protobuf/Value.js';
import type { Status__Output } from '../../runtime/grpc/generated/google/rpc/Status.js';
import type { ProtoGrpcType } from '../../runtime/grpc/generated/svc.js';
import type { AppendResult__Output } from '../../runtime/grpc/generated/svc/v1/AppendResult.js';
import type { CheckpointLoadResult__Output } from '../../runtime/grpc/generated/svc/v1/CheckpointLoadResult.js';
import type { CheckpointSaveResult__Output } from '../../runtime/grpc/generated/svc/v1/CheckpointSaveResult.js';
import type { ClaimResult__Output } from '../../runtime/grpc/generated/svc/v1/ClaimResult.js';
import type { Entry__Output } from '../../runtime/grpc/generated/svc/v1/Entry.js';
import type { Field__Output } from '../../runtime/grpc/generated/svc/v1/Field.js';
import type { Premise, Premise__Output } from '../../runtime/grpc/generated/svc/v1/Premise.js';
import type { QueryResult__Output } from '../../runtime/grpc/generated/svc/v1/QueryResult.js';
import type { Record__Output } from '../../runtime/grpc/generated/svc/v1/Record.js';
import type { SvcServiceClient } from '../../runtime/grpc/generated/svc/v1/SvcService.js';
import type { WriteResult__Output } from '../../runtime/grpc/generated/svc/v1/WriteResult.js';
import { KEYS } from '../setup/gateway.js';

export type Transport = 'http' | 'mcp' | 'grpc';
export const TRANSPORTS: readonly Transport[] = ['http', 'mcp', 'grpc'];

export type Op = 'get' | 'put' | 'append' | 'claim' | 'checkpointSave' | 'checkpointLoad' | 'query';
/** The operations with a request shape here: every Op, and a transaction (issue 33). */
export type AnyOp = Op | 'transaction';

/** Tool arguments (decisions §7): record `<class>/<id>`, field, value, expected_version, ... */
export type Args = Record<string, unknown>;

export interface Result {
  /** The error code, or OK. */
  code: string;
  /** The write created the record (HTTP 201, gRPC `created`); absent on MCP and on errors. */
  created?: boolean;
  /** The HTTP-shaped body (success body or error body). */
  body: unknown;
  /** Transport-level status: HTTP status (HTTP; MCP: of the POST /mcp), gRPC status code. */
  status: number;
}

export interface Adapter {
  readonly name: Transport;
  run(who: string, op: Op, args: Args, opts?: { scope?: string }): Promise<Result>;
  close(): Promise<void>;
}

/** A request this transport has no way to send. */
export class NotExpressible extends Error {
  constructor(transport: Transport, what: string) {
    super(`${transport} cannot express ${what}`);
    this.name = 'NotExpressible';
  }
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** A KEYS name, or the token itself (an unknown key). */
export const tokenOf = (who: string): string => KEYS[who] ?? who;

function splitRecord(record: unknown): { cls: string; id: string } {
  const r = String(record);
  const i = r.indexOf('/');
  return i < 0 ? { cls: r, id: '' } : { cls: r.slice(0, i), id: r.slice(i + 1) };
}

/** A query-string value as MCP's tools send it: text as is, other JSON as its text. */
function queryText(x: unknown): string {
  return typeof x === 'string' ? x : JSON.stringify(x);
}

function pick(args: Args, keys: readonly string[]): Args {
  const out: Args = {};
  for (const k of keys) if (Object.hasOwn(args, k)) out[k] = args[k];
  return out;
}

const PUT_KEYS = ['value', 'expected_version', 'evidence', 'based_on', 'invocation', 'declare_no_premises'] as const;
const APPEND_KEYS = ['entry', 'evidence', 'based_on', 'invocation', 'declare_no_premises'] as const;
const CLAIM_KEYS = ['lease_seconds', 'renew', 'invocation'] as const;

// ---- HTTP ---------------------------------------------------------------------------------

export function httpRequest(op: AnyOp, args: Args): { method: string; path: string; body?: Args } {
  const enc = encodeURIComponent;
  const qs = (params: [string, string][]) => (params.length ? `?${params.map(([k, v]) => `${enc(k)}=${enc(v)}`).join('&')}` : '');
  if (op === 'query') {
    const params: [string, string][] = [];
    const filters = (args.filters ?? {}) as Record<string, unknown>;
    for (const [k, v] of Object.entries(filters)) params.push([k, queryText(v)]);
    if (args.limit !== undefined) params.push(['limit', queryText(args.limit)]);
    if (args.after !== undefined) params.push(['after', queryText(args.after)]);
    return { method: 'GET', path: `/v1/records/${enc(String(args.class))}${qs(params)}` };
  }
  const { cls, id } = splitRecord(args.record);
  const base = `/v1/records/${enc(cls)}/${enc(id)}`;
  const fieldPath = `${base}/fields/${enc(String(args.field))}`;
  switch (op) {
    case 'get': {
      const params: [string, string][] = [];
      if (args.fields !== undefined) params.push(['fields', Array.isArray(args.fields) ? args.fields.join(',') : queryText(args.fields)]);
      if (args.entries_limit !== undefined) params.push(['entries_limit', queryText(args.entries_limit)]);
      if (args.entries_before !== undefined) params.push(['entries_before', queryText(args.entries_before)]);
      return { method: 'GET', path: `${base}${qs(params)}` };
    }
    case 'put':
      return { method: 'PUT', path: fieldPath, body: pick(args, PUT_KEYS) };
    case 'append':
      return { method: 'POST', path: `${fieldPath}/entries`, body: pick(args, APPEND_KEYS) };
    case 'claim': {
      // Only claim may omit the body: with no keys to send, send none.
      const body = pick(args, CLAIM_KEYS);
      return { method: 'PUT', path: `${fieldPath}/claim`, ...(Object.keys(body).length ? { body } : {}) };
    }
    case 'checkpointSave':
      return { method: 'PUT', path: `${base}/checkpoint`, body: pick(args, ['document']) };
    case 'checkpointLoad':
      return { method: 'GET', path: `${base}/checkpoint${args.role !== undefined ? qs([['role', queryText(args.role)]]) : ''}` };
    case 'transaction':
      return { method: 'POST', path: `${base}/transactions`, body: pick(args, ['writes', 'evidence', 'based_on', 'invocation', 'declare_no_premises']) };
  }
}

export function httpAdapter(baseUrl: string): Adapter {
  return {
    name: 'http',
    async run(who, op, args, opts = {}) {
      const { method, path, body } = httpRequest(op, args);
      const headers: Record<string, string> = { authorization: `Bearer ${tokenOf(who)}` };
      if (opts.scope !== undefined) headers['x-svc-scope'] = opts.scope;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(baseUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await res.text();
      let parsed: any;
      try {
        parsed = JSON.parse(text);
      } catch {
        return { code: `NON_JSON_${res.status}`, body: text, status: res.status };
      }
      if (res.ok) return { code: 'OK', created: res.status === 201, body: parsed, status: res.status };
      return { code: String(parsed?.error), body: parsed, status: res.status };
    },
    async close() {},
  };
}

// ---- MCP ----------------------------------------------------------------------------------

const TOOL_OF: Record<AnyOp, string> = {
  get: 'svc_get',
  put: 'svc_put',
  append: 'svc_append',
  claim: 'svc_claim',
  checkpointSave: 'svc_checkpoint',
  checkpointLoad: 'svc_checkpoint',
  query: 'svc_query',
  transaction: 'svc_transaction',
};

export function mcpToolCall(op: AnyOp, args: Args): { name: string; arguments: Args } {
  // The tools' schemas have no `declare_no_premises` (decisions §7: MCP takes `based_on: []`),
  // and svc_put/svc_append pass only their listed body keys, so the flag cannot be sent.
  if (Object.hasOwn(args, 'declare_no_premises')) throw new NotExpressible('mcp', '`declare_no_premises` (not an argument of svc_put/svc_append)');
  const name = TOOL_OF[op];
  if (op === 'checkpointSave') return { name, arguments: { ...args, action: 'save' } };
  if (op === 'checkpointLoad') return { name, arguments: { ...args, action: 'load' } };
  return { name, arguments: args };
}

export function mcpAdapter(baseUrl: string): Adapter {
  const clients = new Map<string, Promise<Client>>();
  const clientFor = (who: string, scope: string | undefined): Promise<Client> => {
    const key = `${who}\u0000${scope ?? ''}`;
    let c = clients.get(key);
    if (!c) {
      c = (async () => {
        const headers: Record<string, string> = { authorization: `Bearer ${tokenOf(who)}` };
        if (scope !== undefined) headers['x-svc-scope'] = scope;
        const client = new Client({ name: 'kslate-parity', version: '0.0.0' });
        await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { requestInit: { headers } }));
        return client;
      })();
      clients.set(key, c);
    }
    return c;
  };

  /**
   * An unknown key cannot even connect (the SDK reports the 401 as a failed connection), so
   * the tools/call is posted as a host without the SDK would, and its HTTP answer reported.
   */
  const raw = async (who: string, call: { name: string; arguments: Args }, scope?: string): Promise<Result> => {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
      authorization: `Bearer ${tokenOf(who)}`,
    };
    if (scope !== undefined) headers['x-svc-scope'] = scope;
    const res = await fetch(`${baseUrl}/mcp`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: call }),
    });
    const body: any = await res.json();
    if (!res.ok) return { code: String(body?.error), body, status: res.status };
    const result = body.result;
    return { code: result?.isError ? String(result.structuredContent?.error) : 'OK', body: result?.structuredContent, status: res.status };
  };

  return {
    name: 'mcp',
    async run(who, op, args, opts = {}) {
      const call = mcpToolCall(op, args);
      if (!(who in KEYS)) return raw(who, call, opts.scope);
      const client = await clientFor(who, opts.scope);
      const res: any = await client.callTool(call);
      // content[0].text carries the same JSON as structuredContent (decisions §7).
      const text = res.content?.[0]?.type === 'text' ? JSON.parse(res.content[0].text) : undefined;
      if (JSON.stringify(text) !== JSON.stringify(res.structuredContent)) {
        throw new Error(`MCP ${call.name}: content[0].text differs from structuredContent: ${res.content?.[0]?.text}`);
      }
      const body = res.structuredContent;
      return { code: res.isError === true ? String(body?.error) : 'OK', body, status: 200 };
    },
    async close() {
      const all = await Promise.allSettled([...clients.values()]);
      await Promise.all(all.map((c) => (c.status === 'fulfilled' ? c.value.close().catch(() => undefined) : undefined)));
    },
  };
}

// ---- gRPC ---------------------------------------------------------------------------------

const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

// The options docs/grpc.md gives a Node client: snake_case, int64 as numbers, presence kept.
const definition = protoLoader.loadSync(['svc/v1/svc.proto', 'google/rpc/status.proto'], {
  includeDirs: [PROTO_DIR],
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});
export const proto = grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType;

interface Codec<T> {
  deserialize(b: Buffer): T;
}
const statusCodec = definition['google.rpc.Status'] as unknown as Codec<Status__Output>;
const structCodec = definition['google.protobuf.Struct'] as unknown as Codec<Struct__Output>;

/** JSON -> google.protobuf.Value (proto-loader object form: camelCase members). */
export function toValue(x: unknown): Value {
  if (x === null) return { nullValue: 'NULL_VALUE' };
  switch (typeof x) {
    case 'string':
      return { stringValue: x };
    case 'number':
      return { numberValue: x };
    case 'boolean':
      return { boolValue: x };
    case 'object':
      return Array.isArray(x) ? { listValue: { values: x.map(toValue) } } : { structValue: toStruct(x as Record<string, unknown>) };
    default:
      throw new Error(`not JSON: ${typeof x}`);
  }
}

export function toStruct(o: Record<string, unknown>): Struct {
  const fields: Record<string, Value> = {};
  for (const [k, v] of Object.entries(o)) Object.defineProperty(fields, k, { value: toValue(v), enumerable: true });
  return { fields };
}

/** google.protobuf.Value -> JSON. A Value with no kind set is not JSON: fail loudly. */
export function fromValue(v: Value__Output): Json {
  const kind = v.kind ?? (['nullValue', 'numberValue', 'stringValue', 'boolValue', 'structValue', 'listValue'] as const).find((k) => v[k] !== undefined && v[k] !== null);
  switch (kind) {
    case 'nullValue':
      return null;
    case 'numberValue':
      return v.numberValue!;
    case 'stringValue':
      return v.stringValue!;
    case 'boolValue':
      return v.boolValue!;
    case 'structValue':
      return fromStruct(v.structValue ?? { fields: {} });
    case 'listValue':
      return (v.listValue?.values ?? []).map(fromValue);
    default:
      throw new Error(`a google.protobuf.Value with no kind: ${JSON.stringify(v)}`);
  }
}

export function fromStruct(s: Struct__Output): { [k: string]: Json } {
  return Object.fromEntries(Object.entries(s.fields ?? {}).map(([k, v]) => [k, fromValue(v)]));
}

/** Premise messages -> HTTP `based_on`: `kind` "" is none, `inferred` false is absent. */
function premisesJson(list: Premise__Output[]): Json[] {
  return list.map((p) => ({
    field: p.field,
    version: p.version,
    ...(p.kind !== '' ? { kind: p.kind } : {}),
    ...(p.inferred ? { inferred: true } : {}),
  }));
}

/**
 * `based_on` of a Field or Entry: non-empty list = those premises; empty with
 * `declare_no_premises` = HTTP `based_on: []`; empty without = no `based_on` key.
 */
function basedOnJson(list: Premise__Output[], declareNone: boolean): { based_on?: Json[] } {
  if (list.length > 0) return { based_on: premisesJson(list) };
  return declareNone ? { based_on: [] } : {};
}

/** `optional string` members: absent stays absent. */
function opt<K extends string>(key: K, v: string | undefined): { [P in K]?: string } {
  return v === undefined ? {} : ({ [key]: v } as { [P in K]: string });
}

function entryJson(e: Entry__Output): Json {
  return {
    seq: e.seq,
    value: e.value === null ? null : fromValue(e.value),
    author: e.author,
    ...opt('identity_strength', e.identity_strength),
    ...opt('evidence', e.evidence),
    updated_at: e.updated_at,
    ...basedOnJson(e.based_on, e.declare_no_premises),
    ...(e.invocation !== null ? { invocation: fromStruct(e.invocation) } : {}),
  };
}

/**
 * A Field message in the HTTP shape. Versioned and soft fields carry `value` (a JSON null is a
 * Value holding null_value, so an unset `value` means none); append fields carry `entries`
 * and have no value, author or updated_at (svc.proto); task fields have no value but an
 * author and an update time.
 */
function fieldJson(f: Field__Output): Json {
  const isAppend = f.value === null && f.author === undefined && f.updated_at === undefined;
  if (isAppend) return { version: f.version, entries: f.entries.map(entryJson), ...opt('next_entries_before', f.next_entries_before) };
  return {
    ...(f.value !== null ? { value: fromValue(f.value) } : {}),
    version: f.version,
    ...opt('author', f.author),
    ...opt('identity_strength', f.identity_strength),
    ...opt('evidence', f.evidence),
    ...basedOnJson(f.based_on, f.declare_no_premises),
    ...(f.invocation !== null ? { invocation: fromStruct(f.invocation) } : {}),
    ...opt('updated_at', f.updated_at),
    ...opt('owner', f.owner),
    ...opt('lease_expires_at', f.lease_expires_at),
    ...(f.lease_lapsed ? { lease_lapsed: true } : {}),
  };
}

function recordJson(r: Record__Output): Json {
  return {
    record: r.record,
    record_version: r.record_version,
    fields: Object.fromEntries(Object.entries(r.fields).map(([k, f]) => [k, fieldJson(f)])),
    ...(r.omitted_fields.length > 0 ? { omitted_fields: r.omitted_fields } : {}),
  };
}

/** Response messages -> HTTP bodies; `created` is gRPC-only (HTTP's 201) and reported apart. */
const RESPONSE: Record<Op, (m: any) => Json> = {
  get: (m: Record__Output) => recordJson(m),
  put: (m: WriteResult__Output) => ({ record: m.record, field: m.field, version: m.version, record_version: m.record_version }),
  append: (m: AppendResult__Output) => ({ record: m.record, field: m.field, seq: m.seq, record_version: m.record_version }),
  claim: (m: ClaimResult__Output) => ({
    record: m.record,
    field: m.field,
    ...opt('owner', m.owner),
    ...opt('lease_expires_at', m.lease_expires_at),
    version: m.version,
    record_version: m.record_version,
    ...opt('took_over_from', m.took_over_from),
  }),
  checkpointSave: (m: CheckpointSaveResult__Output) => ({ record: m.record, role: m.role, checkpoint_id: m.checkpoint_id, record_version: m.record_version }),
  checkpointLoad: (m: CheckpointLoadResult__Output) => ({
    record: m.record,
    role: m.role,
    // Unset document = HTTP null (no checkpoint yet).
    document: m.document === null ? null : fromStruct(m.document),
    record_version: m.record_version,
    // ChangedField author/evidence unset = HTTP null.
    changed_fields: m.changed_fields.map((c) => ({ field: c.field, version: c.version, author: c.author ?? null, evidence: c.evidence ?? null })),
  }),
  query: (m: QueryResult__Output) => ({
    class: m.class,
    records: m.records.map(recordJson),
    ...opt('next_after', m.next_after),
  }),
};

function premisesMsg(v: unknown): Premise[] {
  return (v as { field: string; version: number; kind?: string }[]).map((p) => ({ field: p.field, version: p.version, kind: p.kind ?? '' }));
}

/**
 * `based_on` and `declare_no_premises` as the proto has them: a non-empty list is sent as is;
 * HTTP's `based_on: []` (infer nothing) is `declare_no_premises: true`; no key is an empty list.
 */
function premisesReq(args: Args): { based_on: Premise[]; declare_no_premises: boolean } {
  const list = args.based_on;
  if (list !== undefined && !Array.isArray(list)) throw new NotExpressible('grpc', 'a `based_on` that is not a list');
  return {
    based_on: list && list.length > 0 ? premisesMsg(list) : [],
    declare_no_premises: args.declare_no_premises === true || (Array.isArray(list) && list.length === 0),
  };
}

function structArg(args: Args, key: string): { [k: string]: Struct } {
  const v = args[key];
  if (v === undefined) return {};
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new NotExpressible('grpc', `a \`${key}\` that is not a JSON object`);
  return { [key]: toStruct(v as Record<string, unknown>) };
}

/** Tool arguments -> the request message of the matching RPC. */
export function grpcRequest(op: AnyOp, args: Args): { method: string; req: object } {
  const record = String(args.record);
  switch (op) {
    case 'get': {
      const fields = args.fields === undefined ? [] : Array.isArray(args.fields) ? args.fields : String(args.fields).split(',');
      return {
        method: 'Get',
        req: {
          record,
          fields,
          ...(args.entries_limit !== undefined ? { entries_limit: args.entries_limit } : {}),
          ...(args.entries_before !== undefined ? { entries_before: args.entries_before } : {}),
        },
      };
    }
    case 'put':
      if (args.expected_version === undefined) {
        // proto3: expected_version is always sent (0 when unset); an HTTP body without it is
        // MALFORMED on a versioned field, and cannot be written in a PutRequest.
        throw new NotExpressible('grpc', 'a put without expected_version');
      }
      return {
        method: 'Put',
        req: {
          record,
          field: args.field,
          ...(Object.hasOwn(args, 'value') ? { value: toValue(args.value) } : {}),
          expected_version: args.expected_version,
          ...(args.evidence !== undefined ? { evidence: args.evidence } : {}),
          ...premisesReq(args),
          ...structArg(args, 'invocation'),
        },
      };
    case 'append':
      return {
        method: 'Append',
        req: {
          record,
          field: args.field,
          ...(Object.hasOwn(args, 'entry') ? { entry: toValue(args.entry) } : {}),
          evidence: args.evidence ?? '',
          ...premisesReq(args),
          ...structArg(args, 'invocation'),
        },
      };
    case 'claim':
      return {
        method: 'Claim',
        req: {
          record,
          field: args.field,
          ...(args.lease_seconds !== undefined ? { lease_seconds: args.lease_seconds } : {}),
          renew: args.renew === true,
          ...structArg(args, 'invocation'),
        },
      };
    case 'checkpointSave':
      return { method: 'CheckpointSave', req: { record, ...structArg(args, 'document') } };
    case 'checkpointLoad':
      return { method: 'CheckpointLoad', req: { record, ...(args.role !== undefined ? { role: args.role } : {}) } };
    case 'transaction':
      return {
        method: 'Transact',
        req: {
          record,
          writes: ((args.writes ?? []) as Args[]).map((w) => ({
            ...w,
            ...(Object.hasOwn(w, 'value') ? { value: toValue(w.value) } : {}),
            ...(Object.hasOwn(w, 'entry') ? { entry: toValue(w.entry) } : {}),
          })),
          ...(args.evidence !== undefined ? { evidence: args.evidence } : {}),
          ...premisesReq(args),
          ...structArg(args, 'invocation'),
        },
      };
    case 'query': {
      const filters = Object.fromEntries(Object.entries((args.filters ?? {}) as Record<string, unknown>).map(([k, v]) => [k, queryText(v)]));
      return {
        method: 'Query',
        req: {
          class: args.class,
          filters,
          ...(args.limit !== undefined ? { limit: args.limit } : {}),
          ...(args.after !== undefined ? { after: args.after } : {}),
        },
      };
    }
  }
}

/** The HTTP error body in grpc-status-details-bin: google.rpc.Status, first detail a Struct in an Any. */
export function grpcErrorBody(err: grpc.ServiceError): Record<string, Json> {
  const [bin] = err.metadata.get('grpc-status-details-bin');
  if (!Buffer.isBuffer(bin)) throw new Error(`gRPC error ${grpc.status[err.code]} (${err.details}) without grpc-status-details-bin`);
  const status = statusCodec.deserialize(bin);
  const detail = status.details[0];
  if (!detail || detail.type_url !== 'type.googleapis.com/google.protobuf.Struct') {
    throw new Error(`gRPC error ${grpc.status[err.code]}: first detail is not a google.protobuf.Struct (${detail?.type_url})`);
  }
  if (status.code !== err.code || status.message !== err.details) {
    throw new Error(`gRPC Status (${status.code}, ${status.message}) differs from the call's (${err.code}, ${err.details})`);
  }
  return fromStruct(structCodec.deserialize(detail.value));
}

export function grpcAdapter(address: string): Adapter {
  // Responses may be as large as the gateway's byte budget (16 MiB) plus one row.
  const client: SvcServiceClient = new proto.svc.v1.SvcService(address, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
  });
  return {
    name: 'grpc',
    async run(who, op, args, opts = {}) {
      const { method, req } = grpcRequest(op, args);
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${tokenOf(who)}`);
      if (opts.scope !== undefined) md.set('x-svc-scope', opts.scope);
      const fn = (client as unknown as Record<string, Function>)[method];
      const { err, res } = await new Promise<{ err?: grpc.ServiceError; res?: any }>((resolve) =>
        fn.call(client, req, md, (e: grpc.ServiceError | null, r?: unknown) => resolve(e ? { err: e } : { res: r })),
      );
      if (err) {
        const body = grpcErrorBody(err);
        return { code: String(body.error), body, status: err.code };
      }
      const created = op === 'put' || op === 'append' || op === 'claim' ? res.created === true : false;
      return { code: 'OK', created, body: RESPONSE[op](res), status: grpc.status.OK };
    },
    async close() {
      client.close();
    },
  };
}
