/**
 * claim: PUT /v1/records/{class}/{id}/fields/{field}/claim — take, renew or release a task
 * lease. HELD and every transition of the spec's "Task field lease" table are decided under
 * the record's lock by the database clock, in kslate_claim (migrations 0006, 0010), so
 * replicas with skewed clocks agree; this file formats the answer.
 */
import * as v from 'valibot';
import { bodyObject, invocationSchema, lenientInvocation, parseWith, type FieldBodyInput } from './body.js';
import type { ClaimResult } from '../db/port.js';
import type { Ctx } from './context.js';
import { SvcError } from './errors.js';
import { formatTime } from './format.js';
import { runWrite, type Outcome, type WriteFacts, type WriteOp } from './pipeline.js';

export type ClaimInput = FieldBodyInput;

export const MAX_LEASE_SECONDS = 86_400;

export const claimBody = v.strictObject({
  lease_seconds: v.optional(
    v.pipe(
      v.number('must be an integer'),
      v.integer('must be an integer'),
      v.minValue(0, `must be from 0 to ${MAX_LEASE_SECONDS}`),
      v.maxValue(MAX_LEASE_SECONDS, `must be from 0 to ${MAX_LEASE_SECONDS}`),
      v.description("Lease length; 0 releases; omit for the field's default."),
    ),
  ),
  renew: v.optional(v.pipe(v.boolean('must be true or false'), v.description('true: extend the lease you hold.'))),
  invocation: invocationSchema,
});

interface ClaimBody {
  lease_seconds: number;
  renew: boolean;
  invocation: Record<string, unknown> | null;
}

export const claimOp: WriteOp<ClaimBody> = {
  op: 'claim',
  needsEvidence: 'never',

  kindError(access, field, def) {
    if (def.kind === 'task') return null;
    return new SvcError('NOT_TASK_FIELD', `Field "${field}" is a ${def.kind} field, not a task field; only task fields can be claimed.`, {
      record: access.record,
      field,
    });
  },

  parse(raw, access, field, def) {
    const where = { record: access.record, field };
    const b = parseWith(claimBody, bodyObject(raw, where, true), where); // the body may be omitted
    const lease = b.lease_seconds ?? def.leaseSeconds;
    if (lease === undefined) {
      throw new SvcError('MALFORMED', `lease_seconds is required: field "${field}" has no default lease in its class.`, where);
    }
    return { lease_seconds: lease, renew: b.renew ?? false, invocation: b.invocation ?? null };
  },

  lenient(body): WriteFacts {
    return {
      hasValue: false,
      invocation: lenientInvocation(body.invocation),
    };
  },

  facts(b): WriteFacts {
    return { hasValue: false, invocation: b.invocation };
  },

  premises() {
    return null;
  },

  // HELD (step 11) and the claim itself are decided under the lock by the database clock,
  // in one call (migration 0006, kslate_claim): the rule lives there, once.
  async write(b, { ctx, access, field, id }): Promise<Outcome> {
    const r = await ctx.db.claim({
      class: access.cls.name,
      rid: id,
      field,
      author: ctx.identity.author,
      identity_strength: ctx.identity.strength,
      lease_seconds: b.lease_seconds,
      invocation: b.invocation,
    });
    ctx.metrics.claim(access.cls.name, field, r.outcome);
    if (r.outcome === 'held') throw heldError(field, r);
    const body: Record<string, unknown> = { record: access.record, field, ...leaseAnswer(ctx, r) };
    body.record_version = r.record_version;
    if (r.took_over_from) body.took_over_from = r.took_over_from;
    return { created: r.created, body };
  },

  transactWrite(b, t) {
    return {
      op: 'claim',
      field: t.field,
      kind: 'task',
      hasValue: false,
      evidence: null,
      based_on: null,
      invocation: b.invocation,
      expectVersion: null,
      expected_version: null,
      premises: [],
      requiredCheckpoints: null,
      lease_seconds: b.lease_seconds,
    };
  },

  refusal(_b, t, d) {
    if (d.outcome !== 'held') throw new Error(`claim cannot be refused with ${d.outcome}`);
    t.ctx.metrics.claim(t.access.cls.name, t.field, 'held');
    return heldError(t.field, d);
  },

  answer(t, w) {
    if (w.op !== 'claim') throw new Error('a claim answered as another write');
    t.ctx.metrics.claim(t.access.cls.name, t.field, w.outcome);
    return { op: 'claim', field: t.field, ...leaseAnswer(t.ctx, w), ...(w.took_over_from ? { took_over_from: w.took_over_from } : {}) };
  },
};

/** 11 HELD: who holds the task and until when. */
function heldError(field: string, r: Pick<ClaimResult, 'owner' | 'lease_expires_at' | 'version'>): SvcError {
  const until = formatTime(r.lease_expires_at!);
  return new SvcError('HELD', `Task "${field}" is held by another identity until ${until}; wait for the lease to expire or pick another task.`, {
    field,
    owner: r.owner,
    lease_expires_at: until,
    version: r.version,
  });
}

/** The lease after an applied claim: owner and expiry while held (none after a release), the field version. */
function leaseAnswer(ctx: Ctx, r: Pick<ClaimResult, 'outcome' | 'owner' | 'lease_expires_at' | 'version'>): Record<string, unknown> {
  if (r.outcome === 'takeover') ctx.metrics.takeover();
  const body: Record<string, unknown> = {};
  if (r.lease_expires_at) {
    body.owner = r.owner;
    body.lease_expires_at = formatTime(r.lease_expires_at);
  }
  body.version = r.version;
  return body;
}

export function claim(ctx: Ctx, input: ClaimInput): Promise<Outcome> {
  return runWrite(ctx, { className: input.class, id: input.id, field: input.field, body: input.body, params: input.params }, claimOp);
}
