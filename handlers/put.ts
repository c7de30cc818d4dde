/**
 * put: PUT /v1/records/{class}/{id}/fields/{field} — write a versioned or soft field.
 * Versioned fields compare `expected_version` under the row lock (STALE with a diff);
 * soft fields ignore it. STALE, the resolve gate and STALE_PREMISE are decided by
 * kslate_write (migration 0010); this file builds their answers.
 */
import * as v from 'valibot';
import { createTwoFilesPatch, FILE_HEADERS_ONLY } from 'diff';
import type { FieldRow } from '../db/port.js';
import { basedOnSchema, bodyObject, issuesMessage, declareNoPremisesSchema, resolvePremises, ttlSecondsSchema, lenientInvocation, lenientPremises, evidenceSchema, invocationSchema, parseWith, versionSchema, type FieldBodyInput } from './body.js';
import type { Ctx } from './context.js';
import { SvcError } from './errors.js';
import { byteLength, formatTime, KIB } from './format.js';
import { boundTtl, canRead, premiseError, runWrite, writeField, type Access, type Outcome, type WriteFacts, type WriteOp, type WriteTarget } from './pipeline.js';
import { valueProblem } from './values.js';

export type PutInput = FieldBodyInput;

// `value` and `expected_version` are judged later in the rejection order (the field's type, whether
// it is soft); their metadata says what a valid one is, for the MCP tool listing.
export const putBody = v.strictObject({
  value: v.pipe(v.unknown(), v.description("The new value: any JSON matching the field's type and enum.")),
  expected_version: v.optional(
    v.pipe(
      v.unknown(),
      v.metadata({ type: 'integer', minimum: 0 }),
      v.description('The field version you last read; 0 if it has no value yet. Required on versioned fields.'),
    ),
  ),
  evidence: evidenceSchema,
  based_on: basedOnSchema,
  declare_no_premises: declareNoPremisesSchema,
  invocation: invocationSchema,
  ttl_seconds: ttlSecondsSchema,
});

interface PutBody {
  value: unknown;
  expected_version: number | null;
  evidence: string | null;
  based_on: { field: string; version: number; kind?: string }[] | undefined;
  invocation: Record<string, unknown> | null;
  soft: boolean;
  ttl_seconds: number | null;
}

const DIFF_LIMIT_BYTES = 64 * KIB;
const DIFF_LIMIT_LINES = 500;

/** Unified diff of the two values as pretty-printed JSON, or a note when either is too big. */
export function staleDiff(current: unknown, proposed: unknown): string {
  const a = JSON.stringify(current, null, 2) ?? 'null';
  const b = JSON.stringify(proposed, null, 2) ?? 'null';
  const tooBig = (s: string) => byteLength(s) > DIFF_LIMIT_BYTES || s.split('\n').length > DIFF_LIMIT_LINES;
  if (tooBig(a) || tooBig(b)) {
    return `(diff omitted: a value is over 64 KiB or 500 lines; compare current_value with your value)`;
  }
  return createTwoFilesPatch('current', 'proposed', a + '\n', b + '\n', undefined, undefined, {
    context: 3,
    headerOptions: FILE_HEADERS_ONLY,
  }) ?? '';
}

export const putOp: WriteOp<PutBody> = {
  op: 'put',
  needsEvidence: 'class',

  kindError(access, field, def) {
    if (def.kind === 'versioned' || def.kind === 'soft') return null;
    const how = def.kind === 'append' ? 'POST .../entries (append)' : 'PUT .../claim (claim)';
    return new SvcError('NOT_WRITABLE', `Field "${field}" is a ${def.kind} field; write it with ${how}, not put.`, {
      record: access.record,
      field,
    });
  },

  parse(raw, access, field, def) {
    const where = { record: access.record, field };
    const obj = bodyObject(raw, where);
    const b = parseWith(putBody, obj, where);
    if (!('value' in obj)) throw new SvcError('MALFORMED', 'The body needs `value`: the new value of the field.', where);
    const soft = def.kind === 'soft';
    let expected: number | null = null;
    if (!soft) {
      if (!('expected_version' in obj)) {
        throw new SvcError(
          'MALFORMED',
          `The body needs \`expected_version\`: the version of "${field}" you last read (0 if it has no value yet).`,
          where,
        );
      }
      const ev = v.safeParse(versionSchema, obj.expected_version);
      if (!ev.success) throw new SvcError('MALFORMED', `Invalid request body: expected_version: ${issuesMessage(ev.issues)}.`, where);
      expected = ev.output;
    }
    return {
      value: b.value,
      expected_version: expected,
      evidence: b.evidence ?? null,
      based_on: resolvePremises(b.based_on, b.declare_no_premises, where),
      invocation: b.invocation ?? null,
      soft,
      ttl_seconds: boundTtl(access, b.ttl_seconds, where),
    };
  },

  checkValue(b, access, field, def) {
    const problem = valueProblem(def, b.value);
    if (problem) {
      throw new SvcError('MALFORMED', `value: ${problem} (field "${field}").`, { record: access.record, field });
    }
  },

  lenient(body): WriteFacts {
    return {
      hasValue: 'value' in body,
      value: body.value,
      evidence: typeof body.evidence === 'string' ? body.evidence : null,
      expected_version: Number.isSafeInteger(body.expected_version) ? (body.expected_version as number) : null,
      based_on: lenientPremises(body.based_on),
      invocation: lenientInvocation(body.invocation),
    };
  },

  facts(b): WriteFacts {
    return {
      hasValue: true,
      value: b.value,
      evidence: b.evidence,
      expected_version: b.expected_version,
      based_on: b.based_on ?? null,
      invocation: b.invocation,
    };
  },

  premises(b) {
    return b.based_on ?? null;
  },

  async write(b, t): Promise<Outcome> {
    const { ctx, access, field } = t;
    const done = await writeField(t, request(b, t), {
      stale: (r) => staleError(r.current ?? undefined, b, access, field, r.current_version),
      gate: (missing) => gateError(access, field, missing),
    });
    return outcome(ctx, access, field, done);
  },

  transactWrite(b, t) {
    return { ...request(b, t), field: t.field, hasValue: true, based_on: t.basedOn, premises: t.premises, lease_seconds: null };
  },

  refusal(b, t, d) {
    switch (d.outcome) {
      case 'stale':
        return staleError(d.current ?? undefined, b, t.access, t.field, d.current_version);
      case 'invalid_checkpoint':
        return gateError(t.access, t.field, d.missing);
      case 'stale_premise':
        return premiseError(t, d);
      default:
        throw new Error(`put cannot be refused with ${d.outcome}`);
    }
  },

  answer(t, w) {
    t.ctx.metrics.write(t.access.cls.name, t.field, 'applied');
    return { op: 'put', field: t.field, version: w.version };
  },
};

/** What the database decides a put on (alone: kslate_write; in a transaction: kslate_transact). */
function request(b: PutBody, t: WriteTarget) {
  return {
    kind: t.def.kind as 'versioned' | 'soft',
    op: 'put' as const,
    value: b.value,
    evidence: b.evidence,
    invocation: b.invocation,
    expectVersion: b.soft ? null : b.expected_version,
    expected_version: b.expected_version,
    requiredCheckpoints: gated(b, t.access, t.field) ? (t.access.cls.spec.checkpoint?.requiredForResolve ?? []) : null,
    ttl_seconds: b.ttl_seconds,
  };
}

/** Whether the resolve gate applies: status set to resolved where the class requires checkpoints. */
function gated(b: PutBody, access: Access, field: string): boolean {
  const required = access.cls.spec.checkpoint?.requiredForResolve ?? [];
  return field === 'status' && b.value === 'resolved' && required.length > 0;
}

function outcome(ctx: Ctx, access: Access, field: string, res: { version: number; record_version: number; created: boolean; expires_at?: Date | null }): Outcome {
  ctx.metrics.write(access.cls.name, field, 'applied');
  return {
    created: res.created,
    body: {
      record: access.record,
      field,
      version: res.version,
      record_version: res.record_version,
      ...(res.expires_at ? { expires_at: formatTime(res.expires_at) } : {}),
    },
  };
}

/** The resolve gate: INVALID_CHECKPOINT naming the roles that have not checkpointed. */
function gateError(access: Access, field: string, missing: string[]): SvcError {
  return new SvcError(
    'INVALID_CHECKPOINT',
    `status may be set to resolved only after role(s) ${missing.map((m) => `"${m}"`).join(', ')} saved a checkpoint on this record (PUT .../checkpoint).`,
    { field, record: access.record },
  );
}

function staleError(cur: Pick<FieldRow, 'value' | 'author' | 'evidence' | 'updated_at'> | undefined, b: PutBody, access: Parameters<typeof canRead>[0], field: string, current: number) {
  // A role that may write but not read the field learns only that it moved.
  const readable = canRead(access, field);
  return new SvcError(
    'STALE',
    `Field "${field}" is at version ${current}, not ${b.expected_version}: someone wrote it since you read it. Re-read, decide again, and put with expected_version ${current}.`,
    {
      field,
      your_version: b.expected_version,
      current_version: current,
      current_value: readable ? (cur?.value ?? null) : null,
      current_author: readable ? (cur?.author ?? null) : null,
      current_evidence: readable ? (cur?.evidence ?? null) : null,
      current_updated_at: readable && cur ? formatTime(cur.updated_at) : null,
      diff: readable ? staleDiff(cur ? cur.value : null, b.value) : '',
    },
  );
}

export function put(ctx: Ctx, input: PutInput): Promise<Outcome> {
  return runWrite(ctx, { className: input.class, id: input.id, field: input.field, body: input.body, params: input.params }, putOp);
}
