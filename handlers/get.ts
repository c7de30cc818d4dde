/** get: GET /v1/records/{class}/{id}?fields=a,b&entries_limit=N */
import type { Ctx } from './context.js';
import { SvcError } from './errors.js';
import { formatTime } from './format.js';
import { recordReads } from './inference.js';
import {
  authorize,
  checkRecordId,
  checkScopeOwner,
  readableFields,
  renderField,
  requireReadable,
  resolveField,
  type Outcome,
} from './pipeline.js';

export interface GetInput {
  class: string;
  id: string;
  /** Comma-separated field names (HTTP) or a list (MCP, gRPC). */
  fields?: string | string[];
  entries_limit?: string | number;
}

export const MAX_ENTRIES_LIMIT = 100_000;

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

  let entriesLimit: number | null = null;
  if (input.entries_limit !== undefined) {
    const n = typeof input.entries_limit === 'number' ? input.entries_limit : Number(input.entries_limit);
    if (!Number.isInteger(n) || n < 0 || n > MAX_ENTRIES_LIMIT || String(input.entries_limit).trim() === '') {
      throw new SvcError('MALFORMED', `entries_limit must be an integer from 0 to ${MAX_ENTRIES_LIMIT}.`, where);
    }
    entriesLimit = n;
  }

  const row = await ctx.db.readRecord(input.class, input.id, { fields: names, entriesLimit });
  if (!row) throw new SvcError('NOT_FOUND', `Record ${access.record} does not exist.`, where);
  const fields: Record<string, unknown> = {};
  for (const f of row.fields) fields[f.name] = renderField(f, formatTime);
  await recordReads(ctx, input.class, row.fields.map((f) => ({ rid: input.id, field: f.name, version: f.version })));
  return { status: 200, body: { record: access.record, record_version: row.record_version, fields } };
}
