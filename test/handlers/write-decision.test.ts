/**
 * The decision of a write after the record's lock (interface.md "Rejection order" 11–14 and
 * the resolve gate; decisions §3 fences; the "Task field lease" table), made by one SQL
 * statement per write kind (kslate_write, kslate_claim: migration 0010), checked against a
 * small reference model of those rules written here: random record states (laid down in the
 * tables directly, leases included) and requests go through the handlers, and the answer, the
 * history row and the record's fields and entries must be what the model says.
 *
 * Before the TypeScript decision was deleted (issue 32), the same generator held the SQL
 * decision equal to it, answer for answer and row for row.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { append } from '../../handlers/append.js';
import { claim } from '../../handlers/claim.js';
import type { Outcome } from '../../handlers/pipeline.js';
import { put } from '../../handlers/put.js';
import type { Identity } from '../../handlers/types.js';
import { makeCtx } from '../../runtime/request.js';
import { startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';

const rules: ClassInput = {
  name: 'rules',
  spec: {
    fields: {
      a: { kind: 'versioned', type: 'string' },
      b: { kind: 'versioned', requireEvidence: true },
      s: { kind: 'soft' },
      n: { kind: 'append' },
      job: { kind: 'task', leaseSeconds: 60 },
      status: { kind: 'versioned', type: 'string', enum: ['open', 'resolved'] },
    },
    roles: {
      worker: { subjects: ['apikey:alice', 'apikey:carol'], read: ['*'], write: ['*'] },
      lead: { subjects: ['apikey:bob'], read: ['*'], write: [] },
    },
    checkpoint: { sections: [], requiredForResolve: ['worker', 'lead'] },
  },
};

const VALUE_FIELDS = ['a', 'b', 's', 'status'] as const;
const ALL_FIELDS = ['a', 'b', 's', 'status', 'n', 'job'] as const;
type Who = 'alice' | 'carol';
const author = (w: Who) => `apikey:${w}`;
const identity = (w: Who): Identity => ({ author: author(w), provider: 'apikey', name: w, strength: 'shared-secret' });

// ---- the generator: a record's state under the lock and one request -------------------------

interface ValueField {
  version: number;
  value: string;
  author: Who;
  evidence: string | null;
}
interface State {
  exists: boolean;
  fields: Partial<Record<(typeof VALUE_FIELDS)[number], ValueField>>;
  /** Entries of the append field n (its version). */
  entries: number;
  job: { version: number; lease: 'none' | 'held' | 'expired'; owner: Who } | null;
  checkpoints: ('worker' | 'lead')[];
}

/** A version in a request: a number, or `current` for the version the state holds (most writes read first). */
type Version = number | 'current';
type Premise = { field: string; version: Version; kind?: 'fence' };
type Request =
  | { op: 'put'; field: (typeof VALUE_FIELDS)[number]; value: string; expected_version: Version; evidence?: string; based_on?: Premise[]; who: Who }
  | { op: 'append'; entry: { k: string }; evidence?: string; based_on?: Premise[]; who: Who }
  | { op: 'claim'; lease_seconds: number; who: Who };

const who = fc.constantFrom<Who>('alice', 'carol');
const version = fc.integer({ min: 0, max: 3 });
const requestVersion: fc.Arbitrary<Version> = fc.oneof(fc.constant('current' as const), version);
const valueField = fc.record({
  version: fc.integer({ min: 1, max: 3 }),
  value: fc.constantFrom('open', 'resolved', 'x'),
  author: who,
  evidence: fc.option(fc.constantFrom('seen', 'log'), { nil: null }),
});

const stateArb: fc.Arbitrary<State> = fc
  .record({
    exists: fc.boolean(),
    fields: fc.record(
      { a: valueField, b: valueField, s: valueField, status: valueField },
      { requiredKeys: [] },
    ),
    entries: fc.integer({ min: 0, max: 3 }),
    job: fc.option(fc.record({ version: fc.integer({ min: 1, max: 3 }), lease: fc.constantFrom('none', 'held', 'expired'), owner: who }), { nil: null }),
    checkpoints: fc.subarray(['worker', 'lead'] as ('worker' | 'lead')[]),
  })
  .map((s) => {
    // Anything on the record means the record exists.
    const any = Object.keys(s.fields).length > 0 || s.entries > 0 || s.job !== null || s.checkpoints.length > 0;
    return any ? { ...s, exists: true } : { ...s, fields: {}, entries: 0, job: null, checkpoints: [] };
  });

const premise: fc.Arbitrary<Premise> = fc.oneof(
  fc.record({ field: fc.constantFrom(...ALL_FIELDS), version: requestVersion }),
  fc.record({ field: fc.constant('job'), version: requestVersion, kind: fc.constant('fence' as const) }),
);
const basedOn = fc.option(fc.array(premise, { maxLength: 3 }), { nil: undefined });

const requestArb: fc.Arbitrary<Request> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record(
      {
        op: fc.constant('put' as const),
        field: fc.constantFrom(...VALUE_FIELDS),
        value: fc.constantFrom('open', 'resolved', 'resolved', 'y'),
        expected_version: requestVersion,
        evidence: fc.constantFrom('because'),
        based_on: basedOn,
        who,
      },
      { requiredKeys: ['op', 'field', 'value', 'who', 'expected_version'] },
    ),
  },
  {
    weight: 3,
    arbitrary: fc.record(
      { op: fc.constant('append' as const), entry: fc.record({ k: fc.constantFrom('e1', 'e2') }), evidence: fc.constant('seen'), based_on: basedOn, who },
      { requiredKeys: ['op', 'entry', 'who'] },
    ),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('claim' as const), lease_seconds: fc.constantFrom(0, 30), who }) },
);

/** The version `state` holds for `field` (0: never written). */
function versionOf(state: State, field: string): number {
  if (field === 'n') return state.entries;
  if (field === 'job') return state.job?.version ?? 0;
  return state.fields[field as (typeof VALUE_FIELDS)[number]]?.version ?? 0;
}
const concrete = (state: State, field: string, v: Version) => (v === 'current' ? versionOf(state, field) : v);
const premisesOf = (state: State, list: Premise[] | undefined) =>
  list?.map((p) => ({ ...p, version: concrete(state, p.field, p.version) }));

// ---- a state written twice, a request run on each copy ---------------------------------------

let t: TestGateway;
let db: pg.Client;

beforeAll(async () => {
  t = await startTestGateway([rules]);
  db = new pg.Client({ connectionString: t.db.url });
  await db.connect();
});
afterAll(async () => {
  await db?.end();
  await t?.close();
});

/** Lays `s` down as record `rid`, every time relative to the same instant `at`. */
async function seed(rid: string, s: State, at: Date): Promise<void> {
  if (!s.exists) return;
  const rec = await db.query<{ id: string }>(
    `insert into records (class, rid, record_version, log_tx) values ('rules', $1, 9, pg_current_xact_id()) returning id`,
    [rid],
  );
  const id = rec.rows[0].id;
  const field = (name: string, kind: string, f: { version: number; value?: string | null; author: Who; evidence?: string | null; owner?: string | null; expires?: Date | null }) =>
    db.query(
      `insert into fields (rid, record_id, class, name, kind, value, version, record_version, author, identity_strength, evidence,
                           based_on, invocation, updated_at, owner, lease_expires_at, bytes)
       values ($11, $1, 'rules', $2, $3, $4::json, $5, $5, $6, 'shared-secret', $7, null, null, $8, $9, $10, 10)`,
      [id, name, kind, f.value === undefined || f.value === null ? null : JSON.stringify(f.value), f.version, author(f.author), f.evidence ?? null, at, f.owner ?? null, f.expires ?? null, rid],
    );
  for (const [name, f] of Object.entries(s.fields)) await field(name, name === 's' ? 'soft' : 'versioned', f);
  if (s.entries > 0) {
    await field('n', 'append', { version: s.entries, author: 'carol' });
    await db.query(
      `insert into entries (rid, record_id, field, seq, value, author, created_at, bytes)
       select $4, $1::bigint, 'n', g, '{"k":"old"}', 'apikey:carol', $2, 10 from generate_series(1, $3::int) g`,
      [id, at, s.entries, rid],
    );
  }
  if (s.job) {
    const expires = s.job.lease === 'none' ? null : new Date(at.getTime() + (s.job.lease === 'held' ? 3_600_000 : -3_600_000));
    await field('job', 'task', { version: s.job.version, author: s.job.owner, owner: s.job.lease === 'none' ? null : author(s.job.owner), expires });
  }
  for (const role of s.checkpoints) {
    await db.query(
      `insert into checkpoints (rid, record_id, role, checkpoint_id, document, record_version, author) values ($3, $1, $2, 1, '{}', 9, 'apikey:alice')`,
      [id, role, rid],
    );
  }
}

type Answer = { ok: true; created: boolean; body: Record<string, unknown> } | { ok: false; code: string; message: string; body: Record<string, unknown> };

async function run(rid: string, state: State, r: Request): Promise<Answer> {
  const ctx = makeCtx(t.gw.services, identity(r.who), undefined);
  const json = (value: Record<string, unknown>) => ({ kind: 'json' as const, value: JSON.parse(JSON.stringify(value)) });
  try {
    let out: Outcome;
    if (r.op === 'put') {
      const { value, evidence } = r;
      const body = { value, expected_version: concrete(state, r.field, r.expected_version), evidence, based_on: premisesOf(state, r.based_on) };
      out = await put(ctx, { class: 'rules', id: rid, field: r.field, body: json(body) });
    } else if (r.op === 'append') {
      const { entry, evidence } = r;
      out = await append(ctx, { class: 'rules', id: rid, field: 'n', body: json({ entry, evidence, based_on: premisesOf(state, r.based_on) }) });
    } else {
      out = await claim(ctx, { class: 'rules', id: rid, field: 'job', body: json({ lease_seconds: r.lease_seconds }) });
    }
    return { ok: true, created: out.created ?? false, body: out.body };
  } catch (e) {
    const err = e as { code: string; message: string; extra: Record<string, unknown> };
    if (typeof err.code !== 'string') throw e;
    return { ok: false, code: err.code, message: err.message, body: err.extra };
  }
}

/** The record's rows as the test compares them (times left out: they are the database's). */
async function rows(rid: string) {
  const q = async (text: string) => (await db.query(text, [rid])).rows;
  return {
    record: (await q(`select record_version::int from records where class = 'rules' and rid = $1`))[0] ?? null,
    fields: await q(`
      select f.name, f.value, f.version::int, f.author, f.evidence, f.owner
      from fields f join records r on r.rid = f.rid and r.id = f.record_id where r.class = 'rules' and r.rid = $1 order by f.name`),
    entries: await q(`
      select e.seq::int, e.value, e.author from entries e join records r on r.rid = e.rid and r.id = e.record_id
      where r.class = 'rules' and r.rid = $1 order by e.seq`),
    history: await q(`select field, op, version::int, record_version::int, value, author, evidence, expected_version::int, outcome from history where class = 'rules' and rid = $1 order by id`),
  };
}

// ---- the reference model: the rules after the lock, as the spec states them -------------------

type Expected =
  | { ok: true; created: boolean; body: Record<string, unknown>; row: Record<string, unknown> }
  | { ok: false; code: string; body?: Record<string, unknown>; row: Record<string, unknown> | null; mentions?: string[] };

function model(state: State, r: Request, rid: string): Expected {
  const who = author(r.who);
  const recordVersion = state.exists ? 9 : null;
  const next = { record_version: state.exists ? 10 : 1 };
  const created = !state.exists;
  const job = state.job;
  const holder = job && job.lease === 'held' ? author(job.owner) : null;

  if (r.op === 'claim') {
    if (holder && holder !== who) {
      return { ok: false, code: 'HELD', body: { field: 'job', owner: holder, version: job!.version }, row: { op: 'claim', outcome: 'held', version: null, record_version: recordVersion } };
    }
    const previous = job && job.lease !== 'none' ? author(job.owner) : null;
    const op = r.lease_seconds === 0 ? 'release' : previous && previous !== who ? 'takeover' : 'claim';
    const version = (job?.version ?? 0) + 1;
    const body: Record<string, unknown> = { record: `rules/${rid}`, field: 'job', version, ...next };
    if (r.lease_seconds > 0) body.owner = who;
    if (op === 'takeover') body.took_over_from = previous;
    return { ok: true, created, body, row: { op, outcome: 'applied', version, ...next } };
  }

  const field = r.op === 'put' ? r.field : 'n';
  const value = r.op === 'put' ? r.value : r.entry;
  const cur = versionOf(state, field);
  const premises = premisesOf(state, r.based_on) ?? [];
  const expected = r.op === 'put' ? concrete(state, r.field, r.expected_version) : null;
  // What the history row records: a soft field takes no expected_version.
  const recorded = field === 's' ? null : expected;
  const refused = (code: string, outcome: string | null, body?: Record<string, unknown>, mentions?: string[]): Expected => ({
    ok: false,
    code,
    body,
    mentions,
    row: outcome === null ? null : { op: r.op, outcome, version: null, record_version: recordVersion, value, expected_version: recorded },
  });

  // Before the lock, in the rejection order: the value's type and enum, then evidence.
  if (field === 'status' && value !== 'open' && value !== 'resolved') return refused('MALFORMED', null);
  if ((field === 'b' || r.op === 'append') && !r.evidence) return refused('EVIDENCE_REQUIRED', 'evidence_required');
  // 13 STALE: versioned fields only.
  if (r.op === 'put' && field !== 's' && expected !== cur) {
    const f = state.fields[r.field];
    return refused('STALE', 'stale', { field, your_version: expected, current_version: cur, current_value: f?.value ?? null, current_author: f ? author(f.author) : null, current_evidence: f?.evidence ?? null });
  }
  // The resolve gate: every role named by requiredForResolve must have checkpointed.
  if (field === 'status' && value === 'resolved') {
    const missing = (['worker', 'lead'] as const).filter((role) => !state.checkpoints.includes(role));
    if (missing.length > 0) return refused('INVALID_CHECKPOINT', null, { field, record: `rules/${rid}` }, missing.map((m) => `"${m}"`));
  }
  // 14 STALE_PREMISE: a premise whose field moved, or a fence whose lease the writer does not hold.
  const moved = premises
    .filter((p) => versionOf(state, p.field) !== p.version || (p.kind === 'fence' && holder !== who))
    .map((p) => {
      const f = p.field === 'job' ? (job ? { author: job.owner, evidence: null } : null) : p.field === 'n' ? (state.entries > 0 ? { author: 'carol' as Who, evidence: null } : null) : state.fields[p.field as (typeof VALUE_FIELDS)[number]];
      return { field: p.field, your_version: p.version, current_version: versionOf(state, p.field), current_author: f ? author(f.author) : null, current_evidence: f?.evidence ?? null };
    });
  if (moved.length > 0) {
    const own = r.op === 'put' ? state.fields[r.field] : state.entries > 0 ? { author: 'carol' as Who } : undefined;
    return refused('STALE_PREMISE', 'stale_premise', { record: `rules/${rid}`, field, current_version: cur, current_author: own ? author(own.author) : null, moved });
  }
  const version = cur + 1;
  const body = r.op === 'put' ? { record: `rules/${rid}`, field, version, ...next } : { record: `rules/${rid}`, field, seq: version, ...next };
  return { ok: true, created, body, row: { op: r.op, outcome: 'applied', version, ...next, value, expected_version: recorded } };
}

let n = 0;

describe('the decision after the lock', () => {
  test('every (state, request): the answer, the history row and the record are what the rules say', async () => {
    await fc.assert(
      fc.asyncProperty(stateArb, requestArb, async (state, req) => {
        const rid = `m-${++n}`;
        const why = JSON.stringify({ state, req });
        await seed(rid, state, new Date());
        const before = await rows(rid);
        const got = await run(rid, state, req);
        const want = model(state, req, rid);
        const after = await rows(rid);
        expect(got.ok ? 'applied' : got.code, why).toBe(want.ok ? 'applied' : want.code);
        if (want.ok) {
          const { lease_expires_at: until, ...body } = got.body;
          expect(body, why).toEqual(want.body);
          expect(until !== undefined, why).toBe(want.body.owner !== undefined);
          expect(got.ok && got.created, why).toBe(want.created);
        } else {
          if (want.body) expect(got.body, why).toMatchObject(want.body);
          for (const m of want.mentions ?? []) expect((got as { message: string }).message, why).toContain(m);
        }
        // The history row of the attempt (none for MALFORMED and the resolve gate).
        const added = after.history.slice(before.history.length);
        if (want.row === null) expect(added, why).toEqual([]);
        else {
          expect(added, why).toHaveLength(1);
          expect(added[0], why).toMatchObject({ author: author(req.who), ...want.row });
        }
        // A rejection changes nothing else; an applied write changes its field (and the record) alone.
        const field = req.op === 'put' ? req.field : req.op === 'append' ? 'n' : 'job';
        if (!want.ok) {
          expect({ ...after, history: [] }, why).toEqual({ ...before, history: [] });
        } else {
          expect(after.record, why).toEqual({ record_version: want.body.record_version });
          expect(after.fields.filter((f) => f.name !== field), why).toEqual(before.fields.filter((f) => f.name !== field));
          expect(after.fields.find((f) => f.name === field), why).toMatchObject({ version: want.row.version, author: author(req.who) });
          const newEntries = after.entries.slice(before.entries.length);
          expect(newEntries, why).toEqual(req.op === 'append' ? [{ seq: want.row.version, value: req.entry, author: author(req.who) }] : []);
        }
      }),
      { numRuns: 300 },
    );
  });
});
