/**
 * The decision of a write after the record's lock (interface.md "Rejection order" 11–14 and
 * the resolve gate; decisions §3 fences; the "Task field lease" table), held equal across its
 * two texts while it moves into SQL (issue 32): random record states and requests go through
 * the TypeScript decision (the full write transaction, `path: 'ts'`) and the SQL one
 * (kslate_write, `path: 'sql'`), each on its own copy of the state; answers, history rows,
 * field rows and entries must be the same.
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
  | { op: 'append'; entry: { k: string }; evidence: string; based_on?: Premise[]; who: Who }
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
      { requiredKeys: ['op', 'entry', 'evidence', 'who'] },
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
      `insert into fields (record_id, class, name, kind, value, version, record_version, author, identity_strength, evidence,
                           based_on, invocation, updated_at, owner, lease_expires_at, bytes)
       values ($1, 'rules', $2, $3, $4::json, $5, $5, $6, 'shared-secret', $7, null, null, $8, $9, $10, 10)`,
      [id, name, kind, f.value === undefined || f.value === null ? null : JSON.stringify(f.value), f.version, author(f.author), f.evidence ?? null, at, f.owner ?? null, f.expires ?? null],
    );
  for (const [name, f] of Object.entries(s.fields)) await field(name, name === 's' ? 'soft' : 'versioned', f);
  if (s.entries > 0) {
    await field('n', 'append', { version: s.entries, author: 'carol' });
    await db.query(
      `insert into entries (record_id, field, seq, value, author, created_at, bytes)
       select $1, 'n', g, '{"k":"old"}', 'apikey:carol', $2, 10 from generate_series(1, $3::int) g`,
      [id, at, s.entries],
    );
  }
  if (s.job) {
    const expires = s.job.lease === 'none' ? null : new Date(at.getTime() + (s.job.lease === 'held' ? 3_600_000 : -3_600_000));
    await field('job', 'task', { version: s.job.version, author: s.job.owner, owner: s.job.lease === 'none' ? null : author(s.job.owner), expires });
  }
  for (const role of s.checkpoints) {
    await db.query(
      `insert into checkpoints (record_id, role, checkpoint_id, document, record_version, author) values ($1, $2, 1, '{}', 9, 'apikey:alice')`,
      [id, role],
    );
  }
}

type Answer = { ok: true; created: boolean; body: Record<string, unknown> } | { ok: false; code: string; message: string; body: Record<string, unknown> };

async function run(rid: string, state: State, r: Request, path: 'ts' | 'sql'): Promise<Answer> {
  const ctx = makeCtx(t.gw.services, identity(r.who), undefined);
  const json = (value: Record<string, unknown>) => ({ kind: 'json' as const, value: JSON.parse(JSON.stringify(value)) });
  try {
    let out: Outcome;
    if (r.op === 'put') {
      const { value, evidence } = r;
      const body = { value, expected_version: concrete(state, r.field, r.expected_version), evidence, based_on: premisesOf(state, r.based_on) };
      out = await put(ctx, { class: 'rules', id: rid, field: r.field, body: json(body) }, path);
    } else if (r.op === 'append') {
      const { entry, evidence } = r;
      out = await append(ctx, { class: 'rules', id: rid, field: 'n', body: json({ entry, evidence, based_on: premisesOf(state, r.based_on) }) }, path);
    } else {
      out = await claim(ctx, { class: 'rules', id: rid, field: 'job', body: json({ lease_seconds: r.lease_seconds }) });
    }
    // A new lease runs from the moment the lock was taken: the one thing two copies differ in.
    const { lease_expires_at, ...body } = out.body;
    return { ok: true, created: out.created ?? false, body: { ...body, ...(lease_expires_at ? { leased: true } : {}) } };
  } catch (e) {
    const err = e as { code: string; message: string; extra: Record<string, unknown> };
    if (typeof err.code !== 'string') throw e;
    return { ok: false, code: err.code, message: err.message, body: err.extra };
  }
}

/** Everything the write left on record `rid`, with what differs between two copies by nature (ids, clocks) left out. */
async function aftermath(rid: string) {
  const q = async (text: string) => (await db.query(text, [rid])).rows;
  return {
    record: await q(`select record_version from records where class = 'rules' and rid = $1`),
    fields: await q(`
      select f.name, f.kind, f.value::text, f.version, f.record_version, f.author, f.identity_strength, f.evidence,
             f.based_on, f.invocation::text, f.owner, f.lease_expires_at is not null as leased, f.lease_lapsed, f.bytes
      from fields f join records r on r.id = f.record_id where r.class = 'rules' and r.rid = $1 order by f.name`),
    entries: await q(`
      select e.field, e.seq, e.value::text, e.author, e.identity_strength, e.evidence, e.based_on, e.invocation::text, e.bytes
      from entries e join records r on r.id = e.record_id where r.class = 'rules' and r.rid = $1 order by e.seq`),
    history: await q(`
      select field, op, version, record_version, value::text, value_size, value_sha256, author, identity_strength, evidence,
             expected_version, based_on, invocation::text, outcome, bytes, tx is not null as logged
      from history where class = 'rules' and rid = $1 order by id`),
  };
}

const same = (a: unknown, ridA: string, ridB: string) => JSON.parse(JSON.stringify(a).replaceAll(ridA, ridB));

let n = 0;

describe('the decision after the lock', () => {
  test('TypeScript and SQL decide and apply every (state, request) alike', async () => {
    await fc.assert(
      fc.asyncProperty(stateArb, requestArb, async (state, req) => {
        const at = new Date();
        const ts = `ts-${++n}`;
        const sqlRid = `sq-${n}`;
        await seed(ts, state, at);
        await seed(sqlRid, state, at);
        const byTs = await run(ts, state, req, 'ts');
        const bySql = await run(sqlRid, state, req, 'sql');
        expect(same(bySql, sqlRid, ts), JSON.stringify({ state, req })).toEqual(byTs);
        expect(same(await aftermath(sqlRid), sqlRid, ts), JSON.stringify({ state, req })).toEqual(await aftermath(ts));
      }),
      { numRuns: 150 },
    );
  });
});
