/**
 * checkpoint load: GET /v1/records/{class}/{id}/checkpoint?role=<role> — the role's last
 * checkpoint and the fields that changed since (decisions §4).
 */
import * as v from 'valibot';
import type { Ctx } from './context.js';
import { SvcError } from './errors.js';
import { authorize, checkParams, checkRecordId, checkScopeOwner, type Outcome } from './pipeline.js';

export interface CheckpointLoadInput {
  class: string;
  id: string;
  role?: string;
  /** Query parameters (MCP: arguments) as sent, repeats included; unknown or repeated ones are MALFORMED. */
  params?: readonly string[];
}

/** What load takes besides the record (HTTP: query parameters); the handler judges the values itself. */
export const loadParams = v.strictObject({
  role: v.optional(v.pipe(v.string(), v.description('load: which of your roles (only when you hold several).'))),
});
const LOAD_PARAMS = Object.keys(loadParams.entries);

export async function checkpointLoad(ctx: Ctx, input: CheckpointLoadInput): Promise<Outcome> {
  const access = await authorize(ctx, input.class, 'read', input.id);
  checkRecordId(access, input.id);
  await checkScopeOwner(ctx, access, null);
  const where = { record: access.record };
  checkParams(input.params, LOAD_PARAMS, where, 'checkpoint load');
  const held = access.roles.map((r) => r.name);
  let roleName: string;
  if (input.role === undefined || input.role === '') {
    if (held.length > 1) {
      throw new SvcError('MALFORMED', `You hold several roles in class "${access.cls.name}" (${held.join(', ')}); name one with ?role=.`, where);
    }
    roleName = held[0];
  } else {
    if (!held.includes(input.role)) {
      throw new SvcError('MALFORMED', `role "${input.role}" is not one of your roles in class "${access.cls.name}" (${held.join(', ')}).`, where);
    }
    roleName = input.role;
  }
  const role = access.roles.find((r) => r.name === roleName)!;

  const loaded = await ctx.db.loadCheckpoint(input.class, input.id, roleName);
  if (!loaded) throw new SvcError('NOT_FOUND', `Record ${access.record} does not exist.`, where);
  const since = loaded.checkpoint?.record_version ?? 0;
  // Fields this role may read whose last applied write came after the checkpoint; never tasks.
  const changed = loaded.fields
    .filter((f) => f.kind !== 'task' && (role.readAll || role.read.has(f.name)) && access.cls.fields.has(f.name))
    .filter((f) => f.record_version > since)
    .sort((a, b) => a.record_version - b.record_version)
    .map((f) => ({ field: f.name, version: f.version, author: f.author, evidence: f.evidence }));
  return {
    body: {
      record: access.record,
      role: roleName,
      document: loaded.checkpoint?.document ?? null,
      record_version: loaded.checkpoint?.record_version ?? 0,
      changed_fields: changed,
    },
  };
}
