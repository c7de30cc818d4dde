/**
 * transaction: POST /v1/records/{class}/{id}/transactions — 1 to 64 puts, appends and claims
 * on one record, all applied with one new record_version or none (issue 33 item 2).
 *
 * Each write goes through the checks a single write gets, in the order of the specification
 * and with the same text: steps 6–12 in `prepareWrite` (handlers/pipeline.ts), then HELD,
 * STALE, the resolve gate and STALE_PREMISE under the record's lock in kslate_transact
 * (migration 0012), which decides every write against the state the earlier writes of the
 * transaction leave and reuses the single writes' SQL helpers. The first write in index order
 * that fails is the answer: exactly the error body that write alone would get, plus `index`.
 *
 * Top-level `based_on`, `evidence` and `invocation` apply to every write that has none of its
 * own (based_on and evidence: puts and appends). Without any based_on, premises are inferred
 * from the scope's reads once for the transaction, leaving out the fields it writes itself.
 */
import * as v from 'valibot';
import type { StoredPremise, TransactWrite } from '../db/port.js';
import { appendOp } from './append.js';
import { basedOnSchema, bodyObject, declareNoPremisesSchema, evidenceSchema, invocationSchema, parseWith, ttlSecondsSchema, type RawBody, type RecordBodyInput } from './body.js';
import { claimOp } from './claim.js';
import type { Ctx } from './context.js';
import { formatTime } from './format.js';
import { fieldRelaxed } from './class-schema.js';
import { SvcError } from './errors.js';
import { inferPremises, recordReads } from './inference.js';
import {
  authorize,
  boundTtl,
  canRead,
  checkParams,
  checkRecordId,
  keptValue,
  prepareWrite,
  scopeMismatch,
  type Outcome,
  type Prepared,
  type WriteFacts,
  type WriteOp,
} from './pipeline.js';
import { putOp } from './put.js';

/** Query parameters (MCP: arguments) as sent: a transaction takes none. */
export type TransactionInput = RecordBodyInput;

export const MAX_TRANSACTION_WRITES = 64;

const OPS: Record<string, WriteOp<any>> = { put: putOp, append: appendOp, claim: claimOp };

export const transactionBody = v.strictObject({
  writes: v.pipe(
    v.array(v.unknown()),
    v.metadata({ items: { type: 'object' } }),
    v.description(
      `1 to ${MAX_TRANSACTION_WRITES} writes, applied in order, all or none: {"op":"put","field","value","expected_version"}, {"op":"append","field","entry"}, {"op":"claim","field","lease_seconds","renew"}; each may carry the keys its operation takes (evidence, based_on, invocation).`,
    ),
  ),
  based_on: basedOnSchema,
  declare_no_premises: declareNoPremisesSchema,
  evidence: evidenceSchema,
  invocation: invocationSchema,
  ttl_seconds: ttlSecondsSchema,
});

/** One write of the body after the envelope checks: its operation, field and own body. */
interface TxWrite {
  name: 'put' | 'append' | 'claim';
  op: WriteOp<any>;
  field: string;
  body: Record<string, unknown>;
}

export async function transaction(ctx: Ctx, input: TransactionInput): Promise<Outcome> {
  const access = await authorize(ctx, input.class, 'write', input.id); // 2–4
  checkRecordId(access, input.id); // 5
  const where = { record: access.record };
  checkParams(input.params, [], where, 'transaction');
  const { writes, ttl } = envelope(input.body, where);
  const top = boundTtl(access, ttl, where);

  // Step 10 is the request's, not a write's: asked once, at the first write that reaches it.
  let scopeOk = false;
  const written = new Set(writes.map((w) => w.field));
  let inferred: Promise<StoredPremise[]> | undefined;
  const infer = () =>
    (inferred ??= inferPremises(ctx, access.cls.name, input.id, '').then((ps) =>
      // The transaction's own writes are not premises: an earlier write of it moves them.
      ps.filter((p) => !written.has(p.field) && access.cls.fields.has(p.field) && canRead(access, p.field)),
    ));

  // Steps 6–12 of each write in index order; the first refusal stops the preparing.
  const prepared: Prepared<any>[] = [];
  for (const w of writes) {
    const p = await prepareWrite(ctx, access, input.id, w.field, { kind: 'json', value: w.body }, w.op, {
      mismatch: async () => {
        if (scopeOk) return null;
        const err = await scopeMismatch(ctx, access, w.field);
        scopeOk = err === null;
        return err;
      },
      infer,
    });
    prepared.push(p);
    if (!p.ok) break;
  }
  const stopAt = prepared.findIndex((p) => !p.ok);
  const stop = stopAt < 0 ? null : (prepared[stopAt] as Extract<Prepared<unknown>, { ok: false }>);
  // A first write refused without a history row: nothing before it to decide, nothing to record.
  if (stop && stopAt === 0 && stop.outcome === null) throw withIndex(stop.error, 0);

  const txn = crypto.randomUUID();
  const request: TransactWrite[] = await Promise.all(
    writes.map(async (w, i): Promise<TransactWrite> => {
      const p = prepared[i];
      if (p?.ok) return { ...w.op.transactWrite(p.b, p.t), kept: await keptValue(p.facts) };
      const facts: WriteFacts = p ? p.facts : w.op.lenient(w.body);
      return {
        op: w.name,
        field: w.field,
        kind: null,
        value: facts.value,
        hasValue: facts.hasValue,
        evidence: typeof facts.evidence === 'string' ? facts.evidence : null,
        based_on: facts.based_on ?? null,
        invocation: facts.invocation ?? null,
        expectVersion: null,
        expected_version: typeof facts.expected_version === 'number' ? facts.expected_version : null,
        premises: [],
        requiredCheckpoints: null,
        lease_seconds: null,
        kept: await keptValue(facts),
      };
    }),
  );
  const r = await ctx.db.transact({
    class: access.cls.name,
    rid: input.id,
    txn,
    author: ctx.identity.author,
    identity_strength: ctx.identity.strength,
    writes: request,
    stop: stop ? { index: stopAt, outcome: stop.outcome } : null,
    ttl_seconds: recordTtl(top, prepared),
    // Relaxed only when every write is of a relaxed field: one strict write makes the whole
    // transaction wait for its WAL flush (issue 38).
    relaxed: writes.every((w) => {
      const def = access.cls.spec.fields[w.field];
      return def !== undefined && fieldRelaxed(access.cls.spec, def);
    }),
  });

  if (r.outcome === 'rejected') {
    const p = prepared[r.index];
    ctx.trace.field = writes[r.index].field;
    if (r.decision.outcome === 'stop' || !p.ok) throw withIndex(stop!.error, r.index);
    throw withIndex(writes[r.index].op.refusal(p.b, p.t, r.decision), r.index);
  }

  const answers = r.writes.map((a, i) => {
    const p = prepared[i] as Extract<Prepared<unknown>, { ok: true }>;
    return writes[i].op.answer(p.t, a);
  });
  // The writer knows the versions it just wrote: later inferred premises start from them.
  await recordReads(
    ctx,
    access.cls.name,
    r.writes.flatMap((a, i) => (a.op === 'claim' ? [] : [{ rid: input.id, field: writes[i].field, version: a.version }])),
  );
  return {
    created: r.created,
    body: {
      record: access.record,
      record_version: r.record_version,
      transaction: r.txn ?? txn,
      writes: answers,
      ...(r.expires_at ? { expires_at: formatTime(r.expires_at) } : {}),
    },
  };
}

/**
 * The record's ttl a transaction gives (issue 37): the longest of its top-level `ttl_seconds`
 * and those of its puts and appends (each already within the class's maxTtl). Applying each
 * in turn ("set or extend, never bring forward") comes to the same, so the database applies it
 * once, when every write applied.
 */
function recordTtl(top: number | null, prepared: Prepared<any>[]): number | null {
  let ttl = top;
  for (const p of prepared) {
    const own = p.ok ? (p.b as { ttl_seconds?: number | null }).ttl_seconds : null;
    if (typeof own === 'number' && (ttl === null || own > ttl)) ttl = own;
  }
  return ttl;
}

/** The error a write alone would get, plus which write it was. */
function withIndex(e: SvcError, index: number): SvcError {
  return new SvcError(e.code, e.message, { ...e.extra, index });
}

/**
 * The transaction's own shape (MALFORMED before any write is judged): an object with 1 to 64
 * writes, each an object naming `op` and `field`; the defaults a write takes from the top level.
 */
function envelope(raw: RawBody, where: Record<string, unknown>): { writes: TxWrite[]; ttl: number | undefined } {
  const obj = bodyObject(raw, where);
  const env = parseWith(transactionBody, obj, where);
  if (!('writes' in obj)) throw new SvcError('MALFORMED', `The body needs \`writes\`: a list of 1 to ${MAX_TRANSACTION_WRITES} writes.`, where);
  const n = env.writes.length;
  if (n < 1 || n > MAX_TRANSACTION_WRITES) {
    throw new SvcError('MALFORMED', `\`writes\` must hold 1 to ${MAX_TRANSACTION_WRITES} writes; it holds ${n}.`, where);
  }
  if (env.based_on !== undefined && env.declare_no_premises) {
    throw new SvcError('MALFORMED', 'Send either `based_on` or `declare_no_premises`, not both.', where);
  }
  const writes = env.writes.map((w, index): TxWrite => {
    const at = { ...where, index };
    if (w === null || typeof w !== 'object' || Array.isArray(w)) {
      throw new SvcError('MALFORMED', `writes[${index}] must be an object {"op": "put" | "append" | "claim", "field": ...}.`, at);
    }
    const { op, field, ...body } = w as Record<string, unknown>;
    if (op !== 'put' && op !== 'append' && op !== 'claim') {
      throw new SvcError('MALFORMED', `writes[${index}].op must be "put", "append" or "claim".`, at);
    }
    if (typeof field !== 'string' || field === '') {
      throw new SvcError('MALFORMED', `writes[${index}].field must be the name of a field.`, at);
    }
    if (op !== 'claim') {
      if (!('based_on' in body) && !('declare_no_premises' in body)) {
        if (env.based_on !== undefined) body.based_on = obj.based_on;
        else if (env.declare_no_premises !== undefined) body.declare_no_premises = obj.declare_no_premises;
      }
      if (!('evidence' in body) && obj.evidence !== undefined) body.evidence = obj.evidence;
    }
    if (!('invocation' in body) && obj.invocation !== undefined) body.invocation = obj.invocation;
    return { name: op, op: OPS[op], field, body };
  });
  return { writes, ttl: env.ttl_seconds };
}
