/**
 * Writes: each one statement that decides under the record's lock and applies, or writes the
 * rejection's history row (migration 0010): put and append (kslate_write), claim
 * (kslate_claim), checkpoint save; and the history row of a rejection the gateway decided
 * before the lock.
 */
import { sql, type Kysely } from 'kysely';
import type { ClaimResult, ClaimWrite, HistoryInsert, TransactRequest, TransactResult, WriteRequest, WriteResult } from '../port.js';
import { j, type Statements } from './conn.js';
import type { Database } from './schema.js';

/** The put and append of migration 0010, named: decided and applied, or refused, in one statement. */
export const WRITE = {
  name: 'kslate_write',
  text: 'select outcome, version, record_version, created, cur_author, cur_value, cur_evidence, cur_updated_ms, moved, missing, expires_ms from kslate_write($1, $2, $3, $4, $5, $6, $7::jsonb, $8::text[], $9, $10, $11, $12, $13, $14, $15, $16::integer)',
};

/**
 * Relaxed durability (issue 38): the same statement, which also sets synchronous_commit off
 * for its own transaction (set_config(..., true) = SET LOCAL). The setting is read when the
 * transaction commits, so it covers the whole write, and it costs no round trip: the write
 * then commits without waiting for its WAL to reach the disk. Only writes of relaxed fields
 * (soft and append fields of a class or field with `durability: relaxed`) are sent this way.
 */
export function relaxedStatement(st: { name: string; text: string }): { name: string; text: string } {
  const from = st.text.indexOf(' from ');
  if (!st.text.startsWith('select ') || from < 0) throw new Error(`relaxedStatement: not a select ... from: ${st.text}`);
  return {
    name: `${st.name}_relaxed`,
    text: `${st.text.slice(0, from)}, set_config('synchronous_commit', 'off', true) as relaxed${st.text.slice(from)}`,
  };
}

export const WRITE_RELAXED = relaxedStatement(WRITE);

/**
 * Relaxed writes are strict on Citus (not yet relaxed there): the write commits on the worker
 * holding the record, which the coordinator's SET LOCAL does not reach, and a statement that is
 * more than the function call may not be delegated in one hop (docs/scale-out.md).
 */
async function relaxable(c: Statements): Promise<boolean> {
  return !(await c.citus());
}

/** The claim of migrations 0006 and 0010, named. */
export const CLAIM = {
  name: 'kslate_claim',
  text: 'select outcome, version, record_version, created, owner, lease_expires_ms, took_over_from from kslate_claim($1, $2, $3, $4, $5, $6, $7)',
};

export async function writeField(c: Statements, w: WriteRequest): Promise<WriteResult> {
  const st = w.relaxed === true && (await relaxable(c)) ? WRITE_RELAXED : WRITE;
  const res = await c.exec<WriteRow>(st.name, st.text, writeValues(w));
  return writeResult(res.rows[0]);
}

/** kslate_write's arguments (also its keyed variant's first ones: idempotency.ts). */
export function writeValues(w: WriteRequest): unknown[] {
  return [
    w.class,
    w.rid,
    w.field,
    w.kind,
    w.op,
    w.expectVersion,
    w.premises.length > 0 ? JSON.stringify(w.premises) : null,
    w.requiredCheckpoints,
    w.author,
    w.identity_strength,
    j(w.value),
    w.evidence,
    j(w.based_on),
    j(w.invocation),
    w.expected_version,
    w.ttl_seconds ?? null,
  ];
}

/** A row of kslate_write (WRITE). */
export interface WriteRow {
  outcome: 'applied' | 'stale' | 'stale_premise' | 'invalid_checkpoint';
  version: number;
  record_version: number | null;
  created: boolean;
  cur_author: string | null;
  cur_value: unknown;
  cur_evidence: string | null;
  cur_updated_ms: number | null;
  /** [field, your_version, current_version, current_author, current_evidence] per moved premise. */
  moved: [string, number, number, string | null, string | null][] | null;
  missing: string[] | null;
  /** The record's expiry after the write (migration 0013), when the write gave ttl_seconds. */
  expires_ms: number | null;
}

export function writeResult(r: WriteRow): WriteResult {
  switch (r.outcome) {
    case 'applied':
      if (r.record_version === null) throw new Error('kslate_write applied a write without a record version');
      return {
        outcome: 'applied',
        version: r.version,
        record_version: r.record_version,
        created: r.created,
        expires_at: r.expires_ms === null || r.expires_ms === undefined ? null : new Date(Number(r.expires_ms)),
      };
    case 'stale':
      return {
        outcome: 'stale',
        current_version: r.version,
        current:
          r.cur_updated_ms === null
            ? null
            : { value: r.cur_value, author: r.cur_author, evidence: r.cur_evidence, updated_at: new Date(r.cur_updated_ms) },
      };
    case 'stale_premise':
      return {
        outcome: 'stale_premise',
        current_version: r.version,
        current_author: r.cur_author,
        moved: (r.moved ?? []).map(([field, your, current, author, evidence]) => ({
          field,
          your_version: your,
          current_version: current,
          current_author: author,
          current_evidence: evidence,
        })),
      };
    case 'invalid_checkpoint':
      return { outcome: 'invalid_checkpoint', missing: r.missing ?? [] };
  }
}

/** A row of kslate_claim (CLAIM). */
export interface ClaimRow {
  outcome: ClaimResult['outcome'];
  version: number;
  record_version: number | null;
  created: boolean;
  owner: string | null;
  lease_expires_ms: number | null;
  took_over_from: string | null;
}

export async function claim(c: Statements, w: ClaimWrite): Promise<ClaimResult> {
  const res = await c.exec<ClaimRow>(CLAIM.name, CLAIM.text, claimValues(w));
  return claimResult(res.rows[0]);
}

/** kslate_claim's arguments (also its keyed variant's first ones). */
export function claimValues(w: ClaimWrite): unknown[] {
  return [w.class, w.rid, w.field, w.author, w.identity_strength, w.lease_seconds, j(w.invocation)];
}

export function claimResult(row: ClaimRow): ClaimResult {
  const { lease_expires_ms, ...r } = row;
  return { ...r, lease_expires_at: lease_expires_ms === null ? null : new Date(lease_expires_ms) };
}

/** A role's checkpoint on an existing record, saved under its lock; null when the record does not exist. */
export async function saveCheckpoint(
  c: Statements,
  cls: string,
  rid: string,
  role: string,
  document: Record<string, unknown>,
  author: string,
): Promise<{ checkpoint_id: number; record_version: number } | null> {
  const doc = j(document);
  const res = await c.named<{ checkpoint_id: number; record_version: number }>(
    'kslate_save_checkpoint',
    [cls, rid, role, doc, author],
    () => sql`select checkpoint_id, record_version from kslate_save_checkpoint(${cls}, ${rid}, ${role}, ${doc}, ${author})`,
  );
  return res.rows[0] ?? null;
}

/**
 * A rejection's history row decided in the gateway (kslate_add_history): the record version is
 * the record's when refused, absent when the record does not exist.
 */
export async function insertRejection(db: Kysely<Database>, row: HistoryInsert): Promise<void> {
  const v = row.value;
  await sql`
    select kslate_add_history(${row.class}, ${row.rid}, ${row.field}, ${row.op}, ${row.outcome}, ${row.version ?? null}::bigint,
      (select record_version from records where class = ${row.class} and rid = ${row.rid}),
      ${v.kind === 'whole' ? j(v.value) : null}, ${v.kind === 'digest' ? v.size : null}::integer, ${v.kind === 'digest' ? v.sha256 : null},
      ${row.author}, ${row.identity_strength}, ${row.evidence ?? null}, ${row.expected_version ?? null}::bigint,
      ${j(row.based_on ?? null)}, ${j(row.invocation ?? null)}, null)`.execute(db);
}

/** The transaction of migration 0012 (with the record ttl of 0019), named: every write decided and applied, or none, in one statement. */
export const TRANSACT = {
  name: 'kslate_transact',
  text:
    'select outcome, idx, version, record_version, created, cur_author, cur_value, cur_evidence, cur_updated_ms, moved, missing, owner, lease_expires_ms, took_over_from, expires_ms ' +
    'from kslate_transact($1, $2, $3::uuid, $4, $5, $6::jsonb, $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::integer[], $13::text[], $14::integer, $15, $16::integer)',
};

/** A transaction whose every write is of a relaxed field (issue 38; see WRITE_RELAXED). */
export const TRANSACT_RELAXED = relaxedStatement(TRANSACT);

/** A row of kslate_transact (TRANSACT): one per applied write, or the one rejection. */
export interface TransactRow extends Omit<WriteRow, 'outcome'> {
  outcome: WriteRow['outcome'] | ClaimResult['outcome'] | 'stop';
  idx: number;
  owner: string | null;
  lease_expires_ms: number | null;
  took_over_from: string | null;
}

export async function transact(c: Statements, t: TransactRequest): Promise<TransactResult> {
  const st = t.relaxed === true && (await relaxable(c)) ? TRANSACT_RELAXED : TRANSACT;
  const res = await c.exec<TransactRow>(st.name, st.text, transactValues(t));
  return transactResult(t, res.rows);
}

/** kslate_transact's arguments (also its keyed variant's first ones). */
export function transactValues(t: TransactRequest): unknown[] {
  const ws = t.writes;
  return [
    t.class,
    t.rid,
    t.txn,
    t.author,
    t.identity_strength,
    JSON.stringify(
      ws.map((w) => ({
        op: w.op,
        field: w.field,
        kind: w.kind,
        expect: w.expectVersion,
        premises: w.premises.length > 0 ? w.premises : null,
        gate: w.requiredCheckpoints,
        hist_expected: w.expected_version,
        lease: w.lease_seconds,
      })),
    ),
    ws.map((w) => (w.hasValue ? j(w.value) : null)),
    ws.map((w) => w.evidence),
    ws.map((w) => j(w.based_on)),
    ws.map((w) => j(w.invocation)),
    ws.map((w) => (w.kept.kind === 'whole' ? j(w.kept.value) : null)),
    ws.map((w) => (w.kept.kind === 'digest' ? w.kept.size : null)),
    ws.map((w) => (w.kept.kind === 'digest' ? w.kept.sha256 : null)),
    t.stop?.index ?? null,
    t.stop?.outcome ?? null,
    t.ttl_seconds ?? null,
  ];
}

/** The rows of kslate_transact as its result. */
export function transactResult(t: TransactRequest, rows: TransactRow[]): TransactResult {
  const ws = t.writes;
  const first = rows[0];
  if (!first) throw new Error('kslate_transact answered no row');
  switch (first.outcome) {
    case 'stop':
      return { outcome: 'rejected', index: first.idx, decision: { outcome: 'stop' } };
    case 'held':
      return {
        outcome: 'rejected',
        index: first.idx,
        decision: {
          outcome: 'held',
          version: first.version,
          record_version: first.record_version,
          created: false,
          owner: first.owner,
          lease_expires_at: first.lease_expires_ms === null ? null : new Date(first.lease_expires_ms),
          took_over_from: null,
        },
      };
    case 'stale':
    case 'stale_premise':
    case 'invalid_checkpoint':
      return { outcome: 'rejected', index: first.idx, decision: writeResult(first as WriteRow) as Exclude<WriteResult, { outcome: 'applied' }> };
  }
  if (first.record_version === null) throw new Error('kslate_transact applied writes without a record version');
  return {
    outcome: 'applied',
    record_version: first.record_version,
    created: first.created,
    expires_at: first.expires_ms === null || first.expires_ms === undefined ? null : new Date(Number(first.expires_ms)),
    writes: rows.map((r) =>
      r.outcome === 'applied'
        ? { op: ws[r.idx].op as 'put' | 'append', version: r.version }
        : {
            op: 'claim' as const,
            outcome: r.outcome as ClaimResult['outcome'],
            version: r.version,
            owner: r.owner,
            lease_expires_at: r.lease_expires_ms === null ? null : new Date(r.lease_expires_ms),
            took_over_from: r.took_over_from,
          },
    ),
  };
}
