/**
 * Request bodies as transports hand them over: raw, so that parsing fails with MALFORMED at
 * the step of the rejection order where the body is first needed (style habit 4).
 */
import * as v from 'valibot';
import { SvcError } from './errors.js';
import { byteLength, KIB } from './format.js';

export type RawBody =
  | { kind: 'none' }
  | { kind: 'text'; text: string }
  | { kind: 'json'; value: unknown }
  | { kind: 'too-large'; limit: number }
  /** A transport could not turn its message into JSON (e.g. a protobuf Value with no kind). */
  | { kind: 'invalid'; reason: string };

/** The input of an operation on one record that takes a body (checkpoint save, transaction). */
export interface RecordBodyInput {
  class: string;
  id: string;
  body: RawBody;
  /** Query parameters (MCP: arguments) as sent, repeats included; unknown or repeated ones are MALFORMED. */
  params?: readonly string[];
}

/** The input of a write to one field (put, append, claim). */
export interface FieldBodyInput extends RecordBodyInput {
  field: string;
}

export const MAX_BODY_BYTES = 4 * 1024 * 1024;
/**
 * Deepest nesting of arrays and objects in a JSON value of a request (a value, entry,
 * document, invocation, premise list: the body object around them does not count). The same
 * on HTTP, MCP and gRPC: protobuf caps a message at 100 nested messages and a JSON level
 * costs two or three of them, so 32 leaves every value readable back through gRPC (a Query
 * result nests a Field in a Record in a map entry) and inside an error's details.
 */
export const MAX_JSON_DEPTH = 32;

/** Integers in bodies: larger ones lose precision in JSON and overflow PostgreSQL's bigint. */
export const MAX_INTEGER = Number.MAX_SAFE_INTEGER;

// U+0000, and UTF-16 surrogates not part of a pair: PostgreSQL cannot store either in text.
const BAD_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why a string cannot be stored, or null. */
export function textProblem(s: string): string | null {
  return BAD_TEXT.test(s) ? 'contains a NUL character (\\u0000) or an unpaired UTF-16 surrogate, which cannot be stored' : null;
}

/**
 * Why a JSON body cannot be stored as sent (a value nested deeper than MAX_JSON_DEPTH; a
 * string or key PostgreSQL cannot hold; a number with no finite double, which JSON.parse
 * reads as Infinity and JSON.stringify would silently store as null), or null. The root
 * (the body object) is level 0. Iterative, so hostile nesting cannot exhaust the stack.
 */
export function jsonProblem(root: unknown): string | null {
  const stack: { v: unknown; depth: number }[] = [{ v: root, depth: 0 }];
  while (stack.length > 0) {
    const { v, depth } = stack.pop()!;
    if (typeof v === 'string') {
      if (textProblem(v)) return `a string ${textProblem(v)}`;
    } else if (typeof v === 'number') {
      if (!Number.isFinite(v)) return 'a number is out of range (beyond ±1.8e308, e.g. 1e400); send it as a string';
    } else if (v !== null && typeof v === 'object') {
      if (depth > MAX_JSON_DEPTH) return `a JSON value nests deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`;
      if (Array.isArray(v)) {
        for (const item of v) stack.push({ v: item, depth: depth + 1 });
      } else {
        for (const [k, item] of Object.entries(v)) {
          if (textProblem(k)) return `an object key ${textProblem(k)}`;
          stack.push({ v: item, depth: depth + 1 });
        }
      }
    }
  }
  return null;
}

/** Decode a body into a JSON object or throw MALFORMED naming what is wrong. */
export function bodyObject(raw: RawBody, where: Record<string, unknown>, optional = false): Record<string, unknown> {
  let value: unknown;
  switch (raw.kind) {
    case 'too-large':
      throw new SvcError('MALFORMED', `The request body is larger than ${raw.limit} bytes (4 MiB); send a smaller value.`, where);
    case 'invalid':
      throw new SvcError('MALFORMED', raw.reason, where);
    case 'none':
      if (optional) return {};
      throw new SvcError('MALFORMED', 'The request needs a JSON object body.', where);
    case 'text':
      if (raw.text.trim() === '') {
        if (optional) return {};
        throw new SvcError('MALFORMED', 'The request needs a JSON object body; it was empty.', where);
      }
      try {
        value = JSON.parse(raw.text);
      } catch (e) {
        throw new SvcError('MALFORMED', `The request body is not valid JSON: ${(e as Error).message}.`, where);
      }
      break;
    case 'json':
      value = raw.value;
      break;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new SvcError('MALFORMED', 'The request body must be a JSON object.', where);
  }
  const problem = jsonProblem(value);
  if (problem) throw new SvcError('MALFORMED', `The request body cannot be stored: ${problem}.`, where);
  return value as Record<string, unknown>;
}

/**
 * Best-effort read of a body for a rejection's history row: never throws, and yields nothing
 * from a body that could not be stored (the row is kept without it).
 */
export function lenientObject(raw: RawBody): Record<string, unknown> {
  try {
    return bodyObject(raw, {}, true);
  } catch {
    return {};
  }
}

/** `based_on` as sent, when it has the shape of a premise list; for rejection rows. */
export function lenientPremises(v: unknown): { field: string; version: number; kind?: string }[] | null {
  const ok = v === undefined ? null : v;
  if (!Array.isArray(ok)) return null;
  return ok.every((p) => p && typeof p === 'object' && typeof p.field === 'string' && Number.isSafeInteger(p.version))
    ? (ok as { field: string; version: number; kind?: string }[])
    : null;
}

/** `invocation` as sent, when it is a JSON object; for rejection rows. */
export function lenientInvocation(v: unknown): Record<string, unknown> | null {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}

/**
 * Turn valibot issues into one readable sentence naming the key. A key a strict object does
 * not know reads `unknown key "x"` (valibot says "Invalid key: Expected never").
 */
export function issuesMessage(issues: v.BaseIssue<unknown>[]): string {
  return issues
    .map((i) => {
      const path = v.getDotPath(i);
      if (i.type === 'strict_object' && i.expected === 'never') {
        const keyPath = path ?? '';
        const dot = keyPath.lastIndexOf('.');
        const key = dot < 0 ? keyPath : keyPath.slice(dot + 1);
        const parent = dot < 0 ? 'the body' : `\`${keyPath.slice(0, dot)}\``;
        return `unknown key "${key}" in ${parent}; see docs/api.md for the keys it takes`;
      }
      return path ? `${path}: ${i.message}` : i.message;
    })
    .join('; ');
}

export function parseWith<S extends v.GenericSchema>(
  schema: S,
  value: unknown,
  where: Record<string, unknown>,
): v.InferOutput<S> {
  const res = v.safeParse(schema, value);
  if (!res.success) throw new SvcError('MALFORMED', `Invalid request body: ${issuesMessage(res.issues)}.`, where);
  return res.output;
}

// Shared pieces of the write bodies.
// The descriptions are what MCP clients and models read in the tool listing (runtime/http/mcp/tools.ts
// converts these schemas); they change nothing in parsing.
export const premiseSchema = v.strictObject({
  field: v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty'), v.description('A field of the same record your decision relies on.')),
  version: v.pipe(
    v.number('must be an integer'),
    v.integer('must be an integer'),
    v.minValue(0, 'must be 0 or more'),
    v.maxValue(MAX_INTEGER, `must be at most ${MAX_INTEGER}`),
    v.description('The version of that field you read (0 = it had no value).'),
  ),
  kind: v.optional(
    v.pipe(
      v.picklist(['fence'], 'must be "fence" when present'),
      v.description('"fence": a task field; the write holds only while you still hold its lease.'),
    ),
  ),
});

/** More premises than this is no decision anyone made; it bounds the work and the stored row. */
export const MAX_PREMISES = 256;

export const basedOnSchema = v.optional(
  v.pipe(
    v.array(premiseSchema, 'must be a list of premises {field, version, kind?}'),
    v.maxLength(MAX_PREMISES, `must list at most ${MAX_PREMISES} premises`),
    v.description('Premises: fields (with the versions you read) this write rests on. [] = rests on nothing (disables inference).'),
  ),
);

/** The longest ttl_seconds any write may give (ten years; a class's maxTtl may say less). */
export const MAX_TTL_SECONDS = 10 * 365 * 86_400;
const TTL_MESSAGE = `must be a whole number of seconds from 1 to ${MAX_TTL_SECONDS}`;

/** `ttl_seconds` on put, append and transactions (issue 37): sets or extends the record's expiry. */
export const ttlSecondsSchema = v.optional(
  v.pipe(
    v.number(TTL_MESSAGE),
    v.integer(TTL_MESSAGE),
    v.minValue(1, TTL_MESSAGE),
    v.maxValue(MAX_TTL_SECONDS, TTL_MESSAGE),
    v.description(
      "Optional: the record expires this many seconds after this write, unless it already expires later (the expiry is set or extended, never brought forward); at most the class's maxTtl. Without it the class ttl applies.",
    ),
  ),
);

export const invocationSchema = v.optional(
  v.pipe(
    v.custom<Record<string, unknown>>((o) => o !== null && typeof o === 'object' && !Array.isArray(o), 'must be a JSON object'),
    v.check((o) => byteLength(JSON.stringify(o)) <= KIB, 'must be at most 1 KiB of JSON'),
    // What the custom check above means, for JSON Schema (which cannot express the byte limit).
    v.metadata({ type: 'object' }),
    v.description('Optional JSON object, at most 1 KiB, identifying this call (run id, tool call id); stored with the write.'),
  ),
);

export const evidenceSchema = v.optional(
  v.pipe(v.string('must be a string'), v.description('Why this value is right; required where the class or field demands it.')),
);

/** gRPC's flag for "infer nothing"; on HTTP the same as `based_on: []`. */
export const declareNoPremisesSchema = v.optional(
  v.pipe(v.boolean('must be true or false'), v.description('true: the write rests on nothing (the same as based_on: []).')),
);

/** `based_on` after `declare_no_premises`: both together are MALFORMED (interface: gRPC). */
export function resolvePremises<P>(
  basedOn: P[] | undefined,
  declareNone: boolean | undefined,
  where: Record<string, unknown>,
): P[] | undefined {
  if (declareNone && basedOn && basedOn.length > 0) {
    throw new SvcError(
      'MALFORMED',
      `declare_no_premises says the write rests on nothing, but based_on lists ${basedOn.length} premise(s); send one or the other.`,
      where,
    );
  }
  return declareNone ? [] : basedOn;
}

export const versionSchema = v.pipe(
  v.number('must be an integer'),
  v.integer('must be an integer'),
  v.minValue(0, 'must be 0 or more'),
  v.maxValue(MAX_INTEGER, `must be at most ${MAX_INTEGER}`),
);
