/**
 * Premise inference and scope ownership (decisions §2–§3). With `X-Svc-Scope`, successful
 * reads record per (identity, scope) which fields of which records were seen at which
 * version; a later write in that scope without `based_on` rests on them. Read sets live in
 * the database so any replica can serve the next request; entries older than the window
 * are ignored (and swept).
 */
import type { StoredPremise } from '../db/port.js';
import type { Ctx } from './context.js';

export const INFERENCE_WINDOW_SECONDS = 15 * 60;

export async function recordReads(ctx: Ctx, cls: string, reads: { rid: string; field: string; version: number }[]) {
  if (!ctx.scope || reads.length === 0) return;
  await ctx.db.recordReads(ctx.identity.author, ctx.scope, cls, reads);
}

/** Every other field of the record read in this scope within the window, marked inferred. */
export async function inferPremises(ctx: Ctx, cls: string, rid: string, field: string): Promise<StoredPremise[]> {
  if (!ctx.scope) return [];
  const reads = await ctx.db.readSet(ctx.identity.author, ctx.scope, cls, rid, INFERENCE_WINDOW_SECONDS);
  return reads
    .filter((r) => r.field !== field)
    .sort((a, b) => a.field.localeCompare(b.field))
    .map((r) => ({ field: r.field, version: r.version, inferred: true }));
}
