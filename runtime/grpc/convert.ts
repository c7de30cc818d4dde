/**
 * JSON <-> google.protobuf.Value / Struct, and the HTTP response bodies -> svc.v1 response
 * messages, in proto-loader's object form (see ./proto.ts for the options). Pure functions:
 * no rule lives here, only shapes.
 *
 * The well-known types come from protobufjs's bundled definitions, whose property names are
 * camelCase (`numberValue`, `structValue`, ...) even with keepCase; on the wire they are the
 * standard field numbers.
 */
import type { Outcome } from '../../handlers/pipeline.js';
import type { ListValue__Output } from './generated/google/protobuf/ListValue.js';
import type { Struct, Struct__Output } from './generated/google/protobuf/Struct.js';
import type { Value, Value__Output } from './generated/google/protobuf/Value.js';
import type { AppendResult } from './generated/svc/v1/AppendResult.js';
import type { ChangedField } from './generated/svc/v1/ChangedField.js';
import type { CheckpointLoadResult } from './generated/svc/v1/CheckpointLoadResult.js';
import type { CheckpointSaveResult } from './generated/svc/v1/CheckpointSaveResult.js';
import type { ClaimResult } from './generated/svc/v1/ClaimResult.js';
import type { Entry } from './generated/svc/v1/Entry.js';
import type { Field } from './generated/svc/v1/Field.js';
import type { HistoryEntry } from './generated/svc/v1/HistoryEntry.js';
import type { HistoryResult } from './generated/svc/v1/HistoryResult.js';
import type { Premise, Premise__Output } from './generated/svc/v1/Premise.js';
import type { QueryResult } from './generated/svc/v1/QueryResult.js';
import type { Record as RecordMsg } from './generated/svc/v1/Record.js';
import type { TransactResult } from './generated/svc/v1/TransactResult.js';
import type { WriteResult } from './generated/svc/v1/WriteResult.js';

/** A decoded message that has no JSON form; `path` names where (e.g. `value.items[2]`). */
export class NotJsonError extends Error {
  constructor(readonly path: string, readonly problem: string) {
    super(`${path}: ${problem}`);
    this.name = 'NotJsonError';
  }
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = Record<string, unknown>;

const KINDS = ['nullValue', 'numberValue', 'stringValue', 'boolValue', 'structValue', 'listValue'] as const;

// ---- wire -> JSON (requests) ------------------------------------------------------------

/**
 * A decoded google.protobuf.Value as JSON. A Value with no kind set and a non-finite number
 * have no JSON form (the protobuf JSON mapping refuses both too): NotJsonError.
 */
export function valueToJson(v: Value__Output, path = 'value'): Json {
  const kind = v.kind ?? KINDS.find((k) => v[k] !== undefined && v[k] !== null);
  switch (kind) {
    case 'nullValue':
      return null;
    case 'numberValue': {
      const n = v.numberValue as number;
      if (!Number.isFinite(n)) throw new NotJsonError(path, `${n} is not a JSON number (NaN and infinities have no JSON form)`);
      return n;
    }
    case 'stringValue':
      return v.stringValue as string;
    case 'boolValue':
      return v.boolValue as boolean;
    case 'structValue':
      return structToJson(v.structValue ?? { fields: {} }, path);
    case 'listValue':
      return listToJson(v.listValue ?? { values: [] }, path);
    default:
      throw new NotJsonError(path, 'a google.protobuf.Value with no kind set; set one of null_value, number_value, string_value, bool_value, struct_value, list_value');
  }
}

/** A decoded google.protobuf.Struct as a JSON object. */
export function structToJson(s: Struct__Output, path = 'struct'): { [k: string]: Json } {
  // fromEntries defines own properties, so a "__proto__" key stays a key, as in JSON.parse.
  return Object.fromEntries(Object.entries(s.fields ?? {}).map(([k, v]) => [k, valueToJson(v, `${path}.${k}`)]));
}

function listToJson(l: ListValue__Output, path: string): Json[] {
  return (l.values ?? []).map((v, i) => valueToJson(v, `${path}[${i}]`));
}

// ---- JSON -> wire (responses) -----------------------------------------------------------

/**
 * A JSON value as a google.protobuf.Value, read the way JSON.stringify (and so the HTTP
 * transport) reads it: `toJSON` is honoured, a non-finite number becomes null, object keys
 * whose value is undefined, a function or a symbol are left out and such array items
 * become null.
 */
export function jsonToValue(x: unknown): Value {
  if (x !== null && typeof x === 'object' && typeof (x as { toJSON?: unknown }).toJSON === 'function') {
    x = (x as { toJSON(): unknown }).toJSON();
  }
  switch (typeof x) {
    case 'string':
      return { stringValue: x };
    case 'number':
      return Number.isFinite(x) ? { numberValue: x } : { nullValue: 'NULL_VALUE' };
    case 'boolean':
      return { boolValue: x };
    case 'object':
      if (x === null) return { nullValue: 'NULL_VALUE' };
      if (Array.isArray(x)) return { listValue: { values: x.map((item) => (skipped(item) ? { nullValue: 'NULL_VALUE' } : jsonToValue(item))) } };
      return { structValue: jsonToStruct(x as Obj) };
    case 'bigint':
      throw new TypeError('a bigint has no JSON form');
    default:
      // undefined, function, symbol at the top level: JSON.stringify writes nothing; null here.
      return { nullValue: 'NULL_VALUE' };
  }
}

/** A JSON object as a google.protobuf.Struct (same reading as jsonToValue). */
export function jsonToStruct(o: Obj): Struct {
  const fields: { [k: string]: Value } = {};
  for (const [k, v] of Object.entries(o)) {
    if (skipped(v)) continue;
    Object.defineProperty(fields, k, { value: jsonToValue(v), enumerable: true, writable: true, configurable: true });
  }
  return { fields };
}

function skipped(v: unknown): boolean {
  return v === undefined || typeof v === 'function' || typeof v === 'symbol';
}

// ---- HTTP bodies -> response messages ---------------------------------------------------

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: unknown): number => (typeof v === 'number' ? v : 0);
/** `optional` proto fields: set only when the HTTP body has the key with a non-null value. */
function optional<K extends string>(key: K, v: unknown): { [P in K]?: string } {
  return typeof v === 'string' ? ({ [key]: v } as { [P in K]: string }) : {};
}

export function premiseMsg(p: Obj): Premise {
  return { field: str(p.field) ?? '', version: num(p.version), kind: str(p.kind) ?? '', inferred: p.inferred === true };
}

/** Premises as the handler body wants them: `kind` only when set; `inferred` is output only. */
export function premiseFromMsg(p: Premise__Output): { field: string; version: number; kind?: string } {
  return { field: p.field, version: p.version, ...(p.kind !== '' ? { kind: p.kind } : {}) };
}

function premises(v: unknown): { based_on: Premise[]; declare_no_premises: boolean } {
  const list = Array.isArray(v) ? (v as Obj[]) : [];
  return { based_on: list.map(premiseMsg), declare_no_premises: Array.isArray(v) && v.length === 0 };
}

const struct = (v: unknown): Struct | null => (v !== null && typeof v === 'object' && !Array.isArray(v) ? jsonToStruct(v as Obj) : null);

export function entryMsg(e: Obj): Entry {
  return {
    seq: num(e.seq),
    value: jsonToValue(e.value),
    author: str(e.author) ?? '',
    ...optional('identity_strength', e.identity_strength),
    ...optional('evidence', e.evidence),
    updated_at: str(e.updated_at) ?? '',
    ...premises(e.based_on),
    invocation: struct(e.invocation),
  };
}

/** A field value of get and query (handlers' renderField shape). */
export function fieldMsg(f: Obj): Field {
  return {
    // Task fields have no `value` key; a JSON null value is a Value with null_value set.
    ...('value' in f ? { value: jsonToValue(f.value) } : {}),
    version: num(f.version),
    ...optional('author', f.author),
    ...optional('identity_strength', f.identity_strength),
    ...optional('evidence', f.evidence),
    ...premises(f.based_on),
    invocation: struct(f.invocation),
    ...optional('updated_at', f.updated_at),
    ...optional('owner', f.owner),
    ...optional('lease_expires_at', f.lease_expires_at),
    entries: Array.isArray(f.entries) ? (f.entries as Obj[]).map(entryMsg) : [],
    lease_lapsed: f.lease_lapsed === true,
    ...optional('next_entries_before', f.next_entries_before),
  };
}

export function recordMsg(r: Obj): RecordMsg {
  const fields: { [k: string]: Field } = {};
  for (const [name, f] of Object.entries((r.fields ?? {}) as Obj)) {
    Object.defineProperty(fields, name, { value: fieldMsg(f as Obj), enumerable: true, writable: true, configurable: true });
  }
  const omitted = Array.isArray(r.omitted_fields) ? (r.omitted_fields as unknown[]).filter((n): n is string => typeof n === 'string') : [];
  return { record: str(r.record) ?? '', record_version: num(r.record_version), fields, omitted_fields: omitted, ...optional('expires_at', r.expires_at) };
}

export function writeResultMsg({ created, body }: Outcome): WriteResult {
  return { record: str(body.record), field: str(body.field), version: num(body.version), record_version: num(body.record_version), created: created === true, ...optional('expires_at', body.expires_at), ...dry(body) };
}

/** A dry run's result says so (issue 33); an ordinary one leaves the field unset. */
const dry = (body: Obj): { dry_run?: true } => (body.dry_run === true ? { dry_run: true } : {});

export function appendResultMsg({ created, body }: Outcome): AppendResult {
  return { record: str(body.record), field: str(body.field), seq: num(body.seq), record_version: num(body.record_version), created: created === true, ...optional('expires_at', body.expires_at), ...dry(body) };
}

export function claimResultMsg({ created, body }: Outcome): ClaimResult {
  return {
    record: str(body.record),
    field: str(body.field),
    ...optional('owner', body.owner),
    ...optional('lease_expires_at', body.lease_expires_at),
    version: num(body.version),
    record_version: num(body.record_version),
    ...optional('took_over_from', body.took_over_from),
    created: created === true,
    ...dry(body),
  };
}

export function transactResultMsg({ created, body }: Outcome): TransactResult {
  const writes = Array.isArray(body.writes) ? (body.writes as Obj[]) : [];
  return {
    record: str(body.record),
    record_version: num(body.record_version),
    transaction: str(body.transaction),
    writes: writes.map((w) => ({
      op: str(w.op),
      field: str(w.field),
      ...optionalNum('version', w.version),
      ...optionalNum('seq', w.seq),
      ...optional('owner', w.owner),
      ...optional('lease_expires_at', w.lease_expires_at),
      ...optional('took_over_from', w.took_over_from),
    })),
    created: created === true,
    ...optional('expires_at', body.expires_at),
    ...dry(body),
  };
}

export function checkpointSaveResultMsg({ body }: Outcome): CheckpointSaveResult {
  return { record: str(body.record), role: str(body.role), checkpoint_id: num(body.checkpoint_id), record_version: num(body.record_version), ...dry(body) };
}

export function checkpointLoadResultMsg({ body }: Outcome): CheckpointLoadResult {
  const changed = Array.isArray(body.changed_fields) ? (body.changed_fields as Obj[]) : [];
  return {
    record: str(body.record),
    role: str(body.role),
    // No checkpoint yet: HTTP `document: null`, here an unset message.
    document: struct(body.document),
    record_version: num(body.record_version),
    changed_fields: changed.map(
      (c): ChangedField => ({ field: str(c.field), version: num(c.version), ...optional('author', c.author), ...optional('evidence', c.evidence) }),
    ),
  };
}

export function queryResultMsg({ body }: Outcome): QueryResult {
  const records = Array.isArray(body.records) ? (body.records as Obj[]) : [];
  return { class: str(body.class), records: records.map(recordMsg), ...optional('next_after', body.next_after) };
}

/** `optional` int64 proto fields: set only when the HTTP row has the key with a number. */
function optionalNum<K extends string>(key: K, v: unknown): { [P in K]?: number } {
  return typeof v === 'number' ? ({ [key]: v } as { [P in K]: number }) : {};
}

/** A history row (handlers/history.ts renderHistoryRow shape). */
export function historyEntryMsg(r: Obj): HistoryEntry {
  return {
    seq: num(r.seq),
    field: str(r.field) ?? '',
    op: str(r.op) ?? '',
    ...optionalNum('version', r.version),
    ...optionalNum('record_version', r.record_version),
    // No `value` key (a claim, a JSON null, a value kept only as size and digest): unset.
    ...('value' in r ? { value: jsonToValue(r.value) } : {}),
    ...optionalNum('value_size', r.value_size),
    ...optional('value_sha256', r.value_sha256),
    author: str(r.author) ?? '',
    ...optional('identity_strength', r.identity_strength),
    ...optional('evidence', r.evidence),
    ...optionalNum('expected_version', r.expected_version),
    ...premises(r.based_on),
    invocation: struct(r.invocation),
    outcome: str(r.outcome) ?? '',
    created_at: str(r.created_at) ?? '',
  };
}

export function historyResultMsg({ body }: Outcome): HistoryResult {
  const rows = Array.isArray(body.history) ? (body.history as Obj[]) : [];
  return { record: str(body.record), history: rows.map(historyEntryMsg), ...optional('next_before', body.next_before), ...optional('truncated_before', body.truncated_before) };
}
