/**
 * Seeded random requests for the fuzz tests (issue 10): for every operation, argument sets in
 * MCP tool shape (decisions §7) mixing well-formed values with junk — wrong types, huge and
 * non-finite numbers, unstorable text, deep nesting, unknown keys, odd ids — so that each
 * transport can send the same cases. The same seed gives the same cases: a failure names
 * its seed and index, and `fc.sample(opCases(op), { seed, numRuns })[index]` brings it back.
 */
import fc from 'fast-check';
import type { Op } from '../transports/clients.js';

export const OPS: readonly Op[] = ['get', 'put', 'append', 'claim', 'checkpointSave', 'checkpointLoad', 'query'];

/** Cases per operation and transport (`KSLATE_FUZZ_RUNS` overrides). */
export const RUNS = Number(process.env.KSLATE_FUZZ_RUNS ?? 2000);
/** The run's seed (`KSLATE_FUZZ_SEED` overrides, to replay a failure). */
export const SEED = Number(process.env.KSLATE_FUZZ_SEED ?? 20261123);

const FIELDS = ['title', 'status', 'severity', 'notes', 'triage', 'scratch', 'blob', 'secret', 'proof', 'strong'];

/** Text that stresses every layer: unicode, lone surrogates, NUL, slashes, dots, long runs. */
const weirdText = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom('', ' ', '\u0000', '\ud800', 'a\udc00b', '/', 'a/b', '..', '%00', '%2F', '\n', '💥', 'é'.normalize('NFD')),
  },
  { weight: 1, arbitrary: fc.integer({ min: 250, max: 70_000 }).map((n) => 'x'.repeat(n)) },
);

const nested = fc.integer({ min: 20, max: 60 }).map((depth) => {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = i % 2 ? { k: v } : [v];
  return v;
});

const number = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, -0, 1, -1, 2 ** 31, 2 ** 53, 2 ** 53 + 2, 2 ** 63, -(2 ** 63), 1e308, Number.MAX_VALUE, 0.5, 86_400, 86_401),
);

/** Any JSON value, with the edge cases above mixed in. */
export const jsonish: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 5, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 2, arbitrary: weirdText },
  { weight: 2, arbitrary: number },
  { weight: 1, arbitrary: nested },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, [], {}) },
);

const fieldName = fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...FIELDS) }, { weight: 1, arbitrary: weirdText });

/** `<class>/<id>` mostly naming the test class and a handful of ids, sometimes anything. */
const record = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 1, max: 12 }).map((i) => `incident/fz-${i}`) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('incident', 'nope', ''), weirdText).map(([c, id]) => `${c}/${id}`) },
  { weight: 1, arbitrary: weirdText },
);

const premise = fc.oneof(
  fc.record({ field: fieldName, version: fc.oneof(fc.nat(5), number) }),
  fc.record({ field: fieldName, version: fc.nat(5), kind: fc.constantFrom('fence', 'other') }),
  jsonish,
);

const basedOn = fc.oneof({ weight: 4, arbitrary: fc.array(premise, { maxLength: 4 }) }, { weight: 1, arbitrary: jsonish });
const invocation = fc.oneof(fc.dictionary(fc.string({ maxLength: 6 }), jsonish, { maxKeys: 4 }), jsonish);
const version = fc.oneof({ weight: 4, arbitrary: fc.nat(4) }, { weight: 2, arbitrary: number }, { weight: 1, arbitrary: jsonish });
const extra = fc.dictionary(fc.constantFrom('colour', 'force', 'value2', '__proto__', 'constructor'), jsonish, { maxKeys: 1 });

const opt = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined, freq: 3 });

function withExtras(base: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<Record<string, unknown>> {
  return fc.tuple(base, fc.oneof({ weight: 6, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: extra })).map(([b, x]) => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(b)) if (v !== undefined) out[k] = v;
    for (const [k, v] of Object.entries(x)) Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
    return out;
  });
}

const ARBS: Record<Op, fc.Arbitrary<Record<string, unknown>>> = {
  get: withExtras(
    fc.record({
      record,
      fields: opt(fc.oneof(fc.array(fieldName, { maxLength: 3 }), jsonish)),
      entries_limit: opt(fc.oneof(fc.nat(10), number, jsonish)),
      entries_before: opt(fc.oneof(weirdText, jsonish)),
    }),
  ),
  put: withExtras(
    fc.record({
      record,
      field: fieldName,
      value: opt(jsonish),
      expected_version: opt(version),
      evidence: opt(fc.oneof(weirdText, jsonish)),
      based_on: opt(basedOn),
      invocation: opt(invocation),
    }),
  ),
  append: withExtras(
    fc.record({
      record,
      field: fc.oneof(fc.constant('notes'), fieldName),
      entry: opt(jsonish),
      evidence: opt(fc.oneof(weirdText, jsonish)),
      based_on: opt(basedOn),
      invocation: opt(invocation),
    }),
  ),
  claim: withExtras(
    fc.record({
      record,
      field: fc.oneof(fc.constant('triage'), fieldName),
      lease_seconds: opt(fc.oneof(fc.nat(100), number, jsonish)),
      renew: opt(fc.oneof(fc.boolean(), jsonish)),
      invocation: opt(invocation),
    }),
  ),
  checkpointSave: withExtras(
    fc.record({
      record,
      document: opt(
        fc.oneof(
          fc.record({ summary: jsonish, next_steps: jsonish }),
          fc.dictionary(fc.string({ maxLength: 8 }), jsonish, { maxKeys: 4 }),
          jsonish,
        ),
      ),
    }),
  ),
  checkpointLoad: withExtras(fc.record({ record, role: opt(fc.oneof(fc.constantFrom('responder', 'reviewer'), weirdText, jsonish)) })),
  query: withExtras(
    fc.record({
      class: fc.oneof({ weight: 8, arbitrary: fc.constant('incident') }, { weight: 1, arbitrary: weirdText }),
      filters: opt(fc.oneof(fc.dictionary(fieldName, fc.oneof(weirdText, jsonish), { maxKeys: 3 }), jsonish)),
      limit: opt(fc.oneof(fc.nat(1200), number, jsonish)),
      after: opt(fc.oneof(weirdText, jsonish)),
    }),
  ),
};

/** The seeded cases of one operation. */
export function opCases(op: Op, runs = RUNS, seed = SEED): Record<string, unknown>[] {
  return fc.sample(ARBS[op], { seed: seed + OPS.indexOf(op), numRuns: runs });
}

/** Run `fn` over `items` with at most `width` in flight; returns the failures. */
export async function runAll<T>(items: T[], width: number, fn: (item: T, index: number) => Promise<string | null>) {
  const failures: { index: number; why: string }[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      for (;;) {
        const i = next++;
        if (i >= items.length) return;
        let why: string | null;
        try {
          why = await fn(items[i], i);
        } catch (e) {
          why = `threw: ${(e as Error).message}`;
        }
        if (why) failures.push({ index: i, why });
      }
    }),
  );
  return failures;
}

/** A short, printable form of a case for a failure message. */
export function show(x: unknown): string {
  try {
    const s = JSON.stringify(x);
    return s.length > 300 ? `${s.slice(0, 300)}…` : s;
  } catch {
    return String(x).slice(0, 300);
  }
}
