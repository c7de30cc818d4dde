/**
 * The load of the HA failover tests (issue 34): writers doing versioned puts (read, then
 * compare-and-set), appends and claims through two gateway processes, every operation recorded
 * with its invoke and answer times; /readyz polled on each gateway; a probe writing straight to
 * the primary through HAProxy, which says when a new primary accepts writes. Then the checks
 * over what clients saw and the final history (`checkRun`).
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { HistoryRow } from '../../runtime/http/ui/timeline.js';
import { checkRegister, type RegOp, type RegState } from '../support/linearizability.js';

export const CLASS = 'ha';
export const RECORDS = ['r0', 'r1', 'r2', 'r3'];
export const WRITERS = 16;

/** The class of the run: one versioned register, one list, one task per record; every one of `writers` writers may do everything. */
export const haClassFor = (writers: number) => ({
  name: CLASS,
  spec: {
    fields: {
      reg: { kind: 'versioned' as const },
      log: { kind: 'append' as const },
      task: { kind: 'task' as const, leaseSeconds: 1 },
    },
    roles: {
      writer: { subjects: Array.from({ length: writers }, (_, i) => `apikey:w${i}`), read: ['*'], write: ['*'] },
    },
  },
});
export const haClass = haClassFor(WRITERS);
export const writerKey = (i: number) => `ha-writer-${i}-key`;

export type OpKind = 'get' | 'put' | 'append' | 'claim';

export interface OpRecord {
  /** Unique per operation; sent as the write's `invocation.op` (and Idempotency-Key), so history rows name their operation. */
  id: string;
  /** 0, then 1, 2, ... for a write sent again with the same key after an unknown outcome. */
  attempt: number;
  writer: number;
  gateway: number;
  kind: OpKind;
  record: string;
  /** put: the expected version and the value (canonical JSON text). */
  expected?: number;
  value?: string;
  invoke: number;
  /** null: no answer within the hang bound (or the socket failed). */
  answer: number | null;
  status: number | null;
  body: any;
  retryAfter: string | null;
  error?: string;
}

export interface ReadyzRecord {
  gateway: number;
  invoke: number;
  answer: number;
  status: number | null;
}

export interface ProbeRecord {
  invoke: number;
  answer: number;
  ok: boolean;
}

export const now = () => performance.now();
/** How long a writer keeps sending a write of unknown outcome again (with its key). */
const RETRY_BUDGET_MS = 30_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Whether a write's answer says its outcome is unknown (it may or may not have been applied):
 * no answer, a 503 saying so, or 409 IDEMPOTENCY_KEY_IN_USE — an earlier attempt with the same
 * key is still running (docs/api.md: retry with the same key after Retry-After). The last is
 * what a retry meets after a failover when the first retry's commit still waits for the
 * synchronous standby past --db-timeout: that attempt answered 503 unknown, its transaction
 * commits once a standby is back, and the key stays held until then. Counting that 409 as a
 * refusal (as this did) made the register check read an applied write as not applied.
 */
export const outcomeUnknown = (op: OpRecord) =>
  op.answer === null || op.status === null || (op.status === 503 && op.body?.outcome === 'unknown') || keyInUse(op);

/** 409 IDEMPOTENCY_KEY_IN_USE: an earlier attempt with this operation's key is still running. */
const keyInUse = (op: OpRecord) => op.status === 409 && op.body?.error === 'IDEMPOTENCY_KEY_IN_USE';

export class Workload {
  readonly ops: OpRecord[] = [];
  readonly readyz: ReadyzRecord[] = [];
  readonly probes: ProbeRecord[] = [];
  private running = false;
  private loops: Promise<void>[] = [];
  private seq = 0;

  constructor(
    private readonly gateways: string[],
    private readonly probeUrl: string,
    /** A request not answered within this is a hang (recorded with answer null). */
    private readonly hangMs: number,
    /** A tag making operation ids unique across workloads. */
    private readonly tag: string,
    /** Send a write of unknown outcome again with its Idempotency-Key (write retries, issue 33). */
    private readonly retryUnknownWithKey = false,
    /** How many writers, over which records (the Citus run: 64 over more records). */
    private readonly shape: { writers: number; records: readonly string[] } = { writers: WRITERS, records: RECORDS },
  ) {}

  start(): void {
    this.running = true;
    for (let w = 0; w < this.shape.writers; w++) this.loops.push(this.writer(w));
    this.gateways.forEach((_, g) => this.loops.push(this.pollReadyz(g)));
    this.loops.push(this.probe());
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    this.loops = [];
  }

  /** Writes answered 2xx through gateway `g` after `t`. */
  writesOkAfter(g: number, t: number): OpRecord[] {
    return this.ops.filter((o) => o.gateway === g && o.kind !== 'get' && o.answer !== null && o.answer > t && o.status !== null && o.status < 300);
  }

  /**
   * One write or read. A write whose outcome is unknown is sent again with the same
   * Idempotency-Key (and invocation) when `retryUnknownWithKey` is on, until it gets a
   * definite answer or RETRY_BUDGET_MS pass; each attempt is recorded with the operation's id.
   */
  private async call(w: number, kind: OpKind, record: string, method: string, path: string, body?: Record<string, unknown>, extra: Partial<OpRecord> = {}): Promise<OpRecord> {
    const id = `${this.tag}-w${w}-${this.seq++}`;
    const started = now();
    for (let attempt = 0; ; attempt++) {
      const op = await this.send(w, id, attempt, kind, record, method, path, body, extra);
      if (!body || !this.retryUnknownWithKey || !outcomeUnknown(op) || now() - started > RETRY_BUDGET_MS) return op;
      // IN_USE comes with Retry-After (seconds); other unknown outcomes are retried at once-ish.
      await sleep(keyInUse(op) ? Math.max(200, Number(op.retryAfter ?? 1) * 1000) : 200);
    }
  }

  private async send(w: number, id: string, attempt: number, kind: OpKind, record: string, method: string, path: string, body: Record<string, unknown> | undefined, extra: Partial<OpRecord>): Promise<OpRecord> {
    const g = w % this.gateways.length;
    const headers: Record<string, string> = { authorization: `Bearer ${writerKey(w)}` };
    let payload: string | undefined;
    if (body) {
      headers['content-type'] = 'application/json';
      // Keys only when retries use them (the HA and Citus runs do: a keyed write is one
      // statement, delegated to its record's node on Citus, migration 0016).
      if (this.retryUnknownWithKey) headers['idempotency-key'] = id;
      payload = JSON.stringify({ ...body, invocation: { op: id } });
    }
    const op: OpRecord = { id, attempt, writer: w, gateway: g, kind, record, invoke: now(), answer: null, status: null, body: null, retryAfter: null, ...extra };
    this.ops.push(op);
    try {
      const res = await fetch(`${this.gateways[g]}/v1/records/${CLASS}/${record}${path}`, {
        method,
        headers,
        body: payload,
        signal: AbortSignal.timeout(this.hangMs),
      });
      const text = await res.text();
      op.answer = now();
      op.status = res.status;
      op.retryAfter = res.headers.get('retry-after');
      try {
        op.body = JSON.parse(text);
      } catch {
        op.body = text;
      }
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      op.error =
        (e as Error).name === 'TimeoutError'
          ? `no answer within ${this.hangMs} ms`
          : `${(e as Error).message}${cause ? ` (${cause.code ?? cause.message})` : ''}`;
    }
    return op;
  }

  private async writer(w: number): Promise<void> {
    let n = 0;
    while (this.running) {
      const record = this.shape.records[(w + n) % this.shape.records.length];
      const pick = (w * 7 + n++) % 4;
      let last: OpRecord;
      if (pick < 2) {
        // A versioned put: read the version, then compare-and-set from it.
        last = await this.call(w, 'get', record, 'GET', '?fields=reg');
        if (last.status === 200) {
          const expected = last.body.fields.reg?.version ?? 0;
          const value = `${last.id}-v`;
          last = await this.call(w, 'put', record, 'PUT', '/fields/reg', { value, expected_version: expected }, { expected, value: JSON.stringify(value) });
        }
      } else if (pick === 2) {
        last = await this.call(w, 'append', record, 'POST', '/fields/log/entries', { entry: { by: `w${w}`, n }, evidence: 'ha test' });
      } else {
        last = await this.call(w, 'claim', record, 'PUT', '/fields/task/claim', { lease_seconds: 1 });
      }
      // A request that failed at once (503) would otherwise spin: a client backs off a little.
      if (last.status !== null && last.status >= 500) await sleep(50);
    }
  }

  private async pollReadyz(g: number): Promise<void> {
    while (this.running) {
      const invoke = now();
      let status: number | null = null;
      try {
        const res = await fetch(`${this.gateways[g]}/readyz`, { signal: AbortSignal.timeout(this.hangMs) });
        await res.text();
        status = res.status;
      } catch {
        status = null;
      }
      this.readyz.push({ gateway: g, invoke, answer: now(), status });
      await sleep(100);
    }
  }

  /** A write straight to the primary through HAProxy every 100 ms, on a new connection each time. */
  private async probe(): Promise<void> {
    while (this.running) {
      const invoke = now();
      const c = new pg.Client({ connectionString: this.probeUrl, connectionTimeoutMillis: 2_000, query_timeout: 2_000 });
      c.on('error', () => undefined); // the connection dying is what the probe measures
      let ok = false;
      try {
        await c.connect();
        await c.query('insert into ha_probe (at) values (now())');
        ok = true;
      } catch {
        ok = false;
      } finally {
        await c.end().catch(() => undefined);
      }
      this.probes.push({ invoke, answer: now(), ok });
      await sleep(100);
    }
  }

  /**
   * When a new primary accepted writes after `t`: the answer of the first successful probe
   * that follows a failed one (or the first success after `t` when none failed).
   */
  primaryAcceptedAfter(t: number): number | null {
    const after = this.probes.filter((p) => p.invoke >= t);
    const firstFail = after.findIndex((p) => !p.ok);
    const from = firstFail < 0 ? 0 : firstFail;
    return after.slice(from).find((p) => p.ok)?.answer ?? null;
  }
}


/** Every history row of a record, oldest first (all pages). */
export async function readHistory(gateway: string, key: string, record: string): Promise<HistoryRow[]> {
  const rows: HistoryRow[] = [];
  let before: string | undefined;
  for (;;) {
    const q = `limit=10000${before ? `&before=${encodeURIComponent(before)}` : ''}`;
    const res = await fetch(`${gateway}/v1/records/${CLASS}/${record}/history?${q}`, { headers: { authorization: `Bearer ${key}` } });
    if (res.status !== 200) throw new Error(`history of ${record}: ${res.status} ${await res.text()}`);
    const body = (await res.json()) as { history: HistoryRow[]; next_before?: string };
    rows.push(...body.history);
    if (!body.next_before) break;
    before = body.next_before;
  }
  return rows.reverse();
}

/** The current state of a record's register. */
export async function readRegister(gateway: string, key: string, record: string): Promise<RegState> {
  const res = await fetch(`${gateway}/v1/records/${CLASS}/${record}?fields=reg`, { headers: { authorization: `Bearer ${key}` } });
  if (res.status !== 200) throw new Error(`get ${record}: ${res.status} ${await res.text()}`);
  const reg = ((await res.json()) as { fields: { reg?: { version: number; value: unknown } } }).fields.reg;
  return reg ? { version: reg.version, value: JSON.stringify(reg.value) } : { version: 0, value: null };
}

/** What a run's checks found; every list empty means the run kept every promise. */
export interface RunReport {
  problems: string[];
  counts: Record<string, number>;
}

const expectedStatus: Record<OpKind, number[]> = {
  get: [200, 503],
  put: [200, 201, 409, 503],
  append: [200, 201, 503],
  claim: [200, 201, 409, 503],
};

/**
 * The promises of issue 34 over one run: `ops` are the run's operations, `history` every
 * record's whole history afterwards, `before`/`after` each register's state before the run
 * and after it (read once the load stopped).
 */
export function checkRun(
  ops: OpRecord[],
  history: Map<string, HistoryRow[]>,
  before: Map<string, RegState>,
  after: Map<string, RegState>,
  opts: { answerWithinMs: number; retryAfter: boolean; records?: readonly string[] },
): RunReport {
  const problems: string[] = [];
  const counts: Record<string, number> = {};
  const count = (k: string) => (counts[k] = (counts[k] ?? 0) + 1);
  // At most five examples of each kind of problem, and how many there were.
  const kinds = new Map<string, number>();
  const say = (s: string) => {
    const kind = s.replace(/[:(].*$/s, '');
    const n = (kinds.get(kind) ?? 0) + 1;
    kinds.set(kind, n);
    if (n <= 5) problems.push(s);
    else if (n === 6) problems.push(`${kind}: more of these (counted in "problem: ${kind}")`);
    count(`problem: ${kind}`);
  };
  const show = (o: OpRecord) => `${o.kind} ${o.record} ${o.id} → ${o.status ?? o.error} ${JSON.stringify(o.body)?.slice(0, 300)}`;

  // Answers: no 500, no hang, only the statuses the operation may give; every 503 UNAVAILABLE, soon, saying when to retry.
  for (const o of ops) {
    count(`${o.kind} ${o.status ?? 'no answer'}`);
    if (o.answer !== null) counts['slowest answer (ms)'] = Math.max(counts['slowest answer (ms)'] ?? 0, Math.round(o.answer - o.invoke));
    if (o.status === null) {
      say(`no answer (hang or socket error): ${show(o)}`);
      continue;
    }
    // A retry (attempt > 0, its operation's key) may meet the attempt before it still running.
    if (!expectedStatus[o.kind].includes(o.status) && !(o.attempt > 0 && keyInUse(o))) say(`unexpected status: ${show(o)}`);
    if (o.answer! - o.invoke > opts.answerWithinMs) say(`answered after ${Math.round(o.answer! - o.invoke)} ms (bound ${opts.answerWithinMs}): ${show(o)}`);
    if (o.status === 503) {
      if (o.body?.error !== 'UNAVAILABLE' || typeof o.body?.message !== 'string') say(`503 without UNAVAILABLE and a message: ${show(o)}`);
      if (opts.retryAfter && !o.retryAfter) say(`503 without Retry-After: ${show(o)}`);
      if (o.kind !== 'get' && outcomeUnknown(o)) count('writes of unknown outcome');
      count(`503: ${String(o.body?.message).slice(0, 60)}`);
    }
  }

  const writes = new Map<string, OpRecord[]>();
  for (const o of ops) if (o.kind !== 'get') writes.set(o.id, [...(writes.get(o.id) ?? []), o]);

  for (const record of opts.records ?? RECORDS) {
    const rows = history.get(record) ?? [];
    const applied = rows.filter((r) => r.outcome === 'applied');
    // No version issued twice: per field, the applied versions are 1, 2, 3, ... with no repeat
    // and no gap, and the record versions of all fields likewise.
    for (const field of ['reg', 'log', 'task']) {
      const versions = applied.filter((r) => r.field === field).map((r) => r.version!);
      versions.forEach((v, i) => {
        if (v !== i + 1) say(`${record}.${field}: applied versions are not 1..n in order: ${versions.slice(Math.max(0, i - 3), i + 3).join(',')} at position ${i}`);
      });
    }
    const rvs = applied.map((r) => r.record_version!);
    rvs.forEach((v, i) => {
      if (v !== i + 1) say(`${record}: applied record versions are not 1..n in order at position ${i}: ${rvs.slice(Math.max(0, i - 3), i + 3).join(',')}`);
    });

    // Each operation applied at most once; acknowledged ones exactly once, as answered; one
    // whose every answer was a definite refusal (a 503 without "unknown": nothing sent, or
    // cancelled by the server) never. An operation is all its attempts (retries with its key).
    const byOp = new Map<string, HistoryRow[]>();
    for (const r of applied) {
      const id = (r.invocation as { op?: string } | undefined)?.op;
      if (id) byOp.set(id, [...(byOp.get(id) ?? []), r]);
    }
    const regValue = new Map<number, string>();
    for (const r of applied) if (r.field === 'reg') regValue.set(r.version!, JSON.stringify(r.value));
    for (const attempts of writes.values()) {
      const o = attempts[0];
      if (o.record !== record) continue;
      const rows = byOp.get(o.id) ?? [];
      if (rows.length > 1) say(`applied ${rows.length} times: ${show(o)}`);
      if (attempts.length > 1) count(rows.length === 1 ? 'writes sent again with their key, applied once' : 'writes sent again with their key, not applied');
      const acked = attempts.find((a) => a.status !== null && a.status < 300);
      if (acked) {
        count('acknowledged writes');
        if (rows.length !== 1) say(`acknowledged write not in the history (lost): ${show(acked)}`);
        else if (rows[0].record_version !== acked.body.record_version || (o.kind !== 'append' && rows[0].version !== acked.body.version)) {
          say(`acknowledged write answered ${JSON.stringify(acked.body)} but the history has ${JSON.stringify(rows[0])}`);
        }
      } else if (attempts.some(outcomeUnknown)) {
        if (rows.length === 1) count('unknown-outcome writes found applied');
      } else if (rows.length > 0) {
        say(`answered as not applied, yet applied: ${show(attempts[attempts.length - 1])}`);
      }
    }

    // Every value a client saw at a version (a get, a STALE answer) is the history's value at that version.
    for (const o of ops.filter((x) => x.record === record)) {
      let seen: [number, string] | null = null;
      if (o.kind === 'get' && o.status === 200 && o.body.fields.reg) seen = [o.body.fields.reg.version, JSON.stringify(o.body.fields.reg.value)];
      if (o.kind === 'put' && o.status === 409 && o.body.error === 'STALE') seen = [o.body.current_version, JSON.stringify(o.body.current_value)];
      if (seen && seen[0] > 0 && regValue.get(seen[0]) !== seen[1] && !(seen[0] === before.get(record)?.version && seen[1] === before.get(record)?.value)) {
        say(`${record}.reg version ${seen[0]} was seen as ${seen[1]} but the history has ${regValue.get(seen[0])}: ${show(o)}`);
      }
    }

    // Linearizability of the register as clients saw it, ending with the state read afterwards.
    // A put is one operation from its first attempt to its last answer.
    const regOps: RegOp[] = [];
    for (const o of ops.filter((x) => x.record === record && x.kind === 'get' && x.status === 200)) {
      const reg = o.body.fields.reg;
      regOps.push({ kind: 'read', invoke: o.invoke, answer: o.answer!, version: reg?.version ?? 0, value: reg ? JSON.stringify(reg.value) : null });
    }
    for (const attempts of writes.values()) {
      const o = attempts[0];
      if (o.record !== record || o.kind !== 'put') continue;
      const base = { kind: 'cas' as const, invoke: o.invoke, expected: o.expected!, value: o.value! };
      const final = attempts[attempts.length - 1];
      if (final.status !== null && final.status < 300) regOps.push({ ...base, answer: final.answer!, outcome: 'applied', version: final.body.version });
      else if (final.status === 409) regOps.push({ ...base, answer: final.answer!, outcome: 'stale', version: final.body.current_version, current: JSON.stringify(final.body.current_value) });
      else if (attempts.some(outcomeUnknown)) regOps.push({ ...base, answer: null, outcome: 'unknown' });
      // Otherwise every attempt was refused before it did anything.
    }
    const end = Math.max(...ops.map((o) => o.answer ?? o.invoke)) + 1;
    const last = after.get(record)!;
    regOps.push({ kind: 'read', invoke: end, answer: end + 1, version: last.version, value: last.value });
    count('register operations checked');
    const verdict = checkRegister(regOps, before.get(record)!);
    if (!verdict.ok) {
      say(`${record}.reg: the history is not linearizable (${verdict.explained} of ${regOps.length} operations explained; stuck at ${JSON.stringify(verdict.stuck.slice(0, 4))})`);
    }
  }
  return { problems, counts };
}
