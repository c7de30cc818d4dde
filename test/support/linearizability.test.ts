/**
 * The linearizability checker the HA failover test relies on (test/support/linearizability.ts):
 * known-linearizable and known-non-linearizable histories, and the checker agreeing with an
 * exhaustive search over every order of small random histories.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkRegister, Inconclusive, step, type CasOp, type RegOp, type RegState } from './linearizability.js';

const v = (s: string) => JSON.stringify(s);
const init: RegState = { version: 1, value: v('init') };

const read = (invoke: number, answer: number, version: number, value: string | null): RegOp => ({
  kind: 'read',
  invoke,
  answer,
  version,
  value: value === null ? null : v(value),
});
const put = (invoke: number, answer: number, expected: number, value: string): CasOp => ({
  kind: 'cas',
  invoke,
  answer,
  expected,
  value: v(value),
  outcome: 'applied',
  version: expected + 1,
});
const stale = (invoke: number, answer: number, expected: number, value: string, current: number, currentValue: string): CasOp => ({
  kind: 'cas',
  invoke,
  answer,
  expected,
  value: v(value),
  outcome: 'stale',
  version: current,
  current: v(currentValue),
});
const unknown = (invoke: number, expected: number, value: string): CasOp => ({
  kind: 'cas',
  invoke,
  answer: null,
  expected,
  value: v(value),
  outcome: 'unknown',
});

describe('linearizable histories are accepted', () => {
  it('a sequential history', () => {
    expect(checkRegister([read(0, 1, 1, 'init'), put(2, 3, 1, 'a'), read(4, 5, 2, 'a'), put(6, 7, 2, 'b'), read(8, 9, 3, 'b')], init)).toEqual({ ok: true });
  });

  it('two writers with the same expected version: one applied, the other STALE seeing it', () => {
    expect(checkRegister([put(0, 10, 1, 'a'), stale(1, 9, 1, 'b', 2, 'a'), read(11, 12, 2, 'a')], init)).toEqual({ ok: true });
  });

  it('a read overlapping a write may see the old or the new value', () => {
    const ops = [put(0, 10, 1, 'a'), read(1, 5, 1, 'init'), read(2, 6, 2, 'a')];
    expect(checkRegister(ops, init)).toEqual({ ok: true });
  });

  it('a write of unknown outcome that a later read shows applied', () => {
    expect(checkRegister([unknown(0, 1, 'a'), read(5, 6, 2, 'a')], init)).toEqual({ ok: true });
  });

  it('a write of unknown outcome that never took effect: later writes start from the old version', () => {
    expect(checkRegister([unknown(0, 1, 'a'), put(5, 6, 1, 'b'), read(7, 8, 2, 'b')], init)).toEqual({ ok: true });
  });

  it('a write of unknown outcome that took effect long after it was sent (a commit seen late)', () => {
    const ops = [unknown(0, 1, 'a'), read(2, 3, 1, 'init'), read(4, 5, 1, 'init'), read(9, 10, 2, 'a')];
    expect(checkRegister(ops, init)).toEqual({ ok: true });
  });
});

describe('non-linearizable histories are refused', () => {
  it('a read after an acknowledged write sees the older version (a stale read)', () => {
    const r = checkRegister([put(0, 1, 1, 'a'), read(2, 3, 1, 'init')], init);
    expect(r.ok).toBe(false);
  });

  it('two writes acknowledged with the same version (the version issued twice after a failover)', () => {
    const r = checkRegister([put(0, 1, 1, 'a'), put(2, 3, 1, 'b')], init);
    expect(r).toMatchObject({ ok: false });
  });

  it('an acknowledged write lost: a later read shows another value at its version (ABA)', () => {
    const r = checkRegister([put(0, 1, 1, 'a'), unknown(0.5, 1, 'b'), read(5, 6, 2, 'b')], init);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.stuck.map((o) => o.kind)).toContain('read');
  });

  it('a read seeing a value before the write of it was sent', () => {
    expect(checkRegister([read(0, 1, 2, 'a'), unknown(5, 1, 'a')], init).ok).toBe(false);
  });

  it('a read showing the value of a write of unknown outcome whose expected version the register never had', () => {
    // It could not have applied (a compare-and-set from version 5 on a register at 1).
    expect(checkRegister([unknown(0, 5, 'a'), read(5, 6, 2, 'a')], init).ok).toBe(false);
  });

  it('a STALE answer naming a version the register never had at that time', () => {
    expect(checkRegister([put(0, 1, 1, 'a'), stale(2, 3, 1, 'b', 1, 'init')], init).ok).toBe(false);
  });

  it('the order of two reads contradicts the order of writes', () => {
    // w(a) then w(b) acknowledged in sequence; a read after both sees a.
    expect(checkRegister([put(0, 1, 1, 'a'), put(2, 3, 2, 'b'), read(4, 5, 2, 'a')], init).ok).toBe(false);
  });
});

it('gives up with Inconclusive instead of running without bound', () => {
  const ops: RegOp[] = Array.from({ length: 12 }, (_, i) => unknown(i, 1, `u${i}`));
  ops.push(read(100, 101, 9, 'never'));
  expect(() => checkRegister(ops, init, { maxSteps: 50 })).toThrow(Inconclusive);
});

/** Every order of the operations that respects real time (a before b when a answered before b was sent). */
function bruteForce(ops: RegOp[], s0: RegState): boolean {
  const n = ops.length;
  const before = (a: RegOp, b: RegOp) => a.answer !== null && a.answer < b.invoke;
  const used = new Array<boolean>(n).fill(false);
  const go = (s: RegState, count: number): boolean => {
    if (count === n) return true;
    for (let i = 0; i < n; i++) {
      if (used[i]) continue;
      // i may go next only if no unused operation must precede it.
      if (ops.some((o, j) => !used[j] && j !== i && before(o, ops[i]))) continue;
      const next = step(s, ops[i]);
      if (next === null) continue;
      used[i] = true;
      if (go(next, count + 1)) return true;
      used[i] = false;
    }
    return false;
  };
  return go(s0, 0);
}

describe('agrees with an exhaustive search on small random histories', () => {
  const values = ['a', 'b', 'c'];
  const opArb: fc.Arbitrary<RegOp> = fc
    .record({
      kind: fc.constantFrom('read', 'put', 'stale', 'unknown'),
      invoke: fc.integer({ min: 0, max: 12 }),
      length: fc.integer({ min: 0, max: 6 }),
      version: fc.integer({ min: 1, max: 4 }),
      value: fc.constantFrom(...values),
      other: fc.constantFrom('init', ...values),
    })
    .map(({ kind, invoke, length, version, value, other }) => {
      const answer = invoke + length;
      if (kind === 'read') return read(invoke, answer, version, version === 1 ? 'init' : other);
      if (kind === 'put') return put(invoke, answer, version, value);
      if (kind === 'stale') return stale(invoke, answer, version, value, version === 4 ? 1 : version + 1, other);
      return unknown(invoke, version, value);
    });

  it('random histories: the same verdict as trying every order', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 6 }), (ops) => {
        expect(checkRegister(ops, init).ok).toBe(bruteForce(ops, init));
      }),
      { numRuns: 3000 },
    );
  });

  it('histories of a real register (each operation takes effect at a random instant inside its span) are linearizable', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            kind: fc.constantFrom('read', 'cas', 'cas-unknown'),
            invoke: fc.integer({ min: 0, max: 50 }),
            length: fc.integer({ min: 0, max: 20 }),
            at: fc.double({ min: 0, max: 1, noNaN: true }),
            expectedDelta: fc.integer({ min: -1, max: 0 }),
            lost: fc.boolean(),
          }),
          { minLength: 1, maxLength: 14 },
        ),
        (specs) => {
          // Run the operations against a real register in the order of their effect instants.
          const effects = specs.map((s, i) => ({ ...s, i, effect: s.invoke + s.at * s.length })).sort((a, b) => a.effect - b.effect);
          let reg: RegState = init;
          const ops: RegOp[] = new Array(specs.length);
          for (const e of effects) {
            const answer = e.invoke + e.length;
            if (e.kind === 'read') {
              ops[e.i] = { kind: 'read', invoke: e.invoke, answer, version: reg.version, value: reg.value };
              continue;
            }
            const expected = reg.version + e.expectedDelta;
            const value = v(`w${e.i}`);
            if (e.kind === 'cas-unknown') {
              // Its answer was lost; it took effect or not (`lost` says it never reached the register).
              if (!e.lost && reg.version === expected) reg = { version: expected + 1, value };
              ops[e.i] = { kind: 'cas', invoke: e.invoke, answer: null, expected, value, outcome: 'unknown' };
            } else if (reg.version === expected) {
              reg = { version: expected + 1, value };
              ops[e.i] = { kind: 'cas', invoke: e.invoke, answer, expected, value, outcome: 'applied', version: expected + 1 };
            } else {
              ops[e.i] = { kind: 'cas', invoke: e.invoke, answer, expected, value, outcome: 'stale', version: reg.version, current: reg.value };
            }
          }
          expect(checkRegister(ops, init)).toEqual({ ok: true });
        },
      ),
      { numRuns: 1000 },
    );
  });
});
