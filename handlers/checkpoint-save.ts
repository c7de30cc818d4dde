/**
 * checkpoint save: PUT /v1/records/{class}/{id}/checkpoint — a role's progress document, so
 * a replacement agent can continue. Per role, not per identity; does not raise record_version.
 */
import * as v from 'valibot';
import { bodyObject, parseWith, type RecordBodyInput } from './body.js';
import type { Ctx } from './context.js';
import { SvcError } from './errors.js';
import { byteLength, KIB } from './format.js';
import { authorize, checkRecordId, checkScopeOwner, strengthRejection, type Access, type Outcome, checkParams } from './pipeline.js';

export type CheckpointSaveInput = RecordBodyInput;

export const MAX_CHECKPOINT_BYTES = 64 * KIB;

// The document is judged later (INVALID_CHECKPOINT); the metadata is for the MCP tool listing.
export const saveBody = v.strictObject({
  document: v.pipe(
    v.unknown(),
    v.metadata({ type: 'object' }),
    v.description('save: the progress document, with every section the class requires.'),
  ),
});

/** INVALID_CHECKPOINT unless the document is an object of at most 64 KiB with every section. */
function checkDocument(access: Access, doc: unknown): Record<string, unknown> {
  const where = { record: access.record };
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
    throw new SvcError('INVALID_CHECKPOINT', 'The checkpoint document must be a JSON object.', where);
  }
  const size = byteLength(JSON.stringify(doc));
  if (size > MAX_CHECKPOINT_BYTES) {
    throw new SvcError('INVALID_CHECKPOINT', `The checkpoint document is ${size} bytes; at most 64 KiB (${MAX_CHECKPOINT_BYTES}) is allowed.`, where);
  }
  const sections = access.cls.spec.checkpoint?.sections ?? [];
  const missing = sections.filter((s) => !(s in (doc as object)));
  if (missing.length > 0) {
    throw new SvcError(
      'INVALID_CHECKPOINT',
      `The checkpoint document lacks section(s) ${missing.map((m) => `"${m}"`).join(', ')}; class "${access.cls.name}" requires ${sections.map((s) => `"${s}"`).join(', ')}.`,
      where,
    );
  }
  return doc as Record<string, unknown>;
}

export async function checkpointSave(ctx: Ctx, input: CheckpointSaveInput): Promise<Outcome> {
  const access = await authorize(ctx, input.class, 'write', input.id);
  checkRecordId(access, input.id);
  // The class floor applies to checkpoint save; a field's own floor never does.
  const weak = strengthRejection(ctx, access, null, null);
  if (weak) throw weak;
  await checkScopeOwner(ctx, access, null);
  const where = { record: access.record };
  if (access.roles.length > 1) {
    throw new SvcError(
      'MALFORMED',
      `Checkpoints belong to a role and you hold several in class "${access.cls.name}" (${access.roles.map((r) => r.name).join(', ')}); save with an identity that holds exactly one.`,
      where,
    );
  }
  const role = access.roles[0].name;
  checkParams(input.params, [], where, 'checkpoint save');
  const obj = bodyObject(input.body, where);
  parseWith(saveBody, obj, where);
  if (!('document' in obj)) throw new SvcError('MALFORMED', 'The body needs `document`: a JSON object.', where);
  const doc = checkDocument(access, obj.document);

  // Under the record's lock, so the record version it records is the one the save saw.
  const res = await ctx.db.saveCheckpoint(input.class, input.id, role, doc, ctx.identity.author);
  if (!res) throw new SvcError('NOT_FOUND', `Record ${access.record} does not exist; checkpoints need an existing record.`, where);
  ctx.metrics.checkpoint(access.cls.name, role);
  return {
    body: { record: access.record, role, checkpoint_id: res.checkpoint_id, record_version: res.record_version },
  };
}
