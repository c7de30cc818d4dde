/**
 * Writes: each one statement that decides under the record's lock and applies, or writes the
 * rejection's history row (migration 0010): put and append (kslate_write), claim
 * (kslate_claim), checkpoint save; and the history row of a rejection the gateway decided
 * before the lock.
 */
import { sql, type Kysely } from 'kysely';
import type { ClaimResult, ClaimWrite, HistoryInsert, WriteRequest, WriteResult } from '../port.js';
import { j, type Statements } from './conn.js';
import type { Database } from './schema.js';

/** The put and append of migration 0010, named: decided and applied, or refused, in one statement. */
export const WRITE = {
  name: 'kslate_write',
  text: 'select outcome, version, record_version, created, cur_author, cur_value, cur_evidence, cur_updated_ms, moved, missing from kslate_write($1, $2, $3, $4, $5, $6, $7::jsonb, $8::text[], $9, $10, $11, $12, $13, $14, $15)',
};

/** The claim of migrations 0006 and 0010, named. */
export const CLAIM = {
  name: 'kslate_claim',
  text: 'select outcome, version, record_version, created, owner, lease_expires_ms, took_over_from from kslate_claim($1, $2, $3, $4, $5, $6, $7)',
};

export async function writeField(c: Statements, w: WriteRequest): Promise<WriteResult> {
  const res = await c.exec<WriteRow>(WRITE.name, WRITE.text, [
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
  ]);
  return writeResult(res.rows[0]);
}

/** A row of kslate_write (WRITE). */
interface WriteRow {
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
}

function writeResult(r: WriteRow): WriteResult {
  switch (r.outcome) {
    case 'applied':
      if (r.record_version === null) throw new Error('kslate_write applied a write without a record version');
      return { outcome: 'applied', version: r.version, record_version: r.record_version, created: r.created };
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
interface ClaimRow {
  outcome: ClaimResult['outcome'];
  version: number;
  record_version: number | null;
  created: boolean;
  owner: string | null;
  lease_expires_ms: number | null;
  took_over_from: string | null;
}

export async function claim(c: Statements, w: ClaimWrite): Promise<ClaimResult> {
  const res = await c.exec<ClaimRow>(CLAIM.name, CLAIM.text, [w.class, w.rid, w.field, w.author, w.identity_strength, w.lease_seconds, j(w.invocation)]);
  const { lease_expires_ms, ...r } = res.rows[0];
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
