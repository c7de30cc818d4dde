/**
 * Reading a record: a get (its fields, values as their stored JSON text, and the entries of its append
 * fields within the response's byte budget) and a checkpoint load.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { CheckpointRow, EntryRow, FieldRow, ReadRecordOptions, RecordRow } from '../port.js';
import { ENTRY_BYTES, epochMs, FIELD_BYTES, ROW_OVERHEAD_BYTES, type Conn } from './conn.js';
import type { Database } from './schema.js';

/** A field row as the statements of this folder select it (`fieldColumns`): FieldRow without what a get adds. */
export type FieldColumns = Omit<FieldRow, 'entries' | 'entries_more' | 'bytes' | 'omitted'>;

/** The columns of FieldColumns from fields `f`; `value` is an expression so a budgeted read can leave it out. */
export function fieldColumns(value: RawBuilder<unknown> = sql`f.value`) {
  return sql`f.name, f.kind, ${value} as value, f.version, f.record_version, f.author, f.identity_strength, f.evidence,
   f.based_on, f.invocation, f.updated_at, f.owner, f.lease_expires_at, f.lease_lapsed,
   kslate_lease_held(f.owner, f.lease_expires_at, now()) as lease_held`;
}

/** One field of a get's packed array (the order of its json_build_array; times as epoch ms). */
type PackedField = [
  name: string,
  kind: string,
  value: null, // values follow the array (readRecord)
  version: number,
  record_version: number,
  author: string | null,
  identity_strength: string | null,
  evidence: string | null,
  based_on: FieldRow['based_on'],
  invocation: FieldRow['invocation'],
  updated_at: number,
  owner: string | null,
  lease_expires_at: number | null,
  lease_lapsed: boolean,
  lease_held: boolean,
  bytes: number,
  fits: boolean,
];

function unpackField(a: PackedField): FieldRow {
  return {
    name: a[0],
    kind: a[1],
    value: a[2],
    version: a[3],
    record_version: a[4],
    author: a[5],
    identity_strength: a[6],
    evidence: a[7],
    based_on: a[8],
    invocation: a[9],
    updated_at: new Date(a[10]),
    owner: a[11],
    lease_expires_at: a[12] === null ? null : new Date(a[12]),
    lease_held: a[14],
    lease_lapsed: a[13],
    bytes: a[15],
  };
}

/**
 * The get statements' field rows: the record's fields, or the named ones (the name filter is
 * explained in readRecord).
 */
const recordFields = (rid: string, names: string[] | null) =>
  // f.rid = the record's id as a value, not `= r.rid`: on Citus (migration 0014) a subquery in
  // the select list correlated only through r.rid leaves the fields table unpruned, so the
  // statement went to every shard (32 tasks, ~13 ms of planning on each worker; bench:citus
  // got 7 gets/s). With the value, records and fields both prune to the record's shard and
  // the coordinator routes the statement to that one node (test/citus/get-route.test.ts).
  names
    ? sql`f.rid = ${rid} and f.record_id = r.id and array_position(${names}::text[], f.name) is not null`
    : sql`f.rid = ${rid} and f.record_id = r.id`;

/** The record's own columns in a get statement (recordWith). */
interface RecordHead {
  rec_id: number;
  rec_version: number;
  rec_created: number;
  rec_expires: number | null;
  rec_last_write: number;
}

/** A get statement: the record's row, and `fields`, a subquery over its field rows (recordFields). */
const recordWith = (cls: string, rid: string, fields: RawBuilder<unknown>) => sql`
        select r.id as rec_id, r.record_version as rec_version, ${epochMs(sql`r.created_at`)} as rec_created,
          ${epochMs(sql`r.expires_at`)} as rec_expires, ${epochMs(sql`r.last_write_at`)} as rec_last_write,
          (${fields}) as fields
        from records r
        where r.class = ${cls} and r.rid = ${rid}`;

/** A RecordRow from a get statement's head. */
const recordRow = (r: RecordHead, cls: string, rid: string, fields: FieldRow[]): RecordRow => ({
  id: r.rec_id,
  class: cls,
  rid,
  record_version: r.rec_version,
  created_at: new Date(r.rec_created),
  expires_at: r.rec_expires === null ? null : new Date(Number(r.rec_expires)),
  last_write_at: new Date(Number(r.rec_last_write)),
  fields,
});

export async function readRecord(c: Conn, cls: string, rid: string, opts: ReadRecordOptions): Promise<RecordRow | null> {
  const names = opts.fields;
  // One statement: the record and its fields (a row per field, or one row with null
  // field columns). Values come along only when all the fields fit the budget (nearly
  // always: a window over the whole set costs next to nothing). Otherwise fields are kept
  // in name order while their running size stays within maxBytes (the first always) and
  // only the kept ones' values are read, in a second statement; the rest come back `omitted`.
  // The fields come as ONE text, parsed once: the driver's per-row, per-column parsing (and
  // its timestamp parser) cost more than the read itself. It is a JSON array of arrays
  // (times as epoch milliseconds, no values), then, when all fit, each value's stored JSON
  // text in name order, every part after a \x01: no JSON text holds a raw control character
  // (PostgreSQL's json input refuses one; json_agg escapes them), so the split is exact, and
  // the values reach the answer as they are stored, neither parsed nor re-serialised
  // (FieldRow.valueText; docs/performance.md "Where a get's CPU goes").
  // The name filter is `array_position(...) is not null`, not `name = any(...)`: with
  // `= any($2)` PostgreSQL 18 estimates the generic plan (unknown array) above the custom
  // one once the fields table is large and skewed, so the plan cache re-planned this named
  // statement on every execution (0.27 ms of PostgreSQL CPU per get against 0.12 ms with
  // the generic plan; docs/performance.md). A filter no estimate depends on costs the
  // same in both plans, so the generic plan is kept; the index scan is on record_id alone
  // and a record has few field rows.
  const res = await c.named<RecordHead & { fields: string }>(
    names ? 'kslate_read_record_some' : 'kslate_read_record',
    names ? [opts.maxBytes, rid, names, cls, rid] : [opts.maxBytes, rid, cls, rid],
    () =>
      recordWith(cls, rid, sql`select coalesce(json_agg(json_build_array(
              x.name, x.kind, null, x.version, x.record_version, x.author, x.identity_strength,
              x.evidence, x.based_on, x.invocation, ${epochMs(sql`x.updated_at`)}, x.owner, ${epochMs(sql`x.lease_expires_at`)},
              x.lease_lapsed, kslate_lease_held(x.owner, x.lease_expires_at, now()), x.sz, x.fits) order by x.name)::text, '[]')
              || coalesce(string_agg(case when x.fits then chr(1) || coalesce(x.value::text, 'null') end, '' order by x.name), '')
           from (select f.*, ${FIELD_BYTES} as sz, sum(${FIELD_BYTES}) over () <= ${opts.maxBytes} as fits
                 from fields f
                 where ${recordFields(rid, names)}) x`),
  );
  const r = res.rows[0];
  if (!r) return null;
  const id = r.rec_id;
  const parts = r.fields.split('\x01');
  const packed = JSON.parse(parts[0]) as PackedField[];
  const fields = packed.map(unpackField);
  if (packed.length > 0 && packed[0][16]) {
    for (let i = 0; i < fields.length; i++) {
      fields[i].value = undefined;
      fields[i].valueText = parts[i + 1];
    }
  } else if (packed.length > 0) {
    let running = 0;
    const kept: string[] = [];
    for (const f of fields) {
      running += f.bytes ?? 0;
      if (kept.length > 0 && running > opts.maxBytes) f.omitted = true;
      else kept.push(f.name);
    }
    const values = await c.kysely.selectFrom('fields').select(['name', 'value']).where('rid', '=', rid).where('record_id', '=', id).where('name', 'in', kept).execute();
    const byName = new Map(values.map((v) => [v.name, v.value]));
    for (const f of fields) if (!f.omitted) f.value = byName.get(f.name) ?? null;
  }
  let spent = 0;
  for (const f of fields) if (!f.omitted) spent += f.bytes ?? 0;
  const appendFields = fields.filter((f) => f.kind === 'append' && !f.omitted);
  if (appendFields.length > 0) {
    const entries = await readEntries(c.kysely, rid, id, appendFields.map((f) => f.name), {
      limit: opts.entriesLimit,
      beforeSeq: opts.entriesBeforeSeq,
      maxBytes: Math.max(0, opts.maxBytes - spent),
    });
    for (const f of appendFields) {
      const list = entries.get(f.name) ?? [];
      f.entries = list;
      // Seqs run 1..version without gaps, so what the read could have returned is known.
      const below = opts.entriesBeforeSeq === null ? f.version : Math.min(f.version, opts.entriesBeforeSeq - 1);
      const wanted = opts.entriesLimit === null ? below : Math.min(opts.entriesLimit, below);
      f.entries_more = list.length < wanted;
    }
  }
  return recordRow(r, cls, rid, fields);
}

/**
 * The entries of a get, per append field, oldest first: for each field its newest `limit`
 * (all when null) below `beforeSeq`, fields in the given order, kept while the running size
 * stays within `maxBytes` (the very first entry always, so a continuation always advances).
 * Only sizes are read for candidates; values only for the entries kept. No entry costs less
 * than ROW_OVERHEAD_BYTES, which bounds the candidates too.
 */
async function readEntries(
  db: Kysely<Database>,
  rid: string,
  recordId: number,
  names: string[],
  opts: { limit: number | null; beforeSeq: number | null; maxBytes: number },
): Promise<Map<string, EntryRow[]>> {
  const fit = Math.floor(opts.maxBytes / ROW_OVERHEAD_BYTES) + 1;
  const cap = opts.limit === null ? fit : Math.min(opts.limit, fit);
  const out = new Map<string, EntryRow[]>();
  if (cap === 0) return out;
  // One pass: candidates (newest first per field, values still TOASTed), their running size
  // in field order, and only the kept rows leave the query with their values.
  const rows = await sql<EntryRow & { field: string }>`
    select c.field, c.seq, c.value, c.author, c.identity_strength, c.evidence, c.based_on, c.invocation, c.created_at
    from (
      select n.field, n.ord, e.*, sum(e.sz) over w as running, row_number() over w as rn
      from unnest(${names}::text[]) with ordinality as n(field, ord)
      cross join lateral (
        select e.seq, e.value, e.author, e.identity_strength, e.evidence, e.based_on, e.invocation, e.created_at,
               ${ENTRY_BYTES} as sz
        from entries e
        where e.rid = ${rid} and e.record_id = ${recordId} and e.field = n.field
          ${opts.beforeSeq === null ? sql`` : sql`and e.seq < ${opts.beforeSeq}`}
        order by e.seq desc limit ${cap}) e
      window w as (order by n.ord, e.seq desc)) c
    where c.running <= ${opts.maxBytes} or c.rn = 1
    order by c.ord, c.seq`.execute(db);
  for (const { field, ...entry } of rows.rows) {
    const list = out.get(field) ?? [];
    list.push(entry);
    out.set(field, list);
  }
  return out;
}

/** The record's current fields (values left out) and a role's checkpoint; null when the record does not exist. */
export async function loadCheckpoint(
  db: Kysely<Database>,
  cls: string,
  rid: string,
  role: string,
): Promise<{ record_version: number; checkpoint: CheckpointRow | null; fields: FieldRow[] } | null> {
  const r = await db
    .selectFrom('records as r')
    .leftJoin('checkpoints as c', (join) => join.onRef('c.rid', '=', 'r.rid').onRef('c.record_id', '=', 'r.id').on('c.role', '=', role))
    .select(['r.id', 'r.record_version', 'c.checkpoint_id', 'c.document', 'c.record_version as cp_version'])
    .where('r.class', '=', cls)
    .where('r.rid', '=', rid)
    .executeTakeFirst();
  if (!r) return null;
  const fields = await sql<FieldColumns>`
    select ${fieldColumns(sql`null::json`)} from fields f where f.rid = ${rid} and f.record_id = ${r.id} order by f.name`.execute(db);
  return {
    record_version: r.record_version,
    checkpoint:
      r.checkpoint_id === null || r.document === null || r.cp_version === null
        ? null
        : { checkpoint_id: r.checkpoint_id, document: r.document, record_version: r.cp_version },
    fields: fields.rows,
  };
}
