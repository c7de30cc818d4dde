/**
 * The rejection order of the specification, as one explicit pipeline shared by every
 * operation. Reads use steps 2–7; writes run `runWrite`, whose checks from HELD onward (other
 * than EVIDENCE_REQUIRED, which needs nothing of the record) are decided under the record's
 * row lock by one SQL statement (kslate_write, kslate_claim: migration 0010).
 *
 *  1 UNAUTHENTICATED (transport, before any handler)   8 WEAK_IDENTITY
 *  2 NOT_FOUND (class)                                  9 NOT_WRITABLE / NOT_APPEND_FIELD / NOT_TASK_FIELD
 *  3 NO_ROLE                                           10 IDENTITY_MISMATCH
 *  4 CLASS_GONE (writes)                                  MALFORMED body, premises' fields, type, enum
 *  5 MALFORMED (record id)                             11 HELD            ┐
 *  6 UNKNOWN_FIELD                                     12 EVIDENCE_REQUIRED│ in one statement
 *  7 SCOPE_DENIED                                      13 STALE            │ under the row lock
 *                                                         INVALID_CHECKPOINT (gate)
 *                                                      14 STALE_PREMISE   ┘
 */
import type { FieldRow, HistoryInsert, HistoryValue, StoredPremise, TransactApplied, TransactResult, TransactWrite, WriteRequest, WriteResult } from '../db/port.js';
import { lenientObject, textProblem, type RawBody } from './body.js';
import { rolesOf, type CompiledClass, type CompiledRole } from './class-registry.js';
import type { Ctx } from './context.js';
import { SvcError } from './errors.js';
import { byteLength, KIB, sha256Hex } from './format.js';
import { strengthAtLeast } from './strength.js';
import { inferPremises, INFERENCE_WINDOW_SECONDS, recordReads } from './inference.js';
import type { FieldDef, Strength } from './types.js';
import { fieldRelaxed, parseRetention } from './class-schema.js';
import type { WatchStream } from './watch-feed.js';

/**
 * What a handler returns; transports turn it into their own response (HTTP: 201 when
 * `created`, else 200; gRPC: the `created` flag of the result message; MCP: the body).
 */
export interface Outcome {
  /** The write created the record. */
  created?: boolean;
  body: Record<string, unknown>;
  /**
   * The body already as JSON text (history: rows stored rendered), whole or in parts that
   * follow one another (so a large page is never copied into one string). HTTP sends it as it
   * is; `body` is then a getter that parses it, once, for the transports that need an object.
   */
  json?: string | readonly string[];
  /** A watch: the stream to write once the checks passed (handlers/watch.ts); `body` is then empty. */
  stream?: WatchStream;
  /** The answer stored under the request's idempotency key, replayed (handlers/write-once.ts). */
  replayed?: boolean;
  /** What a dry run would answer; nothing was written. */
  dryRun?: boolean;
}

/** An outcome whose body is JSON text: sent as is over HTTP, parsed on first use of `body`. */
export function jsonOutcome(json: string | readonly string[]): Outcome {
  let body: Record<string, unknown> | undefined;
  return {
    json,
    get body() {
      return (body ??= JSON.parse(jsonText(json)) as Record<string, unknown>);
    },
  };
}

/** An outcome's JSON text as one string. */
export function jsonText(json: string | readonly string[]): string {
  return typeof json === 'string' ? json : json.join('');
}

/** The caller's standing in a class after steps 2–4. */
export interface Access {
  cls: CompiledClass;
  roles: CompiledRole[];
  /** `<class>/<id>` when the request names a record. */
  record?: string;
}

export const MAX_ID_BYTES = 256;

/** The metric label of a class or field the request named but the class registry does not know. */
export const UNKNOWN_LABEL = '_unknown';

// ---- steps 2–4 -------------------------------------------------------------------------

export async function authorize(
  ctx: Ctx,
  className: string,
  mode: 'read' | 'write',
  id?: string,
): Promise<Access> {
  const record = id === undefined ? undefined : `${className}/${id}`;
  const where = record ? { record } : { class: className };
  const cls = await ctx.classes.get(className);
  // Metric labels take only names the class registry knows (a URL could name anything).
  if (cls) ctx.trace.class = cls.name;
  if (!cls) throw new SvcError('NOT_FOUND', `No class named "${className}"; GET /v1/classes lists the classes you can use.`, where);
  const roles = rolesOf(cls, ctx.identity.author);
  // NO_ROLE tells nothing about the class (no fields, no roles).
  if (roles.length === 0) {
    throw new SvcError('NO_ROLE', `${ctx.identity.author} has no role in class "${className}"; ask its owner to add you to a role.`, where);
  }
  ctx.trace.role = roles.map((r) => r.name).join(',');
  if (mode === 'write' && cls.gone) {
    throw new SvcError('CLASS_GONE', `Class "${className}" has been deleted; its records can still be read but not written.`, where);
  }
  return { cls, roles, record };
}

// ---- parameters -----------------------------------------------------------------------

/**
 * Query parameters (MCP: arguments) as sent: an operation refuses one it does not take, and
 * one sent twice, rather than ignore it silently. Checked after the authorization checks.
 */
export function checkParams(sent: readonly string[] | undefined, takes: readonly string[], where: Record<string, unknown>, what: string): void {
  if (!sent) return;
  const seen = new Set<string>();
  for (const name of sent) {
    const shown = JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);
    if (!takes.includes(name)) {
      const list = takes.length > 0 ? `it takes ${takes.join(', ')}` : 'it takes none';
      throw new SvcError('MALFORMED', `Unknown parameter ${shown} for ${what}; ${list}.`, where);
    }
    if (seen.has(name)) throw new SvcError('MALFORMED', `Parameter ${shown} is given more than once; send it once.`, where);
    seen.add(name);
  }
}

// ---- step 5 --------------------------------------------------------------------------

export function checkRecordId(access: Access, id: string): void {
  const where = { record: access.record };
  if (id.length === 0) throw new SvcError('MALFORMED', 'The record id is empty; name a record as <class>/<id>.', where);
  if (textProblem(id)) throw new SvcError('MALFORMED', `The record id ${textProblem(id)}.`, where);
  if (id.includes('/')) throw new SvcError('MALFORMED', 'A record id may not contain "/".', where);
  if (byteLength(id) > MAX_ID_BYTES) {
    throw new SvcError('MALFORMED', `The record id is longer than ${MAX_ID_BYTES} bytes.`, where);
  }
  const re = access.cls.idPattern;
  if (re && !re.test(id)) {
    throw new SvcError('MALFORMED', `The record id "${id}" does not match the class idPattern ${access.cls.spec.idPattern}.`, where);
  }
}

// ---- step 6 ----------------------------------------------------------------------------

export function resolveField(access: Access, name: string): FieldDef {
  const def = access.cls.fields.get(name);
  if (!def) {
    throw new SvcError(
      'UNKNOWN_FIELD',
      `Class "${access.cls.name}" has no field "${name}"; GET /v1/classes/${access.cls.name} lists its fields.`,
      { record: access.record, field: name },
    );
  }
  return def;
}

// ---- step 7 ----------------------------------------------------------------------------

export function canRead(access: Access, field: string): boolean {
  return access.roles.some((r) => r.readAll || r.read.has(field));
}

export function canWrite(access: Access, field: string): boolean {
  return access.roles.some((r) => r.writeAll || r.write.has(field));
}

/** One of the caller's roles reads every field ('*'): every premise shows to it. */
export function readsEveryField(access: Access): boolean {
  return access.roles.some((r) => r.readAll);
}

/** Every field the caller's roles may read, in class order. */
export function readableFields(access: Access): string[] {
  return [...access.cls.fields.keys()].filter((f) => canRead(access, f));
}

export function requireReadable(access: Access, field: string): void {
  if (!canRead(access, field)) {
    throw new SvcError('SCOPE_DENIED', `Your role in class "${access.cls.name}" may not read field "${field}".`, {
      record: access.record,
      field,
    });
  }
}

// ---- step 8 ----------------------------------------------------------------------------

/** The class floor (no `field` in the body) then the field's own floor. */
export function strengthRejection(ctx: Ctx, access: Access, field: string | null, def: FieldDef | null): SvcError | null {
  const presented = ctx.identity.strength;
  const floor = access.cls.spec.minIdentityStrength;
  if (floor && !strengthAtLeast(presented, floor)) {
    return weak(access, floor, presented, null);
  }
  if (field && def?.minIdentityStrength && !strengthAtLeast(presented, def.minIdentityStrength)) {
    return weak(access, def.minIdentityStrength, presented, field);
  }
  return null;
}

function weak(access: Access, required: Strength, presented: Strength, field: string | null): SvcError {
  const target = field ? `field "${field}"` : `class "${access.cls.name}"`;
  return new SvcError(
    'WEAK_IDENTITY',
    `Writes to ${target} need an identity of strength ${required} or stronger; yours is ${presented}. Use a stronger credential (e.g. a service-account token).`,
    { record: access.record, ...(field ? { field } : {}), required, presented },
  );
}

// ---- step 10 ---------------------------------------------------------------------------

export const MAX_SCOPE_BYTES = 256;

/**
 * IDENTITY_MISMATCH (decisions §2): a scope belongs to the first identity that uses it while
 * it stays in use within the inference window. The body never names the other identity.
 */
export async function scopeMismatch(ctx: Ctx, access: Access, field: string | null): Promise<SvcError | null> {
  if (ctx.scope === undefined) return null;
  const where = { record: access.record, ...(field ? { field } : {}) };
  if (ctx.scope === '' || byteLength(ctx.scope) > MAX_SCOPE_BYTES || textProblem(ctx.scope)) {
    return new SvcError('MALFORMED', `X-Svc-Scope must be 1 to ${MAX_SCOPE_BYTES} bytes of text.`, where);
  }
  const owner = await ctx.db.claimScope(ctx.scope, ctx.identity.author, INFERENCE_WINDOW_SECONDS);
  if (owner === ctx.identity.author) return null;
  return new SvcError(
    'IDENTITY_MISMATCH',
    'This X-Svc-Scope is in use by another identity; use a scope of your own (e.g. a fresh UUID per agent run).',
    where,
  );
}

/** Step 10 for reads and checkpoints: throws IDENTITY_MISMATCH (no history row). */
export async function checkScopeOwner(ctx: Ctx, access: Access, field: string | null): Promise<void> {
  const err = await scopeMismatch(ctx, access, field);
  if (err) throw err;
}

// ---- the write pipeline ------------------------------------------------------------------

/** What each write operation plugs into the shared pipeline. */
export interface WriteOp<B> {
  op: 'put' | 'append' | 'claim';
  /** Step 9: the field's kind must suit the operation. */
  kindError(access: Access, field: string, def: FieldDef): SvcError | null;
  /** MALFORMED body shape: runs after step 10, where the body is first needed. */
  parse(raw: RawBody, access: Access, field: string, def: FieldDef): B;
  /** Type and enum of the value (put, append): after the premises' fields are resolved. */
  checkValue?(b: B, access: Access, field: string, def: FieldDef): void;
  /** What a rejection's history row records from a body that may be unparseable. */
  lenient(body: Record<string, unknown>): WriteFacts;
  /** What the parsed body gives the evidence check and an EVIDENCE_REQUIRED history row. */
  facts(b: B): WriteFacts;
  /** Explicit premises; null when the body has no `based_on` key (then inference may apply). */
  premises(b: B): StoredPremise[] | null;
  /** Step 12: `class` = when the class or field says requireEvidence; `always` (append). */
  needsEvidence: 'class' | 'always' | 'never';
  /**
   * Everything from the lock on, in one database call that decides under the record's lock
   * and applies, or refuses writing the rejection's history row (kslate_write, kslate_claim),
   * turned into the answer.
   */
  write(b: B, t: WriteTarget): Promise<Outcome>;
  /** In a transaction (handlers/transaction.ts): what kslate_transact needs of this write. */
  transactWrite(b: B, t: WriteTarget): Omit<TransactWrite, 'kept'>;
  /** In a transaction: the error this write alone would get for a decision under the lock. */
  refusal(b: B, t: WriteTarget, d: Extract<TransactResult, { outcome: 'rejected' }>['decision']): SvcError;
  /** In a transaction: this write's part of the answer (the single write's body without record and record_version). */
  answer(t: WriteTarget, w: TransactApplied): Record<string, unknown>;
}

/** Where a write goes, once every check before the lock has passed. */
export interface WriteTarget {
  ctx: Ctx;
  access: Access;
  id: string;
  field: string;
  def: FieldDef;
  /** The premises to check under the lock: explicit, or inferred from the scope's reads. */
  premises: StoredPremise[];
  /** What the write stores as its premises (explicit or inferred); null when none. */
  basedOn: StoredPremise[] | null;
}

/** What a history row records about a write attempt. */
export interface WriteFacts {
  value?: unknown;
  hasValue: boolean;
  evidence?: string | null;
  expected_version?: number | null;
  based_on?: StoredPremise[] | null;
  invocation?: Record<string, unknown> | null;
}

export interface WriteInput {
  className: string;
  id: string;
  field: string;
  body: RawBody;
  /** Query parameters sent (writes take none). */
  params?: readonly string[];
}

export async function runWrite<B>(ctx: Ctx, input: WriteInput, op: WriteOp<B>): Promise<Outcome> {
  const { className, id, field } = input;
  const access = await authorize(ctx, className, 'write', id); // 2–4
  checkRecordId(access, id); // 5
  const p = await prepareWrite(ctx, access, id, field, input.body, op, {
    params: input.params,
    mismatch: () => scopeMismatch(ctx, access, field),
    infer: async () =>
      (await inferPremises(ctx, className, id, field)).filter((q) => access.cls.fields.has(q.field) && canRead(access, q.field)),
  });
  if (!p.ok) {
    // A rejection decided before the lock leaves its history row (scope, identity, evidence).
    if (p.outcome !== null) await ctx.db.insertRejection(await historyRow(ctx, className, id, field, op.op, p.outcome, p.facts));
    throw p.error;
  }
  // 13, the resolve gate and 14 (a claim: 11) under the record's lock, in one statement that
  // applies the write or writes the rejection's history row.
  const result = await op.write(p.b, p.t);
  await recordOwnWrite(ctx, className, id, field, op.op, result);
  return result;
}

/** A write that passed every check before the lock, or the first check it failed. */
export type Prepared<B> =
  | { ok: true; b: B; t: WriteTarget; facts: WriteFacts }
  | {
      ok: false;
      error: SvcError;
      /** The history outcome of the rejection; null when it leaves no history row (MALFORMED, UNKNOWN_FIELD, kind). */
      outcome: string | null;
      /** What the rejection's history row records. */
      facts: WriteFacts;
    };

/** What a single write and a write inside a transaction (handlers/transaction.ts) do differently before the lock. */
export interface PrepareHooks {
  /** Query parameters sent (a transaction checks its own once). */
  params?: readonly string[];
  /** Step 10 (a transaction asks once for all its writes). */
  mismatch(): Promise<SvcError | null>;
  /** The premises inferred from the scope's reads when the body has no `based_on`. */
  infer(): Promise<StoredPremise[]>;
}

/**
 * Steps 6–12 of one write, in the order of the specification: every check that needs nothing
 * of the record's state. The one text of these rules for put, append, claim, alone or in a
 * transaction. Any SvcError a check raises is returned, with whether it leaves a history row.
 */
export async function prepareWrite<B>(
  ctx: Ctx,
  access: Access,
  id: string,
  field: string,
  body: RawBody,
  op: WriteOp<B>,
  hooks: PrepareHooks,
): Promise<Prepared<B>> {
  const refused = (error: SvcError, outcome: string | null, facts?: WriteFacts): Prepared<B> => ({
    ok: false,
    error,
    outcome,
    facts: facts ?? op.lenient(lenientObject(body)),
  });
  try {
    ctx.trace.field = UNKNOWN_LABEL;
    const def = resolveField(access, field); // 6
    ctx.trace.field = field;

    if (!canWrite(access, field)) {
      // 7: a write outside the role leaves a history row, then SCOPE_DENIED.
      return refused(
        new SvcError('SCOPE_DENIED', `Your role in class "${access.cls.name}" may not write field "${field}".`, {
          record: access.record,
          field,
        }),
        'scope_denied',
      );
    }
    const weakErr = strengthRejection(ctx, access, field, def); // 8
    if (weakErr) return refused(weakErr, 'weak_identity');

    const kindErr = op.kindError(access, field, def); // 9
    if (kindErr) return refused(kindErr, null);

    const mismatch = await hooks.mismatch(); // 10
    if (mismatch) return refused(mismatch, mismatch.code === 'MALFORMED' ? null : 'identity_mismatch');

    checkParams(hooks.params, [], { record: access.record, field }, `${op.op}`); // MALFORMED parameters
    const b = op.parse(body, access, field, def); // MALFORMED body
    const explicit = op.premises(b);
    for (const p of explicit ?? []) {
      // decisions §3: a premise on an unknown field is UNKNOWN_FIELD, on an unreadable one SCOPE_DENIED.
      const pdef = resolveField(access, p.field);
      requireReadable(access, p.field);
      if (p.kind === 'fence' && pdef.kind !== 'task') {
        throw new SvcError('MALFORMED', `A fence premise must name a task field; "${p.field}" is ${pdef.kind}.`, {
          record: access.record,
          field,
        });
      }
    }
    op.checkValue?.(b, access, field, def); // type and enum

    // No `based_on` key: premises are inferred from this scope's reads (put and append only).
    const premises = explicit ?? (op.op === 'claim' ? [] : await hooks.infer());
    const basedOn = explicit ?? (premises.length > 0 ? premises : null);
    const facts: WriteFacts = { ...op.facts(b), based_on: basedOn };

    const wantsEvidence =
      op.needsEvidence === 'always' || (op.needsEvidence === 'class' && (access.cls.spec.requireEvidence || def.requireEvidence));
    const evidenceMissing = wantsEvidence && (typeof facts.evidence !== 'string' || facts.evidence.trim() === '');

    // 11 HELD is claim's alone and decided in its statement; 12 needs nothing of the record.
    if (evidenceMissing) return refused(evidenceError(access, field), 'evidence_required', facts);
    return { ok: true, b, t: { ctx, access, id, field, def, premises, basedOn }, facts };
  } catch (e) {
    if (e instanceof SvcError) return refused(e, null);
    throw e;
  }
}

/** The writer knows the version it just wrote: later inferred premises start from it. */
async function recordOwnWrite(ctx: Ctx, className: string, id: string, field: string, op: WriteOp<unknown>['op'], result: Outcome): Promise<void> {
  const written = op === 'append' ? result.body.seq : result.body.version;
  if (op !== 'claim' && typeof written === 'number') {
    await recordReads(ctx, className, [{ rid: id, field, version: written }]);
  }
}

function evidenceError(access: Access, field: string): SvcError {
  return new SvcError(
    'EVIDENCE_REQUIRED',
    `Writes to field "${field}" of class "${access.cls.name}" need \`evidence\`: say what the value is based on.`,
    { record: access.record, field },
  );
}

/** How a write operation answers the rejections only it can meet (put: STALE and the resolve gate). */
export interface OwnRejections {
  stale?(r: Extract<WriteResult, { outcome: 'stale' }>): SvcError;
  gate?(missing: string[]): SvcError;
}

/**
 * `ttl_seconds` within the class's maxTtl (issue 37): MALFORMED naming the bound otherwise.
 * The one place the bound is judged (put, append and transactions call it).
 */
export function boundTtl(access: Access, ttl: number | undefined, where: Record<string, unknown>): number | null {
  if (ttl === undefined) return null;
  const max = access.cls.spec.maxTtl;
  const maxMs = max === undefined ? null : parseRetention(max);
  if (maxMs !== null && ttl * 1000 > maxMs) {
    throw new SvcError(
      'MALFORMED',
      `ttl_seconds ${ttl} is longer than class "${access.cls.name}" allows (maxTtl ${max} = ${Math.floor(maxMs / 1000)} seconds).`,
      where,
    );
  }
  return ttl;
}

/**
 * A put or append decided and applied under the record's lock in one round trip
 * (`Db.writeField`): the applied versions, or the rejection thrown as the spec's error (its
 * history row already written by the same statement).
 */
export async function writeField(
  t: WriteTarget,
  w: Pick<WriteRequest, 'kind' | 'op' | 'value' | 'evidence' | 'invocation' | 'expectVersion' | 'expected_version' | 'requiredCheckpoints' | 'ttl_seconds'>,
  own: OwnRejections,
): Promise<{ version: number; record_version: number; created: boolean; expires_at?: Date | null }> {
  const r = await t.ctx.db.writeField({
    class: t.access.cls.name,
    rid: t.id,
    field: t.field,
    author: t.ctx.identity.author,
    identity_strength: t.ctx.identity.strength,
    based_on: t.basedOn,
    premises: t.premises,
    relaxed: fieldRelaxed(t.access.cls.spec, t.def),
    ...w,
  });
  switch (r.outcome) {
    case 'applied':
      return r;
    case 'stale':
      throw own.stale!(r);
    case 'invalid_checkpoint':
      throw own.gate!(r.missing);
    case 'stale_premise':
      throw premiseError(t, r);
  }
}

/** 14 STALE_PREMISE: the premises that moved since the writer read them (a fence: or its lease is gone). */
export function premiseError(t: Pick<WriteTarget, 'access' | 'field' | 'premises'>, r: Extract<WriteResult, { outcome: 'stale_premise' }>): SvcError {
  const { moved } = r;
  return new SvcError(
    'STALE_PREMISE',
    `The write rests on ${moved.map((m) => `"${m.field}"`).join(', ')}, which moved since you read ${moved.length > 1 ? 'them' : 'it'}${t.premises.some((p) => p.kind === 'fence') ? ' (or your lease on a fence premise is gone)' : ''}; re-read the record and decide again.`,
    {
      record: t.access.record,
      field: t.field,
      current_version: r.current_version,
      current_author: r.current_author,
      moved,
    },
  );
}

/**
 * The history row of a rejection decided in the gateway (scope, identity, evidence): the value
 * kept up to 64 KiB, then its size and SHA-256. (STALE and STALE_PREMISE rows, which keep the
 * whole value, are written by the statement that decides them.)
 */
export async function historyRow(
  ctx: Ctx,
  cls: string,
  rid: string,
  field: string,
  op: HistoryInsert['op'],
  outcome: string,
  facts: WriteFacts,
): Promise<HistoryInsert> {
  const value = await keptValue(facts);
  return {
    class: cls,
    rid,
    field,
    op,
    outcome,
    value,
    author: ctx.identity.author,
    identity_strength: ctx.identity.strength,
    evidence: typeof facts.evidence === 'string' ? facts.evidence : null,
    expected_version: typeof facts.expected_version === 'number' ? facts.expected_version : null,
    based_on: facts.based_on ?? null,
    invocation: facts.invocation ?? null,
  };
}

/** The value a refused write's history row keeps: up to 64 KiB whole, then its size and SHA-256. */
export async function keptValue(facts: WriteFacts): Promise<HistoryValue> {
  if (!facts.hasValue) return { kind: 'none' };
  const text = JSON.stringify(facts.value);
  const size = byteLength(text);
  return size > 64 * KIB ? { kind: 'digest', size, sha256: await sha256Hex(text) } : { kind: 'whole', value: facts.value };
}

/**
 * Premises as a caller may see them: those naming fields its role may not read are left out
 * (their versions are metadata of fields it cannot see). A list that had only such premises
 * is left out whole; an empty list (declared: rests on nothing) stays.
 */
export function visiblePremises(
  list: StoredPremise[] | null,
  readable: (field: string) => boolean,
): StoredPremise[] | null {
  if (!list || list.length === 0) return list;
  const seen = list.filter((p) => readable(p.field));
  return seen.length === list.length ? list : seen.length > 0 ? seen : null;
}

/** A written value's provenance as a row stores it (a field, an entry, a change). */
interface Written {
  author: string | null;
  identity_strength: string | null;
  evidence: string | null;
  based_on: StoredPremise[] | null;
  invocation: Record<string, unknown> | null;
}

/**
 * Where the walk of a rendered object's keys goes, in order: an object (ObjectSink: query,
 * watch, the answers of writes) or JSON text (TextSink: get). The rules of which keys appear
 * and in what order are written once, in the walks below (writtenBy, writtenOn, walkWritten,
 * walkField); a sink only decides how a key is written down.
 */
export interface KeySink<R> {
  /** A key and its value. */
  put(key: string, v: unknown): void;
  /** A key and its value given as JSON text (a value as stored: FieldRow.valueText). */
  putJson(key: string, json: string): void;
  /** A key and a list of objects walked into sinks of this kind (`sub`). */
  putList(key: string, items: R[]): void;
  /** A new empty sink of this kind, for an object inside this one. */
  sub(): KeySink<R>;
  end(): R;
}

/** The walk as an object: every key set, as renderField always made it. */
export class ObjectSink implements KeySink<Record<string, unknown>> {
  private out: Record<string, unknown> = {};
  put(key: string, v: unknown): void {
    this.out[key] = v;
  }
  putJson(key: string, json: string): void {
    this.out[key] = JSON.parse(json);
  }
  putList(key: string, items: Record<string, unknown>[]): void {
    this.out[key] = items;
  }
  sub(): ObjectSink {
    return new ObjectSink();
  }
  end(): Record<string, unknown> {
    return this.out;
  }
}

/**
 * The walk as JSON text, byte for byte JSON.stringify of ObjectSink's object (keys are the
 * API's own names, which need no escaping; a key whose value is undefined is left out as
 * JSON.stringify leaves it out). test/handlers/render-text.test.ts holds the two equal.
 */
export class TextSink implements KeySink<string> {
  private s = '';
  private key(key: string): string {
    return this.s === '' ? `{"${key}":` : `,"${key}":`;
  }
  put(key: string, v: unknown): void {
    if (v === undefined) return;
    this.s += this.key(key) + (typeof v === 'number' && Number.isFinite(v) ? `${v}` : JSON.stringify(v));
  }
  putJson(key: string, json: string): void {
    this.s += this.key(key) + json;
  }
  putList(key: string, items: string[]): void {
    this.s += `${this.key(key)}[${items.join(',')}]`;
  }
  sub(): TextSink {
    return new TextSink();
  }
  end(): string {
    return this.s === '' ? '{}' : `${this.s}}`;
  }
}

/**
 * Who wrote a value, as every object of the API built here shows it (a field of get and
 * query, an entry, a change of watch): `author`, `identity_strength`, `evidence`, in that
 * order, each left out when absent. This is the one rendering of a field, an entry and a
 * change; history rows are rendered by PostgreSQL alone (db/migrations/0008, 0014, 0025), and
 * test/handlers/render-agree.test.ts holds the two to one another.
 */
function writtenBy<R>(out: KeySink<R>, r: Written): void {
  if (r.author) out.put('author', r.author);
  if (r.identity_strength) out.put('identity_strength', r.identity_strength);
  if (r.evidence !== null) out.put('evidence', r.evidence);
}

/** What a written value rests on: the premises the reader may see (visiblePremises), then `invocation`. */
function writtenOn<R>(out: KeySink<R>, r: Written, readable: (field: string) => boolean): void {
  const basedOn = visiblePremises(r.based_on, readable);
  if (basedOn) out.put('based_on', basedOn);
  if (r.invocation) out.put('invocation', r.invocation);
}

/**
 * A written value as a reader sees it (a field of get and query, a change of watch after its
 * own keys): a task field shows no value (its write is the lease), then `version` when given,
 * who wrote it and on what, and when (`at` under `timeKey`). The value goes as its stored
 * JSON text when the row has it (`valueText`).
 */
function walkWritten<R>(
  out: KeySink<R>,
  kind: string,
  r: Written & { value: unknown; valueText?: string },
  version: number | undefined,
  timeKey: 'updated_at' | 'created_at',
  at: string,
  readable: (field: string) => boolean,
): void {
  if (kind !== 'task') {
    if (r.valueText !== undefined) out.putJson('value', r.valueText);
    else out.put('value', r.value);
  }
  if (version !== undefined) out.put('version', version);
  writtenBy(out, r);
  writtenOn(out, r, readable);
  out.put(timeKey, at);
}

/**
 * A written value as a reader sees it (a change of watch after its own keys): walkWritten's
 * object, `versions` (watch: none) where walkWritten writes `version`.
 */
export function renderWritten(
  kind: string,
  r: Written & { value: unknown },
  versions: { version?: number },
  timeKey: 'updated_at' | 'created_at',
  at: string,
  readable: (field: string) => boolean,
): Record<string, unknown> {
  const out = new ObjectSink();
  walkWritten(out, kind, r, versions.version, timeKey, at, readable);
  return out.end();
}

/**
 * A field value as a reader sees it (get, query), walked into `out`; premises only on fields
 * `readable` allows. The one text of a field's rendering rules.
 */
export function walkField<R>(out: KeySink<R>, f: FieldRow, fmt: (d: Date) => string, readable: (field: string) => boolean): R {
  if (f.kind === 'append') {
    out.put('version', f.version);
    const entries: R[] = [];
    for (const e of f.entries ?? []) {
      const o = out.sub();
      o.put('seq', e.seq);
      o.put('value', e.value);
      writtenBy(o, e);
      o.put('updated_at', fmt(e.created_at));
      writtenOn(o, e, readable);
      entries.push(o.end());
    }
    out.putList('entries', entries);
    return out.end();
  }
  walkWritten(out, f.kind, f, f.version, 'updated_at', fmt(f.updated_at), readable);
  if (f.kind === 'task' && f.owner && f.lease_held) {
    // Owner and expiry only while someone holds the lease (database clock).
    out.put('owner', f.owner);
    if (f.lease_expires_at) out.put('lease_expires_at', fmt(f.lease_expires_at));
  }
  // decisions §5: a lease that expired and nobody reclaimed shows as lapsed until claimed.
  if (f.kind === 'task' && (f.lease_lapsed || (f.owner && !f.lease_held))) out.put('lease_lapsed', true);
  return out.end();
}

/** The wire shape of a field value (get, query) as an object; premises only on fields `readable` allows. */
export function renderField(f: FieldRow, fmt: (d: Date) => string, readable: (field: string) => boolean): Record<string, unknown> {
  return walkField(new ObjectSink(), f, fmt, readable);
}

/**
 * A field as JSON text (get): the same walk as renderField, written as text. When the store
 * gave the value as its stored JSON text (FieldRow.valueText) it goes into the text as it is,
 * neither parsed nor re-serialised.
 */
export function fieldJson(f: FieldRow, fmt: (d: Date) => string, readable: (field: string) => boolean): string {
  return walkField(new TextSink(), f, fmt, readable);
}
