/**
 * claim: PUT /v1/records/{class}/{id}/fields/{field}/claim — take, renew or release a task
 * lease. Expiry is judged by the database clock (tx.dbNow) so replicas with skewed clocks
 * agree. Every transition of the spec's "Task field lease" table is a branch below.
 */
import * as v from 'valibot';
import { bodyObject, invocationSchema, lenientInvocation, parseWith, type RawBody } from './body.js';
import type { Ctx } from './context.js';
import { SvcError } from './errors.js';
import { formatTime } from './format.js';
import { runWrite, type Outcome, type Rejection, type WriteFacts, type WriteOp } from './pipeline.js';

export interface ClaimInput {
  class: string;
  id: string;
  field: string;
  body: RawBody;
  /** Query parameters (MCP: arguments) as sent, repeats included; unknown or repeated ones are MALFORMED. */
  params?: readonly string[];
}

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

/** Whether the lease is held (owner set and unexpired by the database clock). */
function holder(owner: string | null, expires: Date | null, now: Date): string | null {
  return owner && expires && expires.getTime() > now.getTime() ? owner : null;
}

const claimOp: WriteOp<ClaimBody> = {
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

  held(tx, b, ctx, access, field): Rejection | null {
    const cur = tx.fields.get(field);
    const owner = holder(cur?.owner ?? null, cur?.lease_expires_at ?? null, tx.dbNow);
    if (!owner || owner === ctx.identity.author) return null;
    ctx.metrics.claim(access.cls.name, field, 'held');
    return {
      error: new SvcError(
        'HELD',
        `Task "${field}" is held by another identity until ${formatTime(cur!.lease_expires_at!)}; wait for the lease to expire or pick another task.`,
        { field, owner, lease_expires_at: formatTime(cur!.lease_expires_at!), version: cur!.version },
      ),
      outcome: 'held',
      keep: 'none',
    };
  },

  async apply(tx, b, ctx, access, field, def): Promise<Outcome> {
    const cur = tx.fields.get(field);
    const me = ctx.identity.author;
    const current = holder(cur?.owner ?? null, cur?.lease_expires_at ?? null, tx.dbNow);
    const version = (cur?.version ?? 0) + 1;
    let op: 'claim' | 'release' | 'takeover';
    let outcome: string;
    let tookOverFrom: string | null = null;
    if (b.lease_seconds === 0) {
      op = 'release';
      outcome = 'release';
    } else if (current === me) {
      op = 'claim';
      outcome = 'renew';
    } else if (cur?.owner && cur.owner !== me) {
      // Unheld because the previous owner's lease expired: a takeover (HELD caught the rest).
      op = 'takeover';
      outcome = 'takeover';
      tookOverFrom = cur.owner;
    } else {
      op = 'claim';
      outcome = 'claim';
    }
    const expires = b.lease_seconds === 0 ? null : new Date(tx.dbNow.getTime() + b.lease_seconds * 1000);
    const res = await tx.applyField({
      field,
      kind: def.kind,
      value: null,
      version,
      author: me,
      identity_strength: ctx.identity.strength,
      evidence: null,
      based_on: null,
      invocation: b.invocation,
      owner: expires ? me : null,
      lease_expires_at: expires,
      history: { op, expected_version: null },
    });
    ctx.metrics.claim(access.cls.name, field, outcome);
    if (op === 'takeover') ctx.metrics.takeover();
    const body: Record<string, unknown> = { record: access.record, field };
    if (expires) {
      body.owner = me;
      body.lease_expires_at = formatTime(expires);
    }
    body.version = version;
    body.record_version = res.record_version;
    if (tookOverFrom) body.took_over_from = tookOverFrom;
    return { created: res.created, body };
  },
};

export function claim(ctx: Ctx, input: ClaimInput): Promise<Outcome> {
  return runWrite(ctx, { className: input.class, id: input.id, field: input.field, body: input.body, params: input.params }, claimOp);
}
