/**
 * Idempotency keys and dry runs (issue 33, items 1 and 3; docs/api.md "Retrying a write",
 * "Dry runs"): the one wrapper every write operation goes through (`invoke`, for operations
 * marked `write`), whatever the transport. A transport only reads the key and the dry-run flag
 * off its request into `ctx.writeOptions`.
 *
 * - With a key, the write runs in one database transaction that first takes the key (without
 *   waiting: IDEMPOTENCY_KEY_IN_USE while another request holds it) and reads its stored
 *   answer; a stored answer to the same request (digest of operation, record, field, body) is
 *   replayed and nothing runs; one to another request is IDEMPOTENCY_KEY_REUSED. Otherwise
 *   the write runs on that transaction and its answer, 2xx or 4xx (a rejection is an answer,
 *   its history row written in the same transaction), is stored before the commit: the write
 *   and its key commit or vanish together. A 5xx or a fault rolls back both, so the retry runs
 *   again.
 * - A dry run runs the write, every check included, on a transaction that is always rolled
 *   back, with metrics that count nothing applied: the answer it would get now, with
 *   `"dry_run": true`, and nothing written (no history row, version, key or metric).
 */
import type { Ctx, Metrics } from './context.js';
import { SvcError, type ErrorCode } from './errors.js';
import { sha256Hex } from './format.js';
import { jsonOutcome, jsonText, type Outcome } from './pipeline.js';

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
  const answer = await ctx.db.transaction(async (tx): Promise<Answer> => {
    const taken = await tx.takeIdempotencyKey(author, key, digest);
    switch (taken.state) {
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
      case 'replay':
        return replayed(taken.status, taken.body);
    }
    let a: Answer;
    try {
      a = { ok: true, out: await run({ ...ctx, db: tx }) };
    } catch (e) {
      // A 4xx is the answer (a STALE too); a 5xx or fault rolls back and is not stored.
      if (!(e instanceof SvcError) || e.status >= 500) throw e;
      a = { ok: false, err: e };
    }
    const stored = a.ok
      ? { status: a.out.created ? 201 : 200, body: a.out.json !== undefined ? jsonText(a.out.json) : JSON.stringify(a.out.body) }
      : { status: a.err.status, body: JSON.stringify(a.err.body()) };
    await tx.storeIdempotencyKey({ author, key, digest, ...stored, ttlSeconds: ctx.idempotencyTtlSeconds ?? IDEMPOTENCY_TTL_DEFAULT_SECONDS });
    return a;
  });
  if (!answer.ok) throw answer.err;
  return answer.out;
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
