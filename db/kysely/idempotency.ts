/**
 * Idempotency keys (migrations 0011, 0016 and 0022): a keyed write as one statement that takes
 * the key, replays its stored result rows or runs the write and stores them; the answer to a
 * keyed write refused before its write statement; and the sweep's purge and gauge.
 *
 * A keyed statement sent alone is `begin; select ...; commit` in one simple-protocol message
 * (one round trip, its arguments inlined as literals): the COMMIT's answer is what tells the
 * gateway the write and its key are durable, and a connection lost before it leaves the
 * outcome unknown (the caller retries with the key). Under load the write batcher carries a
 * keyed put, claim or transaction in a batch instead (Statements.keyed, batch.ts): the same
 * frame (kslate_keyed, migration 0022) in the batch's transaction, answered after its commit.
 * On Citus the keyed functions are force-delegated to the record's node (migration 0016), and
 * nothing is batched.
 */
import { sql, type Kysely } from 'kysely';
import {
  KeyRefusal,
  StorageFault,
  type ClaimResult,
  type ClaimWrite,
  type KeyedRun,
  type TransactRequest,
  type TransactResult,
  type WriteRequest,
  type WriteResult,
} from '../port.js';
import { j, type Statements } from './conn.js';
import type { Database } from './schema.js';
import {
  claimResult,
  claimValues,
  relaxed,
  transactResult,
  transactValues,
  writeResult,
  writeValues,
  type ClaimRow,
  type TransactRow,
  type WriteRow,
} from './writes.js';
import type { HistoryInsert } from '../port.js';

const OUT = 'select state, status, body, result from';

/**
 * The keyed functions: the write function's arguments (with their types), then key, digest,
 * ttl. write, claim and transact are also carried in write batches (batch.ts BATCHED_KEYED).
 */
export const KEYED = {
  write: `${OUT} kslate_write_keyed($1::text, $2::text, $3::text, $4::text, $5::text, $6::bigint, $7::jsonb, $8::text[], $9::text, $10::text, $11::text, $12::text, $13::text, $14::text, $15::bigint, $16::integer, $17::text, $18::text, $19::integer)`,
  claim: `${OUT} kslate_claim_keyed($1::text, $2::text, $3::text, $4::text, $5::text, $6::integer, $7::text, $8::text, $9::text, $10::integer)`,
  checkpoint: `${OUT} kslate_save_checkpoint_keyed($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::integer)`,
  transact: `${OUT} kslate_transact_keyed($1::text, $2::text, $3::uuid, $4::text, $5::text, $6::jsonb, $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::integer[], $13::text[], $14::integer, $15::text, $16::integer, $17::text, $18::text, $19::integer)`,
  answer: `${OUT} kslate_idempotency_answer($1::text, $2::text, $3::text, $4::text, $5::integer, $6::integer, $7::text, $8::text, $9::text, $10::text, $11::text, $12::bigint, $13::text, $14::integer, $15::text, $16::text, $17::text, $18::bigint, $19::text, $20::text)`,
};

interface KeyedRow {
  state: 'fresh' | 'in_use' | 'replay' | 'reused';
  status: number | null;
  body: string | null;
  result: unknown;
}

/** A value as an SQL literal (the statement's text casts it to its type). */
export function literal(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error(`not a finite number: ${v}`);
    return String(v);
  }
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'string') {
    // The protocol's query text ends at its first NUL: inlined, a NUL would cut the statement
    // (a syntax error, 500). As a bound parameter PostgreSQL refuses it as data (22021), so the
    // same answer here: 400 MALFORMED (the handlers refuse NUL before; this is the net below).
    if (v.includes('\u0000')) throw new StorageFault('data', new Error('a NUL character cannot be stored in text'));
    // As node-postgres's escapeLiteral: quotes doubled, backslashes doubled under E''.
    let hasBackslash = false;
    let out = "'";
    for (const c of v) {
      if (c === "'") out += "''";
      else if (c === '\\') {
        out += '\\\\';
        hasBackslash = true;
      } else out += c;
    }
    out += "'";
    return hasBackslash ? ` E${out}` : out;
  }
  if (Array.isArray(v)) return v.length === 0 ? "'{}'" : `ARRAY[${v.map(literal).join(', ')}]`;
  throw new Error(`no SQL literal for ${typeof v}`);
}

/** `text` with $n replaced by the literal of values[n-1]. */
export function inline(text: string, values: readonly unknown[]): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => literal(values[Number(n) - 1]));
}

/**
 * Run a keyed statement: alone in its one round trip, or carried in a write batch (s.keyed);
 * the stored or fresh result rows, or KeyRefusal. The statement is sent before the first
 * await once the database is known (relaxed), so the batcher captures it.
 */
async function keyedCall(s: Statements, run: KeyedRun, text: string, values: readonly unknown[], relax: boolean | Promise<boolean> = false): Promise<unknown> {
  const k = run.key;
  if (typeof relax !== 'boolean') relax = await relax;
  // A write of relaxed fields only (issue 38, writes.ts relaxed): its transaction, key included,
  // commits without waiting for the WAL flush.
  const local = relax ? ` set local synchronous_commit = off;` : '';
  const rows = await s.keyed<KeyedRow>({
    text,
    values,
    key: k,
    relaxed: relax,
    message: `begin;${local} ${inline(text, [...values, k.key, k.digest, k.ttlSeconds])}; commit`,
  });
  const r = rows[0];
  if (!r) throw new Error('a keyed statement answered no row');
  run.ran = true;
  if (r.state === 'in_use' || r.state === 'reused') throw new KeyRefusal(r.state);
  if (r.state === 'replay') {
    // An answer stored as sent (a refusal the gateway decided, or stored by migration 0011's path).
    if (r.result === null) throw new KeyRefusal('replay', r.status, r.body);
    run.replayed = true;
  }
  return r.result;
}

export async function writeFieldKeyed(s: Statements, run: KeyedRun, w: WriteRequest): Promise<WriteResult> {
  const rows = (await keyedCall(s, run, KEYED.write, writeValues(w), relaxed(s, w.relaxed))) as WriteRow[];
  return writeResult(rows[0]);
}

export async function claimKeyed(s: Statements, run: KeyedRun, w: ClaimWrite): Promise<ClaimResult> {
  const rows = (await keyedCall(s, run, KEYED.claim, claimValues(w))) as ClaimRow[];
  return claimResult(rows[0]);
}

export async function saveCheckpointKeyed(
  s: Statements,
  run: KeyedRun,
  cls: string,
  rid: string,
  role: string,
  document: Record<string, unknown>,
  author: string,
): Promise<{ checkpoint_id: number; record_version: number } | null> {
  const rows = (await keyedCall(s, run, KEYED.checkpoint, [cls, rid, role, j(document), author])) as {
    checkpoint_id: number;
    record_version: number;
  }[];
  return rows[0] ?? null;
}

export async function transactKeyed(s: Statements, run: KeyedRun, t: TransactRequest): Promise<TransactResult> {
  const r = (await keyedCall(s, run, KEYED.transact, transactValues(t), relaxed(s, t.relaxed))) as { txn: string; rows: TransactRow[] };
  const out = transactResult(t, r.rows);
  // A replay answers with the transaction id the write ran under.
  return out.outcome === 'applied' ? { ...out, txn: r.txn } : out;
}

/** The answer (as sent) of a keyed write refused before its write statement, with its history row. */
export async function keepAnswer(s: Statements, run: KeyedRun, status: number, body: string): Promise<void> {
  const k = run.key;
  const h: HistoryInsert | null = run.rejection;
  const v = h?.value;
  const values = [
    k.rid,
    k.author,
    k.key,
    k.digest,
    k.ttlSeconds,
    status,
    body,
    h?.class ?? null,
    h?.field ?? null,
    h?.op ?? null,
    h?.outcome ?? null,
    h?.version ?? null,
    v?.kind === 'whole' ? j(v.value) : null,
    v?.kind === 'digest' ? v.size : null,
    v?.kind === 'digest' ? v.sha256 : null,
    h?.identity_strength ?? null,
    h?.evidence ?? null,
    h?.expected_version ?? null,
    h ? j(h.based_on ?? null) : null,
    h ? j(h.invocation ?? null) : null,
  ];
  const rows = await s.simple<KeyedRow>(`begin; ${inline(KEYED.answer, values)}; commit`);
  const r = rows[0];
  if (!r) throw new Error('kslate_idempotency_answer answered no row');
  run.ran = true;
  if (r.state === 'in_use' || r.state === 'reused') throw new KeyRefusal(r.state);
  if (r.state === 'replay') throw new KeyRefusal('replay', r.status, r.body);
}

/** Delete up to `limit` expired keys, oldest first; returns how many. */
export async function purgeIdempotencyKeys(db: Kysely<Database>, limit: number): Promise<number> {
  const res = await sql`
    delete from idempotency_keys where (author, key) in (
      select author, key from idempotency_keys where expires_at <= now() order by expires_at limit ${limit})`.execute(db);
  return Number(res.numAffectedRows ?? 0);
}

export async function countIdempotencyKeys(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int8 as n from idempotency_keys`.execute(db);
  return Number(rows[0]?.n ?? 0);
}
