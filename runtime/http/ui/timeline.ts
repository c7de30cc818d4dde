/**
 * The history timeline of the console: the rows `history` answered (newest first), put in
 * the order they happened, each with what a person needs to read it: its outcome as a tone
 * and a label, takeovers and fences named, and for a STALE / STALE_PREMISE attempt what it
 * wanted against what had moved (a line diff from the `diff` package). Pure: no I/O.
 */
import { diffLines } from 'diff';

/** One row as `history` renders it (handlers/history.ts). */
export interface HistoryRow {
  seq: number;
  field: string;
  op: string;
  version?: number;
  record_version?: number;
  value?: unknown;
  value_size?: number;
  value_sha256?: string;
  author: string;
  identity_strength?: string;
  evidence?: unknown;
  expected_version?: number;
  based_on?: { field: string; version: number; kind?: string }[];
  invocation?: unknown;
  /** A write of a transaction (issue 33): its id, its index, and on a not-applied row the write that was refused. */
  transaction?: { id: string; index: number; failed_index?: number };
  outcome: string;
  created_at: string;
}

export type Tone = 'ok' | 'bad' | 'warn' | 'info';

export interface DiffPart {
  kind: 'added' | 'removed' | 'same';
  text: string;
}

/** A premise that had moved when the attempt was judged. */
export interface Moved {
  field: string;
  kind?: string;
  cited: number;
  /** The field's version then; undefined when its earlier rows are not on this page. */
  then?: number;
  author?: string;
  /** Cited value against the value then, when both are on this page. */
  diff?: DiffPart[];
}

export interface Attempt {
  row: HistoryRow;
  tone: Tone;
  label: string;
  /** Extra marks: takeover, fence, renew... as short texts. */
  marks: { tone: Tone; text: string }[];
  /** STALE: the field as it stood (version, author) and the diff current → wanted. */
  stale?: { version?: number; author?: string; diff?: DiffPart[] };
  /** STALE_PREMISE: the premises that had moved. */
  moved?: Moved[];
  /** A transaction shown as one attempt: its writes, in order (`row` is the refused one, else the first). */
  writes?: Attempt[];
}

/** Label and tone of each outcome; an unknown one shows as itself. */
const OUTCOMES: Record<string, { tone: Tone; label: string }> = {
  applied: { tone: 'ok', label: 'applied' },
  stale: { tone: 'bad', label: 'rejected: STALE' },
  stale_premise: { tone: 'bad', label: 'rejected: STALE_PREMISE' },
  held: { tone: 'warn', label: 'rejected: HELD' },
  scope_denied: { tone: 'bad', label: 'rejected: SCOPE_DENIED' },
  weak_identity: { tone: 'bad', label: 'rejected: WEAK_IDENTITY' },
  evidence_required: { tone: 'bad', label: 'rejected: EVIDENCE_REQUIRED' },
  identity_mismatch: { tone: 'bad', label: 'rejected: IDENTITY_MISMATCH' },
  not_applied: { tone: 'info', label: 'not applied' },
};

export function outcomeOf(outcome: string): { tone: Tone; label: string } {
  return OUTCOMES[outcome] ?? { tone: outcome === 'applied' ? 'ok' : 'bad', label: `rejected: ${outcome.toUpperCase()}` };
}

export const KNOWN_OUTCOMES = Object.keys(OUTCOMES);

/** Pretty JSON for a value, so a line diff shows which keys moved. */
export function pretty(v: unknown): string {
  if (v === undefined) return '(no value)';
  return JSON.stringify(v, null, 2) ?? String(v);
}

export function lineDiff(from: unknown, to: unknown): DiffPart[] {
  const a = pretty(from);
  const b = pretty(to);
  const out: DiffPart[] = [];
  for (const ch of diffLines(a.endsWith('\n') ? a : `${a}\n`, b.endsWith('\n') ? b : `${b}\n`)) {
    out.push({ kind: ch.added ? 'added' : ch.removed ? 'removed' : 'same', text: ch.value.replace(/\n$/, '') });
  }
  return out;
}

interface FieldState {
  version: number;
  author: string;
  value?: unknown;
  /** Value by version, for premise diffs. */
  byVersion: Map<number, unknown>;
  owner?: string;
}

/**
 * Build the timeline. `rows` newest first, as history answers; `complete` says the page
 * reaches back to the record's first row, so a field with no earlier row had no value.
 */
export function buildTimeline(rows: HistoryRow[], complete: boolean): Attempt[] {
  const chronological = [...rows].sort((a, b) => a.seq - b.seq);
  const state = new Map<string, FieldState>();
  const out: Attempt[] = [];
  for (const row of chronological) {
    const { tone, label } = outcomeOf(row.outcome);
    const a: Attempt = { row, tone, label, marks: [] };
    const st = state.get(row.field);
    for (const p of row.based_on ?? []) {
      if (p.kind === 'fence') a.marks.push({ tone: 'info', text: `fenced on ${p.field} v${p.version}` });
    }
    if (row.op === 'takeover') {
      a.marks.push({ tone: 'warn', text: st?.owner ? `takeover from ${st.owner}` : 'takeover of a lapsed lease' });
    } else if (row.op === 'release') {
      a.marks.push({ tone: 'info', text: 'lease released' });
    }
    if (row.outcome === 'stale') {
      a.stale = st
        ? { version: st.version, author: st.author, diff: lineDiff(st.value, row.value) }
        : complete
          ? { version: 0, diff: lineDiff(undefined, row.value) }
          : {};
    } else if (row.outcome === 'stale_premise') {
      a.moved = [];
      for (const p of row.based_on ?? []) {
        const ps = state.get(p.field);
        const then = ps?.version ?? (complete ? 0 : undefined);
        if (then === p.version) continue;
        const m: Moved = { field: p.field, kind: p.kind, cited: p.version, then, author: ps?.author };
        if (ps && p.kind !== 'fence' && (ps.byVersion.has(p.version) || p.version === 0)) {
          m.diff = lineDiff(ps.byVersion.get(p.version), ps.value);
        }
        a.moved.push(m);
      }
    }
    if (row.outcome === 'applied' && row.version !== undefined) {
      const next: FieldState = st ?? { version: 0, author: row.author, byVersion: new Map() };
      next.version = row.version;
      next.author = row.author;
      if (row.op === 'put' || row.op === 'append') {
        next.value = row.value;
        next.byVersion.set(row.version, row.value);
      }
      if (row.op === 'claim' || row.op === 'takeover') next.owner = row.author;
      if (row.op === 'release') next.owner = undefined;
      state.set(row.field, next);
    }
    out.push(a);
  }
  return groupTransactions(out);
}

/**
 * The rows of one transaction (consecutive, one id) as one attempt: applied as a whole, or
 * refused at the write that failed, the others not applied because of it.
 */
function groupTransactions(attempts: Attempt[]): Attempt[] {
  const out: Attempt[] = [];
  for (let i = 0; i < attempts.length; ) {
    const id = attempts[i].row.transaction?.id;
    let j = i + 1;
    while (id !== undefined && j < attempts.length && attempts[j].row.transaction?.id === id) j++;
    if (id === undefined) {
      out.push(attempts[i++]);
      continue;
    }
    const writes = attempts.slice(i, j);
    const failed = writes.find((w) => w.row.outcome !== 'applied' && w.row.outcome !== 'not_applied');
    const n = writes.length;
    out.push({
      row: (failed ?? writes[0]).row,
      tone: failed ? failed.tone : 'ok',
      label: failed
        ? `transaction refused at write ${failed.row.transaction!.index}: ${failed.label.replace(/^rejected: /, '')}`
        : `transaction of ${n} write${n === 1 ? '' : 's'}: applied`,
      marks: [{ tone: 'info', text: `transaction ${id.slice(0, 8)}` }],
      writes,
    });
    i = j;
  }
  return out;
}
