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
  | { kind: 'too-large'; limit: number };

export const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** Decode a body into a JSON object or throw MALFORMED naming what is wrong. */
export function bodyObject(raw: RawBody, where: Record<string, unknown>, optional = false): Record<string, unknown> {
  let value: unknown;
  switch (raw.kind) {
    case 'too-large':
      throw new SvcError('MALFORMED', `The request body is larger than ${raw.limit} bytes (4 MiB); send a smaller value.`, where);
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
  return value as Record<string, unknown>;
}

/** Best-effort read of a body for a rejection's history row: never throws. */
export function lenientObject(raw: RawBody): Record<string, unknown> {
  try {
    return bodyObject(raw, {}, true);
  } catch {
    return {};
  }
}

/** Turn valibot issues into one readable sentence naming the key. */
export function issuesMessage(issues: v.BaseIssue<unknown>[]): string {
  return issues
    .map((i) => {
      const path = v.getDotPath(i);
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
export const premiseSchema = v.strictObject({
  field: v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty')),
  version: v.pipe(v.number('must be an integer'), v.integer('must be an integer'), v.minValue(0, 'must be 0 or more')),
  kind: v.optional(v.picklist(['fence'], 'must be "fence" when present')),
});

export const basedOnSchema = v.optional(v.array(premiseSchema, 'must be a list of premises {field, version, kind?}'));

export const invocationSchema = v.optional(
  v.pipe(
    v.record(v.string(), v.unknown(), 'must be a JSON object'),
    v.check((o) => byteLength(JSON.stringify(o)) <= KIB, 'must be at most 1 KiB of JSON'),
  ),
);

export const evidenceSchema = v.optional(v.string('must be a string'));

export const versionSchema = v.pipe(
  v.number('must be an integer'),
  v.integer('must be an integer'),
  v.minValue(0, 'must be 0 or more'),
);
