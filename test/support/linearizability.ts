/**
 * A linearizability checker (Wing & Gong's search with Lowe's memoisation, as in Porcupine and
 * Knossos) for what kslate promises of one field: a register with a version, read by get and
 * written by compare-and-set (put with `expected_version`).
 *
 * A history is the operations clients saw, each with the time it was sent (invoke) and the
 * time its answer came (answer). It is linearizable when every operation can be given one
 * instant between its invoke and answer such that, taken in that order, the answers are those
 * of a single register. A write whose outcome the client could not learn (503 with
 * `"outcome": "unknown"`, a cut connection) has no answer time: it may take effect at any
 * instant after its invoke, or never (taking effect after every other operation is
 * indistinguishable from never).
 *
 * Fields are independent registers, so a history is checked per field (P-compositionality).
 */

/** A field's value as canonical JSON text; null while the field has none (version 0). */
export type RegValue = string | null;

export interface RegState {
  version: number;
  value: RegValue;
}

/** A get that answered: the version and value it returned. */
export interface ReadOp {
  kind: 'read';
  invoke: number;
  answer: number;
  version: number;
  value: RegValue;
}

/**
 * A put with `expected_version`: applied (the new `version`), refused STALE (the body's
 * `current_version` as `version` and `current_value` as `current`), or of unknown outcome
 * (`answer` null).
 */
export type CasOp =
  | { kind: 'cas'; invoke: number; answer: number; expected: number; value: RegValue; outcome: 'applied'; version: number }
  | { kind: 'cas'; invoke: number; answer: number; expected: number; value: RegValue; outcome: 'stale'; version: number; current: RegValue }
  | { kind: 'cas'; invoke: number; answer: null; expected: number; value: RegValue; outcome: 'unknown' };

export type RegOp = ReadOp | CasOp;

/** One step of the register: the state after `op`, or null when `op` could not have answered as it did in `s`. */
export function step(s: RegState, op: RegOp): RegState | null {
  if (op.kind === 'read') return s.version === op.version && s.value === op.value ? s : null;
  switch (op.outcome) {
    case 'applied':
      return s.version === op.expected && op.version === op.expected + 1 ? { version: op.version, value: op.value } : null;
    case 'stale':
      return s.version !== op.expected && s.version === op.version && s.value === op.current ? s : null;
    case 'unknown':
      // Applied if it took effect here; if it never did, placing it after everything else says so.
      return s.version === op.expected ? { version: s.version + 1, value: op.value } : s;
  }
}

export type Verdict =
  | { ok: true }
  | {
      ok: false;
      /** The most operations any order managed to explain, and the operations none could place after them (earliest invoke first). */
      explained: number;
      stuck: RegOp[];
    };

/** The search gave up (more than `maxSteps` steps): neither verdict holds. */
export class Inconclusive extends Error {}

interface Node {
  /** Operation index; -1 for the list head. */
  id: number;
  /** For a call: its return node. Null on returns and the head. */
  match: Node | null;
  prev: Node | null;
  next: Node | null;
}

/**
 * Check one register's history from `init` (the state before the first operation).
 * Throws Inconclusive after `maxSteps` search steps.
 */
export function checkRegister(ops: readonly RegOp[], init: RegState, opts: { maxSteps?: number } = {}): Verdict {
  const maxSteps = opts.maxSteps ?? 20_000_000;
  const n = ops.length;
  // Calls and returns in time order; at the same instant calls come first, so operations that
  // touch the same millisecond count as concurrent (the permissive reading).
  const events = ops.flatMap((op, id) => [
    { id, call: true, time: op.invoke },
    { id, call: false, time: op.answer ?? Number.POSITIVE_INFINITY },
  ]);
  events.sort((a, b) => a.time - b.time || (a.call === b.call ? 0 : a.call ? -1 : 1));
  const head: Node = { id: -1, match: null, prev: null, next: null };
  const returns = new Map<number, Node>();
  let tail = head;
  // Returns are linked first so each call can point at its own.
  const nodes = events.map((e) => {
    const node: Node = { id: e.id, match: null, prev: null, next: null };
    if (!e.call) returns.set(e.id, node);
    return node;
  });
  events.forEach((e, i) => {
    if (e.call) nodes[i].match = returns.get(e.id)!;
    nodes[i].prev = tail;
    tail.next = nodes[i];
    tail = nodes[i];
  });

  const lift = (call: Node) => {
    call.prev!.next = call.next;
    if (call.next) call.next.prev = call.prev;
    const ret = call.match!;
    ret.prev!.next = ret.next;
    if (ret.next) ret.next.prev = ret.prev;
  };
  const unlift = (call: Node) => {
    const ret = call.match!;
    ret.prev!.next = ret;
    if (ret.next) ret.next.prev = ret;
    call.prev!.next = call;
    if (call.next) call.next.prev = call;
  };

  const words = new Uint32Array(Math.ceil(n / 32) || 1);
  const flip = (id: number) => {
    words[id >>> 5] ^= 1 << (id & 31);
  };
  /** Lowe's memo: (set of operations linearized, state) already explored. */
  const seen = new Set<string>();
  const key = (s: RegState) => `${Array.prototype.join.call(words, ',')}|${s.version}|${s.value ?? ''}|${s.value === null ? 0 : 1}`;

  const stack: { call: Node; state: RegState }[] = [];
  let state = init;
  let entry = head.next;
  let best = 0;
  let bestLinearized = new Uint32Array(words);
  let steps = 0;
  while (head.next !== null) {
    if (++steps > maxSteps) throw new Inconclusive(`no verdict after ${maxSteps} steps over ${n} operations`);
    if (entry === null) throw new Error('linearizability: walked past the last event (unreachable)');
    if (entry.match !== null) {
      const next = step(state, ops[entry.id]);
      if (next !== null) {
        flip(entry.id);
        const k = key(next);
        if (!seen.has(k)) {
          seen.add(k);
          stack.push({ call: entry, state });
          state = next;
          lift(entry);
          if (stack.length > best) {
            best = stack.length;
            bestLinearized = new Uint32Array(words);
          }
          entry = head.next;
          continue;
        }
        flip(entry.id);
      }
      entry = entry.next;
    } else {
      // A return whose call no order could place yet: undo the last choice.
      const top = stack.pop();
      if (!top) {
        const stuck = ops
          .map((op, id) => ({ op, id }))
          .filter(({ id }) => (bestLinearized[id >>> 5] & (1 << (id & 31))) === 0)
          .sort((a, b) => a.op.invoke - b.op.invoke)
          .slice(0, 8)
          .map(({ op }) => op);
        return { ok: false, explained: best, stuck };
      }
      state = top.state;
      flip(top.call.id);
      unlift(top.call);
      entry = top.call.next;
    }
  }
  return { ok: true };
}
