/**
 * One rendering per fact of a written value (issue 32 item 5): a field of get, an entry of an
 * append field, and a change of watch show the same value, versions, author, identity
 * strength, evidence, premises, invocation and time as the write's history row — which
 * PostgreSQL alone renders (db/migrations/0008, 0014, 0025); get, query and watch render with
 * one text (handlers/pipeline.ts renderWritten). Random writes of every field kind through a real gateway; a reader who may not read one field
 * sees the premises on it left out everywhere alike.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TIME_ZONE_IS_UTC } from '../../handlers/format.js';
import { startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';
import { openWatch } from '../watch/sse.js';

const cls: ClassInput = {
  name: 'agree',
  spec: {
    fields: {
      v: { kind: 'versioned' },
      s: { kind: 'soft' },
      job: { kind: 'task', leaseSeconds: 300 },
      log: { kind: 'append' },
    },
    roles: {
      writer: { subjects: ['apikey:alice', 'apikey:carol'], read: ['*'], write: ['*'] },
      // Reads every field but s: premises on s are left out of what bob sees.
      partial: { subjects: ['apikey:bob'], read: ['v', 'job', 'log'], write: [] },
    },
  },
};

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([cls], { extraArgs: ['--watch-poll-interval', '20ms'] });
}, 120_000);
afterAll(async () => {
  await t?.close();
});

type Op =
  | { kind: 'put'; field: 'v' | 's'; who: string; value: unknown; evidence?: string; premises: ('v' | 's' | 'job')[]; invocation?: Record<string, unknown> }
  | { kind: 'claim'; who: string; lease: number }
  | { kind: 'append'; who: string; value: unknown; evidence?: string; premises: ('v' | 's' | 'job')[]; invocation?: Record<string, unknown> };

const noNul = (v: unknown) => !JSON.stringify(v).includes('\\u0000');
const value = fc.jsonValue({ maxDepth: 2 }).filter(noNul);
const evidence = fc.option(fc.string({ maxLength: 10 }).filter((s) => !s.includes('\0')), { nil: undefined });
const premises = fc.uniqueArray(fc.constantFrom<'v' | 's' | 'job'>('v', 's', 'job'), { maxLength: 3 });
const invocation = fc.option(fc.dictionary(fc.constantFrom('tool', 'run'), fc.string({ maxLength: 6 }).filter((s) => !s.includes('\0'))), { nil: undefined });
const who = fc.constantFrom('alice', 'carol');
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('put' as const), field: fc.constantFrom<'v' | 's'>('v', 's'), who, value, evidence, premises, invocation }),
  fc.record({ kind: fc.constant('claim' as const), who, lease: fc.constantFrom(0, 60) }),
  // An append field needs evidence (interface.md).
  fc.record({ kind: fc.constant('append' as const), who, value, evidence: fc.string({ minLength: 1, maxLength: 10 }).filter((s) => s.trim() !== '' && !s.includes('\0')), premises, invocation }),
);

const drop = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, x]) => x !== undefined));

let n = 0;
async function apply(id: string, ops: Op[]): Promise<void> {
  const versions: Record<string, number> = { v: 0, s: 0, job: 0, log: 0 };
  for (const o of ops) {
    const based_on = o.kind === 'claim' ? undefined : o.premises.map((f) => ({ field: f, version: versions[f] }));
    const r =
      o.kind === 'put'
        ? await t.call(o.who, 'PUT', `/v1/records/agree/${id}/fields/${o.field}`, drop({ value: o.value, expected_version: o.field === 'v' ? versions.v : undefined, evidence: o.evidence, based_on, invocation: o.invocation }))
        : o.kind === 'claim'
          ? await t.call(o.who, 'PUT', `/v1/records/agree/${id}/fields/job/claim`, { lease_seconds: o.lease })
          : await t.call(o.who, 'POST', `/v1/records/agree/${id}/fields/log/entries`, drop({ entry: o.value, evidence: o.evidence, based_on, invocation: o.invocation }));
    // A refusal (a claim on a lease someone else holds) writes no field; the rest must apply.
    if (r.status === 409 && o.kind === 'claim') continue;
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
    const field = o.kind === 'put' ? o.field : o.kind === 'claim' ? 'job' : 'log';
    versions[field] = o.kind === 'append' ? r.body.seq : r.body.version;
  }
}

/**
 * What a history row says of its write, under the names a get or a watch uses. A history row
 * leaves a JSON null value out (db/migrations/0008). Its time is the write's cut to the
 * millisecond, as get and watch show it (db/migrations/0025; before it history rounded).
 */
const fromHistory = (h: any, task: boolean) =>
  drop({
    value: task ? undefined : (h.value ?? null),
    version: h.version,
    author: h.author,
    identity_strength: h.identity_strength,
    evidence: h.evidence,
    based_on: h.based_on,
    invocation: h.invocation,
    at: h.created_at,
  });

/** `h` and `g` projections equal, the time to the byte. */
function same(g: Record<string, unknown>, h: Record<string, unknown>, what: string): void {
  expect(g, what).toEqual(h);
}
const fromField = (f: any, task: boolean) =>
  drop({ value: task ? undefined : f.value, version: f.version, author: f.author, identity_strength: f.identity_strength, evidence: f.evidence, based_on: f.based_on, invocation: f.invocation, at: f.updated_at });

async function views(who: string, id: string) {
  const all = await t.call(who, 'GET', `/v1/records/agree/${id}`);
  const hist = await t.call(who, 'GET', `/v1/records/agree/${id}/history`);
  expect(all.status).toBe(200);
  expect(hist.status).toBe(200);
  const applied = (hist.body.history as any[]).filter((h) => h.outcome === 'applied');
  const w = await openWatch(t.url, who, `/v1/records/agree/${id}/watch?from_record_version=0`);
  try {
    const events = await w.until(1 + applied.filter((h) => who !== 'bob' || h.field !== 's').length);
    return { fields: all.body.fields, applied, changes: events.filter((e) => e.event === 'change').map((e) => e.data) };
  } finally {
    w.close();
  }
}

describe('a written value renders alike in get, watch and history', () => {
  test.runIf(TIME_ZONE_IS_UTC)('for every field kind, reader and write', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 6 }), async (ops) => {
        const id = `a-${++n}`;
        await apply(id, ops);
        for (const reader of ['alice', 'bob']) {
          const { fields, applied, changes } = await views(reader, id);
          const newest = (field: string) => applied.find((h) => h.field === field);
          for (const name of ['v', 's', 'job']) {
            const h = newest(name);
            if (!h || (reader === 'bob' && name === 's')) {
              expect(fields[name], name).toBeUndefined();
              continue;
            }
            same(fromField(fields[name], name === 'job'), fromHistory(h, name === 'job'), `${reader} ${name}`);
          }
          for (const e of fields.log?.entries ?? []) {
            const h = applied.find((x) => x.field === 'log' && x.version === e.seq);
            same(fromField({ ...e, version: e.seq }, false), fromHistory(h, false), `${reader} log ${e.seq}`);
          }
          for (const c of changes) {
            const h = applied.find((x) => x.seq === c.seq);
            same(
              { ...fromField({ ...c, updated_at: c.created_at }, c.field === 'job'), record_version: c.record_version },
              { ...fromHistory(h, c.field === 'job'), record_version: h.record_version },
              `${reader} change ${c.seq}`,
            );
          }
          expect(changes.map((c) => c.seq).sort((a, b) => a - b), reader).toEqual(
            applied.filter((h) => reader !== 'bob' || h.field !== 's').map((h) => h.seq).sort((a, b) => a - b),
          );
        }
      }),
      { numRuns: 25 },
    );
  }, 240_000);
});
