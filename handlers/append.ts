/**
 * append: POST /v1/records/{class}/{id}/fields/{field}/entries — add an entry to an append
 * field. The field version is the entry count; earlier entries are never rewritten.
 */
import * as v from 'valibot';
import { basedOnSchema, bodyObject, declareNoPremisesSchema, resolvePremises, ttlSecondsSchema, lenientInvocation, lenientPremises, invocationSchema, parseWith, type FieldBodyInput } from './body.js';
import type { Ctx } from './context.js';
import { SvcError } from './errors.js';
import { formatTime } from './format.js';
import { boundTtl, premiseError, runWrite, writeField, type Access, type Outcome, type WriteFacts, type WriteOp } from './pipeline.js';
import { valueProblem } from './values.js';

export type AppendInput = FieldBodyInput;

export const appendBody = v.strictObject({
  entry: v.pipe(v.unknown(), v.description("The entry: any JSON matching the field's type.")),
  // Parsed as optional so that a missing one is EVIDENCE_REQUIRED at its step of the order.
  evidence: v.optional(
    v.nullable(v.pipe(v.string('must be a string'), v.description('Where the entry comes from (source, observation, link). Always required.'))),
  ),
  based_on: basedOnSchema,
  declare_no_premises: declareNoPremisesSchema,
  invocation: invocationSchema,
  ttl_seconds: ttlSecondsSchema,
});

interface AppendBody {
  entry: unknown;
  evidence: string | null;
  based_on: { field: string; version: number; kind?: string }[] | undefined;
  invocation: Record<string, unknown> | null;
  ttl_seconds: number | null;
}

export const appendOp: WriteOp<AppendBody> = {
  op: 'append',
  // Append always needs evidence (interface: append body `evidence` required); a missing
  // one is EVIDENCE_REQUIRED at its step rather than MALFORMED, so agents learn why.
  needsEvidence: 'always',

  kindError(access, field, def) {
    if (def.kind === 'append') return null;
    const how = def.kind === 'task' ? 'PUT .../claim (claim)' : 'PUT .../fields/{field} (put)';
    return new SvcError('NOT_APPEND_FIELD', `Field "${field}" is a ${def.kind} field, not an append field; write it with ${how}.`, {
      record: access.record,
      field,
    });
  },

  parse(raw, access, field) {
    const where = { record: access.record, field };
    const obj = bodyObject(raw, where);
    const b = parseWith(appendBody, obj, where);
    if (!('entry' in obj)) throw new SvcError('MALFORMED', 'The body needs `entry`: the JSON value to append.', where);
    return { entry: b.entry, evidence: b.evidence ?? null, based_on: resolvePremises(b.based_on, b.declare_no_premises, where), invocation: b.invocation ?? null, ttl_seconds: boundTtl(access, b.ttl_seconds, where) };
  },

  checkValue(b, access, field, def) {
    const problem = valueProblem(def, b.entry);
    if (problem) throw new SvcError('MALFORMED', `entry: ${problem} (field "${field}").`, { record: access.record, field });
  },

  lenient(body): WriteFacts {
    return {
      hasValue: 'entry' in body,
      value: body.entry,
      evidence: typeof body.evidence === 'string' ? body.evidence : null,
      based_on: lenientPremises(body.based_on),
      invocation: lenientInvocation(body.invocation),
    };
  },

  facts(b): WriteFacts {
    return { hasValue: true, value: b.entry, evidence: b.evidence, based_on: b.based_on ?? null, invocation: b.invocation };
  },

  premises(b) {
    return b.based_on ?? null;
  },

  async write(b, t): Promise<Outcome> {
    const { ctx, access, field } = t;
    const done = await writeField(t, request(b), {});
    return outcome(ctx, access, field, done);
  },

  transactWrite(b, t) {
    return { ...request(b), field: t.field, hasValue: true, based_on: t.basedOn, premises: t.premises, lease_seconds: null };
  },

  refusal(_b, t, d) {
    if (d.outcome === 'stale_premise') return premiseError(t, d);
    throw new Error(`append cannot be refused with ${d.outcome}`);
  },

  answer(t, w) {
    t.ctx.metrics.write(t.access.cls.name, t.field, 'applied');
    return { op: 'append', field: t.field, seq: w.version };
  },
};

/** What the database decides an append on (alone: kslate_write; in a transaction: kslate_transact). */
function request(b: AppendBody) {
  return {
    kind: 'append' as const,
    op: 'append' as const,
    value: b.entry,
    evidence: b.evidence,
    invocation: b.invocation,
    expectVersion: null,
    expected_version: null,
    requiredCheckpoints: null,
    ttl_seconds: b.ttl_seconds,
  };
}

export function append(ctx: Ctx, input: AppendInput): Promise<Outcome> {
  return runWrite(ctx, { className: input.class, id: input.id, field: input.field, body: input.body, params: input.params }, appendOp);
}

function outcome(ctx: Ctx, access: Access, field: string, res: { version: number; record_version: number; created: boolean; expires_at?: Date | null }): Outcome {
  ctx.metrics.write(access.cls.name, field, 'applied');
  const expires = res.expires_at ? { expires_at: formatTime(res.expires_at) } : {};
  return { created: res.created, body: { record: access.record, field, seq: res.version, record_version: res.record_version, ...expires } };
}
