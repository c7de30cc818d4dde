/** history: GET /v1/records/{class}/{id}/history?field=&limit=N&before=<cursor>; gRPC History; MCP resource kslate://records/{class}/{id}/history. */
import * as v from 'valibot';
import type { HistoryRow } from '../db/port.js';
import type { Ctx } from './context.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { SvcError } from './errors.js';
import { parseCount } from './limits.js';
import { formatTime, MAX_RESPONSE_BYTES } from './format.js';
import { authorize, canRead, checkParams, checkRecordId, checkScopeOwner, readableFields, requireReadable, resolveField, visiblePremises, type Outcome } from './pipeline.js';

export interface HistoryInput {
  class: string;
  id: string;
  field?: string;
  limit?: string | number;
  before?: string;
  /** Query parameters (MCP: arguments) as sent, repeats included; unknown or repeated ones are MALFORMED. */
  params?: readonly string[];
}

export const HISTORY_LIMIT_DEFAULT = 1000;
export const HISTORY_LIMIT_MAX = 10_000;

/**
 * The query parameters history takes; the handler refuses every other name and judges the
 * values itself, in its order. The schema is what the OpenAPI document shows.
 */
export const historyParams = v.strictObject({
  field: v.optional(v.pipe(v.string(), v.description('Only the rows of this field (it must be one your role may read).'))),
  limit: v.optional(
    v.pipe(
      v.number(),
      v.integer(),
      v.minValue(1),
      v.maxValue(HISTORY_LIMIT_MAX),
      v.description(`Rows per page, newest first (default ${HISTORY_LIMIT_DEFAULT}).`),
    ),
  ),
  before: v.optional(v.pipe(v.string(), v.description('The next_before of the previous page (bound to this record and `field`).'))),
});
const HISTORY_PARAMS = Object.keys(historyParams.entries);

export async function history(ctx: Ctx, input: HistoryInput): Promise<Outcome> {
  const access = await authorize(ctx, input.class, 'read', input.id);
  checkRecordId(access, input.id);
  const where = { record: access.record };

  let fields: string[];
  if (input.field !== undefined) {
    resolveField(access, input.field);
    requireReadable(access, input.field);
    fields = [input.field];
  } else {
    fields = readableFields(access);
  }

  await checkScopeOwner(ctx, access, input.field ?? null); // 10
  checkParams(input.params, HISTORY_PARAMS, where, 'history');

  const limit = parseLimit(input.limit, HISTORY_LIMIT_DEFAULT, HISTORY_LIMIT_MAX, where);
  // The cursor is bound to this record and field filter, so it cannot page another one.
  const binding = `${input.class}/${input.id}#${input.field ?? ''}`;
  const key = await ctx.cursorKey();
  const beforeSeq =
    input.before === undefined ? null : await decodeCursor(key, input.before, { t: 'before', b: binding }, where);

  const allReadable = input.field === undefined && fields.length === access.cls.fields.size;
  // A page stops at `limit` rows or MAX_RESPONSE_BYTES, whichever comes first.
  const { rows: page, more } = await ctx.db.readHistory(input.class, input.id, {
    fields: allReadable ? null : fields,
    beforeSeq,
    limit,
    maxBytes: MAX_RESPONSE_BYTES,
  });
  if (page.length === 0 && beforeSeq === null && !(await ctx.db.recordOrHistoryExists(input.class, input.id))) {
    throw new SvcError('NOT_FOUND', `Record ${access.record} does not exist and has no history.`, where);
  }
  const body: Record<string, unknown> = { record: access.record, history: page.map((r) => renderHistoryRow(r, (f) => canRead(access, f))) };
  if (more && page.length > 0) {
    body.next_before = await encodeCursor(key, { t: 'before', b: binding, p: page[page.length - 1].seq });
  }
  return { body };
}

export function parseLimit(
  raw: string | number | undefined,
  dflt: number,
  max: number,
  where: Record<string, unknown>,
): number {
  return raw === undefined ? dflt : parseCount('limit', raw, 1, max, where);
}

function renderHistoryRow(r: HistoryRow, readable: (field: string) => boolean): Record<string, unknown> {
  const out: Record<string, unknown> = { seq: r.seq, field: r.field, op: r.op };
  if (r.version !== null) out.version = r.version;
  if (r.record_version !== null) out.record_version = r.record_version;
  if (r.value_sha256 !== null) {
    // Over 64 KiB on a scope/evidence/identity rejection: only its size and digest are kept.
    out.value_size = r.value_size;
    out.value_sha256 = r.value_sha256;
  } else if (r.value !== null) {
    out.value = r.value;
  }
  out.author = r.author;
  if (r.identity_strength !== null) out.identity_strength = r.identity_strength;
  if (r.evidence !== null) out.evidence = r.evidence;
  if (r.expected_version !== null) out.expected_version = r.expected_version;
  const basedOn = visiblePremises(r.based_on, readable);
  if (basedOn !== null) out.based_on = basedOn;
  if (r.invocation !== null) out.invocation = r.invocation;
  out.outcome = r.outcome;
  out.created_at = formatTime(r.created_at);
  return out;
}
