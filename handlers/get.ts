/** get: GET /v1/records/{class}/{id}?fields=a,b&entries_limit=N&entries_before=<cursor> */
import * as v from 'valibot';
import type { Ctx } from './context.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { SvcError } from './errors.js';
import { parseDuration } from './class-schema.js';
import { formatTime, MAX_RESPONSE_BYTES } from './format.js';
import { recordReads } from './inference.js';
import { parseCount } from './limits.js';
import {
  authorize,
  canRead,
  checkParams,
  checkRecordId,
  checkScopeOwner,
  readableFields,
  fieldJson,
  renderField,
  requireReadable,
  jsonOutcome,
  resolveField,
  type Outcome,
} from './pipeline.js';

export interface GetInput {
  class: string;
  id: string;
  /** Comma-separated field names (HTTP) or a list (MCP, gRPC). */
  fields?: string | string[];
  entries_limit?: string | number;
  /** Continue one append field's entries: a `next_entries_before` of an earlier get. */
  entries_before?: string;
  /** Query parameters (MCP: arguments) as sent, repeats included; unknown or repeated ones are MALFORMED. */
  params?: readonly string[];
}

export const MAX_ENTRIES_LIMIT = 100_000;

/**
 * The parameters get takes besides the record, as MCP and gRPC send them (HTTP sends the same
 * names as query text). The handler refuses every other name (`GET_PARAMS`) and judges the
 * values itself, in its order; the schema is what the MCP tool listing shows.
 */
export const getParams = v.strictObject({
  fields: v.optional(v.pipe(v.array(v.string()), v.description('Only these fields (default: every field your role may read).'))),
  entries_limit: v.optional(
    v.pipe(
      v.number(),
      v.integer(),
      v.minValue(0),
      v.maxValue(MAX_ENTRIES_LIMIT),
      v.description('At most this many entries per append field (the newest).'),
    ),
  ),
  entries_before: v.optional(
    v.pipe(v.string(), v.description('Continue an append field whose entries did not all fit: its next_entries_before, with fields = [that field].')),
  ),
});
export const GET_PARAMS = Object.keys(getParams.entries);

export async function get(ctx: Ctx, input: GetInput): Promise<Outcome> {
  const access = await authorize(ctx, input.class, 'read', input.id);
  checkRecordId(access, input.id);
  const where = { record: access.record };

  let names: string[];
  if (input.fields === undefined) {
    names = readableFields(access);
  } else {
    const list = Array.isArray(input.fields) ? input.fields : input.fields.split(',');
    names = [...new Set(list.map((s) => s.trim()).filter((s) => s !== ''))];
    if (names.length === 0) throw new SvcError('MALFORMED', '`fields` must name at least one field.', where);
    for (const n of names) resolveField(access, n);
    for (const n of names) requireReadable(access, n);
  }

  await checkScopeOwner(ctx, access, null); // 10
  checkParams(input.params, GET_PARAMS, where, 'get');

  const entriesLimit =
    input.entries_limit === undefined ? null : parseCount('entries_limit', input.entries_limit, 0, MAX_ENTRIES_LIMIT, where);

  // Entries past the byte budget are continued one append field at a time (the cursor key only then).
  let cursorKey: string | undefined;
  const key = async () => (cursorKey ??= await ctx.cursorKey());
  const binding = (field: string) => `${input.class}/${input.id}#${field}`;
  let entriesBeforeSeq: number | null = null;
  if (input.entries_before !== undefined) {
    const only = input.fields !== undefined && names.length === 1 ? names[0] : null;
    if (only === null || access.cls.fields.get(only)?.kind !== 'append') {
      throw new SvcError(
        'MALFORMED',
        '`entries_before` continues the entries of one append field: send it with `fields=<that field>` and the next_entries_before value of that field.',
        where,
      );
    }
    entriesBeforeSeq = await decodeCursor(await key(), input.entries_before, { t: 'entries', b: binding(only) }, where);
  }

  const row = await ctx.db.readRecord(input.class, input.id, {
    fields: names,
    entriesLimit,
    entriesBeforeSeq,
    maxBytes: MAX_RESPONSE_BYTES,
  });
  if (!row) throw new SvcError('NOT_FOUND', `Record ${access.record} does not exist.`, where);
  // When the record expires (issue 37): its own expiry (ttl_seconds), else its last write plus the class ttl; absent when never.
  const ttlMs = access.cls.spec.ttl ? parseDuration(access.cls.spec.ttl) : null;
  const expiresAt = row.expires_at ?? (ttlMs && row.last_write_at ? new Date(row.last_write_at.getTime() + ttlMs) : null);
  const expires = expiresAt ? `,"expires_at":${JSON.stringify(formatTime(expiresAt))}` : '';
  // The answer is built as JSON text (values as stored: fieldJson), sent as it is over HTTP.
  const parts: string[] = [];
  const omitted: string[] = [];
  const readable = (f: string) => canRead(access, f);
  for (const f of row.fields) {
    if (f.omitted) {
      omitted.push(f.name);
      continue;
    }
    let text: string;
    if (f.entries_more) {
      // Older entries did not fit: continue from the oldest one returned (or from where this read began).
      const out = renderField(f, formatTime, readable);
      const oldest = f.entries && f.entries.length > 0 ? f.entries[0].seq : (entriesBeforeSeq ?? f.version + 1);
      out.next_entries_before = await encodeCursor(await key(), { t: 'entries', b: binding(f.name), p: oldest });
      text = JSON.stringify(out);
    } else text = fieldJson(f, formatTime, readable);
    parts.push(`${JSON.stringify(f.name)}:${text}`);
  }
  // The scope's reads (inference.ts); nothing to record without a scope.
  if (ctx.scope) {
    const shown = row.fields.filter((f) => !f.omitted);
    await recordReads(ctx, input.class, shown.map((f) => ({ rid: input.id, field: f.name, version: f.version })));
  }
  const rest = omitted.length > 0 ? `,"omitted_fields":${JSON.stringify(omitted)}` : '';
  return jsonOutcome(`{"record":${JSON.stringify(access.record)},"record_version":${row.record_version}${expires},"fields":{${parts.join(',')}}${rest}}`);
}
