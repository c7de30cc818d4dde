/**
 * query: GET /v1/records/{class}?<field>=<value>&limit=N&after=<cursor> — records whose
 * fields' current values match every filter, oldest first (decisions §4).
 */
import * as v from 'valibot';
import type { QueryFilter } from '../db/port.js';
import type { Ctx } from './context.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { SvcError } from './errors.js';
import { textProblem } from './body.js';
import { canonicalJson, formatTime, MAX_RESPONSE_BYTES } from './format.js';
import { parseLimit } from './history.js';
import { authorize, canRead, checkParams, checkScopeOwner, readableFields, renderField, requireReadable, resolveField, type Outcome } from './pipeline.js';
import { recordReads } from './inference.js';
import { valueProblem } from './values.js';

export interface QueryInput {
  class: string;
  /** Field filters: name -> raw value (HTTP query parameters, MCP `filters`, gRPC map). */
  filters: Record<string, string>;
  limit?: string | number;
  after?: string;
  /** Query parameters (MCP: arguments) as sent, repeats included; unknown or repeated ones are MALFORMED. */
  params?: readonly string[];
}

export const QUERY_LIMIT_DEFAULT = 100;
export const QUERY_LIMIT_MAX = 1000;

/**
 * What query takes besides the class, as MCP and gRPC send it: the filters as one object and
 * the paging parameters (on HTTP every other query parameter is a filter). The handler judges
 * the values itself, in its order; the schema is what the MCP tool listing shows.
 */
export const queryParams = v.strictObject({
  filters: v.optional(v.pipe(v.looseObject({}), v.description('{<field>: <value>}: every filter must match.'))),
  limit: v.optional(
    v.pipe(
      v.number(),
      v.integer(),
      v.minValue(1),
      v.maxValue(QUERY_LIMIT_MAX),
      v.description(`Records per page (default ${QUERY_LIMIT_DEFAULT}).`),
    ),
  ),
  after: v.optional(v.pipe(v.string(), v.description('The next_after of the previous page.'))),
});
/** The parameters besides the filters. */
const PAGING = Object.keys(queryParams.entries).filter((k) => k !== 'filters');

export async function query(ctx: Ctx, input: QueryInput): Promise<Outcome> {
  const access = await authorize(ctx, input.class, 'read');
  const where = { class: input.class };
  const names = Object.keys(input.filters).sort();
  const filters: QueryFilter[] = [];
  for (const name of names) {
    const def = resolveField(access, name);
    requireReadable(access, name);
    if (def.kind === 'append') {
      throw new SvcError('MALFORMED', `Field "${name}" is an append field; append fields cannot be filtered.`, { ...where, field: name });
    }
    const raw = input.filters[name];
    if (typeof raw !== 'string' || textProblem(raw)) {
      throw new SvcError('MALFORMED', `The filter on "${name}" must be text without NUL characters or unpaired surrogates.`, {
        ...where,
        field: name,
      });
    }
    if (def.kind === 'task') {
      filters.push({ field: name, owner: raw });
      continue;
    }
    // Compared as a JSON string, and, when it parses as JSON, as that value too; values the
    // field's type or enum can never hold are dropped so the index is walked once.
    const candidates: unknown[] = [raw];
    try {
      const parsed: unknown = JSON.parse(raw);
      if (canonicalJson(parsed) !== canonicalJson(raw)) candidates.push(parsed);
    } catch {
      /* only the string form */
    }
    filters.push({ field: name, values: candidates.filter((c) => valueProblem(def, c) === null) });
  }
  await checkScopeOwner(ctx, access, null);
  // Every other parameter is a filter: each name once.
  checkParams(input.params, [...PAGING, ...names], where, 'query');

  const limit = parseLimit(input.limit, QUERY_LIMIT_DEFAULT, QUERY_LIMIT_MAX, where);
  const binding = `${input.class}?${canonicalJson(input.filters)}`;
  const key = await ctx.cursorKey();
  const afterId = input.after === undefined ? 0 : await decodeCursor(key, input.after, { t: 'after', b: binding }, where);

  const shown = readableFields(access);
  // A page stops at `limit` records or MAX_RESPONSE_BYTES, whichever comes first.
  const { rows, more } = filters.some((f) => f.values && f.values.length === 0)
    ? { rows: [], more: false }
    : await ctx.db.queryRecords(input.class, filters, { afterId, limit, fields: shown, maxBytes: MAX_RESPONSE_BYTES });
  const body: Record<string, unknown> = {
    class: input.class,
    records: rows.map((r) => {
      const fields: Record<string, unknown> = {};
      for (const f of r.fields) fields[f.name] = renderField(f, formatTime, (p) => canRead(access, p));
      return { record: `${input.class}/${r.rid}`, record_version: r.record_version, fields };
    }),
  };
  if (more && rows.length > 0) body.next_after = await encodeCursor(key, { t: 'after', b: binding, p: rows[rows.length - 1].id });
  await recordReads(
    ctx,
    input.class,
    rows.flatMap((r) => r.fields.map((f) => ({ rid: r.rid, field: f.name, version: f.version }))),
  );
  return { body };
}
