/** history: GET /v1/records/{class}/{id}/history?field=&limit=N&before=<cursor>; gRPC History; MCP resource kslate://records/{class}/{id}/history. */
import * as v from 'valibot';
import { HISTORY_MARKED_ROW, type HistoryMark, type StoredPremise } from '../db/port.js';
import type { Ctx } from './context.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { SvcError } from './errors.js';
import { parseCount } from './limits.js';
import { formatTime, MAX_RESPONSE_BYTES, TIME_ZONE_IS_UTC } from './format.js';
import {
  authorize,
  canRead,
  checkParams,
  checkRecordId,
  checkScopeOwner,
  jsonOutcome,
  readableFields,
  readsEveryField,
  requireReadable,
  resolveField,
  visiblePremises,
  type Outcome,
} from './pipeline.js';

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
  // The page is the rows' stored JSON text (db/migrations/0008), sent as it is: no row is
  // parsed or built here. A row's last keys are its premises and its time (UTC), so a reader
  // that might not see every premise has the rows with premises marked, and a gateway outside
  // UTC has every row marked, to rewrite their ends (ownRow).
  const mark: HistoryMark = !TIME_ZONE_IS_UTC ? 'all' : readsEveryField(access) ? 'none' : 'premises';
  // A page stops at `limit` rows or MAX_RESPONSE_BYTES, whichever comes first.
  const page = await ctx.db.readHistory(input.class, input.id, {
    fields: allReadable ? null : fields,
    beforeSeq,
    limit,
    maxBytes: MAX_RESPONSE_BYTES,
    mark,
  });
  if (page.count === 0 && beforeSeq === null && !(await ctx.db.recordOrHistoryExists(input.class, input.id))) {
    throw new SvcError('NOT_FOUND', `Record ${access.record} does not exist and has no history.`, where);
  }
  const readable = (f: string) => canRead(access, f);
  // In parts: the page's rows (often hundreds of KB) are never copied into one string.
  const parts = [`{"record":${JSON.stringify(access.record)},"history":[`];
  for (let i = 0; i < page.runs.length; i++) {
    if (i > 0) parts.push(',');
    const run = page.runs[i];
    parts.push(mark === 'none' ? run : run.replace(HISTORY_MARKED_ROW, (_m, row: string) => ownRow(row, readable)));
  }
  let end = ']';
  // Retention (issue 37): a page that reaches below the newest purged row, or is the last
  // one, says where the history was cut, so a reader never takes a gap for the whole story.
  const cut = await ctx.db.historyTruncation(input.class, input.id);
  if (cut && (!page.more || (page.lastSeq !== null && page.lastSeq < cut.beforeSeq))) {
    end += `,"truncated_before":${JSON.stringify(formatTime(cut.before))}`;
  }
  if (page.more && page.lastSeq !== null) {
    end += `,"next_before":${JSON.stringify(await encodeCursor(key, { t: 'before', b: binding, p: page.lastSeq }))}`;
  }
  parts.push(`${end}}`);
  return jsonOutcome(parts);
}

export function parseLimit(
  raw: string | number | undefined,
  dflt: number,
  max: number,
  where: Record<string, unknown>,
): number {
  return raw === undefined ? dflt : parseCount('limit', raw, 1, max, where);
}

/** `,"created_at":"2026-11-24T19:40:46.914+00:00"}`: how every stored row ends. */
const TIME_END = ',"created_at":"'.length + 29 + 2;
const PREMISES_KEY = ',"based_on":';

/**
 * A stored row as this reader gets it: the premises it may see (visiblePremises), the time in
 * this gateway's offset. The row ends `…"outcome":"…"[,"based_on":[…]],"created_at":"<UTC>"}`:
 * with premises the part before the time ends in `]`, where without it ends in the outcome's
 * closing quote, and `,"based_on":` cannot occur unescaped inside the premises' own text.
 */
function ownRow(row: string, readable: (field: string) => boolean): string {
  let head = row.slice(0, row.length - TIME_END);
  const utc = row.slice(row.length - 31, row.length - 2);
  if (head.endsWith(']')) {
    const at = head.lastIndexOf(PREMISES_KEY);
    const seen = visiblePremises(JSON.parse(head.slice(at + PREMISES_KEY.length)) as StoredPremise[], readable);
    head = head.slice(0, at) + (seen !== null ? `${PREMISES_KEY}${JSON.stringify(seen)}` : '');
  }
  const time = TIME_ZONE_IS_UTC ? utc : formatTime(new Date(Date.parse(utc)));
  return `${head},"created_at":"${time}"}`;
}
