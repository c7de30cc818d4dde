/**
 * Idempotency keys and dry runs (issue 33, items 1 and 3; docs/api.md "Retrying a write",
 * "Dry runs"): the one wrapper every write operation goes through (`invoke`, for operations
 * marked `write`), whatever the transport. A transport only reads the key and the dry-run flag
 * off its request into `ctx.writeOptions`.
 *
 * - With a key, the write's one statement is keyed (Db.keyed, migration 0016): in that one
 *   statement, on the record's node on Citus, it takes the key (without waiting:
 *   IDEMPOTENCY_KEY_IN_USE while another request holds it) and reads its stored answer; a
 *   stored answer to the same request (digest of operation and input) is replayed and nothing
 *   runs; one to another request is IDEMPOTENCY_KEY_REUSED. Otherwise the write runs and its
 *   result rows (a rejection decided under the lock, STALE and the like, is a result too) are
 *   stored under the key: the write and its key commit or vanish together. The answer is
 *   rendered from those rows by the handler, the first time and on every replay alike, so a
 *   replay is the same answer byte for byte. A refusal decided before the write statement
 *   (MALFORMED, SCOPE_DENIED, ...) is stored as sent, with its history row, by one statement
 *   too (Db.keepAnswer). A 5xx or a fault stores nothing, so the retry runs again. The checks
 *   before the write run again on a retry: one that now fails (the caller lost its role) is
 *   answered with that refusal's stored answer if the key holds one as sent, and otherwise
 *   with that refusal; the write is never applied twice.
 * - A dry run runs the write, every check included, on a transaction that is always rolled
 *   back, with metrics that count nothing applied: the answer it would get now, with
 *   `"dry_run": true`, and nothing written (no history row, version, key or metric).
 */
import type { Ctx, Metrics } from './context.js';
import { SvcError, type ErrorCode } from './errors.js';
import { sha256Hex } from './format.js';
import { jsonOutcome, jsonText, type Outcome } from './pipeline.js';
import { KeyRefusal, type KeyedRun } from '../db/port.js';

/** What a transport read off a write request besides its input. */
export type { WriteOptions } from './context.js';

/** How long a stored answer is kept by default (`--idempotency-ttl`). */
export const IDEMPOTENCY_TTL_DEFAULT_SECONDS = 24 * 3600;
export const MAX_IDEMPOTENCY_KEY_CHARS = 255;
/** Seconds a client told IDEMPOTENCY_KEY_IN_USE waits before retrying (Retry-After). */
export const IN_USE_RETRY_AFTER_SECONDS = 1;

const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

export function checkIdempotencyKey(key: string): void {
  if (key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_CHARS || !PRINTABLE_ASCII.test(key)) {
    throw new SvcError(
      'MALFORMED',
      `An idempotency key (HTTP header Idempotency-Key, MCP idempotency_key, gRPC metadata idempotency-key) must be 1 to ${MAX_IDEMPOTENCY_KEY_CHARS} printable ASCII characters; send a fresh UUID per logical write.`,
    );
  }
}

type Answer = { ok: true; out: Outcome } | { ok: false; err: SvcError };

/** Run a write (`run`, given the context to run it with) under ctx.writeOptions. */
export async function writeOnce<I>(opName: string, ctx: Ctx, input: I, run: (ctx: Ctx) => Promise<Outcome>): Promise<Outcome> {
  const { idempotencyKey: key, dryRun } = ctx.writeOptions ?? {};
  if (key !== undefined) checkIdempotencyKey(key);
  if (dryRun) return dryRunOf(ctx, run);
  if (key === undefined) return run(ctx);

  const author = ctx.identity.author;
  const digest = await sha256Hex(JSON.stringify([opName, input]));
  const id = (input as { id?: unknown }).id;
  const keyed: KeyedRun = {
    key: { author, key, digest, ttlSeconds: ctx.idempotencyTtlSeconds ?? IDEMPOTENCY_TTL_DEFAULT_SECONDS, rid: typeof id === 'string' ? id : '' },
    ran: false,
    replayed: false,
    rejection: null,
  };
  // What the write counts is counted once it is known not to be a replay.
  const held = heldMetrics(ctx.metrics);
  let a: Answer;
  try {
    a = { ok: true, out: await run({ ...ctx, db: ctx.db.keyed(keyed), metrics: held.metrics }) };
  } catch (e) {
    if (e instanceof KeyRefusal) return refused(e);
    // A 4xx is the answer (a STALE too); a 5xx or fault wrote nothing and is not stored.
    if (!(e instanceof SvcError) || e.status >= 500) throw e;
    a = { ok: false, err: e };
  }
  if (!keyed.ran) {
    // Refused before its write statement: the answer as sent, with the refusal's history row.
    const stored = a.ok
      ? { status: a.out.created ? 201 : 200, body: a.out.json !== undefined ? jsonText(a.out.json) : JSON.stringify(a.out.body) }
      : { status: a.err.status, body: JSON.stringify(a.err.body()) };
    try {
      await ctx.db.keepAnswer(keyed, stored.status, stored.body);
    } catch (e) {
      if (e instanceof KeyRefusal) return refused(e);
      throw e;
    }
  }
  if (keyed.replayed) {
    // The stored result rows, rendered as the first time.
    if (!a.ok) {
      a.err.replayed = true;
      throw a.err;
    }
    a.out.replayed = true;
    return a.out;
  }
  held.flush();
  if (!a.ok) throw a.err;
  return a.out;
}

/** A keyed statement that did not run its write: IN_USE, REUSED, or the answer stored as sent. */
function refused(e: KeyRefusal): Outcome {
  switch (e.state) {
    case 'in_use':
      throw new SvcError(
        'IDEMPOTENCY_KEY_IN_USE',
        `A request with this idempotency key is still running; retry after ${IN_USE_RETRY_AFTER_SECONDS} s with the same key to get its answer.`,
        { retry_after: IN_USE_RETRY_AFTER_SECONDS },
      );
    case 'reused':
      throw new SvcError(
        'IDEMPOTENCY_KEY_REUSED',
        'This idempotency key was used for a different request (another operation, record, field or body); use a fresh key for a new write.',
      );
    case 'replay': {
      const a = replayed(e.status!, e.body!);
      if (!a.ok) throw a.err;
      return a.out;
    }
  }
}

type Counted = Pick<Metrics, 'write' | 'claim' | 'takeover' | 'checkpoint'>;

/** The write's counts, held until `flush` (a replay counts nothing). */
function heldMetrics(m: Metrics): { metrics: Metrics; flush(): void } {
  const calls: (() => void)[] = [];
  const hold: Counted = {
    write: (...a) => void calls.push(() => m.write(...a)),
    claim: (...a) => void calls.push(() => m.claim(...a)),
    takeover: (...a) => void calls.push(() => m.takeover(...a)),
    checkpoint: (...a) => void calls.push(() => m.checkpoint(...a)),
  };
  return {
    metrics: { ...m, ...hold },
    flush: () => {
      for (const c of calls) c();
    },
  };
}

/** The stored answer, as first sent (HTTP sends `json` byte for byte), marked replayed. */
function replayed(status: number, body: string): Answer {
  if (status < 300) {
    const out = jsonOutcome(body);
    if (status === 201) out.created = true;
    out.replayed = true;
    return { ok: true, out };
  }
  const { error, message, ...extra } = JSON.parse(body) as { error: ErrorCode; message: string };
  const err = new SvcError(error, message, extra);
  err.replayed = true;
  return { ok: false, err };
}

/** Counts nothing applied: a dry run applies nothing. */
const DRY_METRICS: Pick<Metrics, 'write' | 'claim' | 'takeover' | 'checkpoint'> = {
  write() {},
  claim() {},
  takeover() {},
  checkpoint() {},
};

async function dryRunOf(ctx: Ctx, run: (ctx: Ctx) => Promise<Outcome>): Promise<Outcome> {
  const answer = await ctx.db.transaction(
    async (tx): Promise<Answer> => {
      try {
        return { ok: true, out: await run({ ...ctx, db: tx, metrics: { ...ctx.metrics, ...DRY_METRICS } }) };
      } catch (e) {
        if (!(e instanceof SvcError) || e.status >= 500) throw e;
        return { ok: false, err: e };
      }
    },
    { rollback: true },
  );
  if (!answer.ok) {
    const err = new SvcError(answer.err.code, answer.err.message, { ...answer.err.extra, dry_run: true });
    err.dryRun = true;
    throw err;
  }
  const out: Outcome = { body: { ...answer.out.body, dry_run: true }, dryRun: true };
  if (answer.out.created) out.created = true;
  return out;
}
