/**
 * Query: records of a class matching every filter, in creation order, a page at a time within
 * the response's byte budget.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { EntryRow, FieldRow, QueryFilter, QueryRow } from '../port.js';
import { ENTRY_BYTES, FIELD_BYTES, ROW_OVERHEAD_BYTES, type Conn } from './conn.js';
import { fieldColumns, type FieldColumns } from './record.js';
import type { Database } from './schema.js';

/** A match of the page query. */
interface PageRow {
  id: number;
  rid: string;
  record_version: number;
}

/**
 * Records of `cls` matching every filter, by creation (id) after `afterId`: at most `limit`,
 * fewer when their running size passes `maxBytes` (the first always). `more` is true when
 * further matches remain.
 */
export async function queryRecords(
  c: Conn,
  cls: string,
  filters: QueryFilter[],
  opts: { afterId: number; limit: number; fields: string[]; maxBytes: number },
): Promise<{ rows: QueryRow[]; more: boolean }> {
  const db = c.kysely;
  const shown = opts.fields;
  // limit + 1 matches, to see whether more remain.
  const res = await queryRecordsStatement(cls, filters, { afterId: opts.afterId, limit: opts.limit + 1 }).execute(db);
  let page = res.rows.slice(0, opts.limit);
  if (page.length === 0 || shown.length === 0) {
    return { rows: page.map((r) => ({ ...r, fields: [] })), more: res.rows.length > page.length };
  }
  // Nearly always the whole page fits the byte budget: its fields (and latest entries)
  // come with their values in one statement each, which say whether they all fit.
  // On Citus (migration 0014) the page's records lie on several nodes: the per-record
  // lookups over the page's ids (lateral joins, correlated subqueries) cannot be pushed down
  // to the shards, so the same rows are read by statements Citus can (DISTINCT ON led by the
  // distribution column, materialized CTEs). Plain PostgreSQL keeps its index-per-key shapes.
  const citus = await c.citus();
  let read = await pageFields(db, page.map((r) => r.id), shown, opts.maxBytes, citus);
  if (!read) {
    // It does not: measure each record (its shown fields and, for append fields, the
    // latest entry, what query shows of them) and keep records while the running size
    // stays within the budget, the first always; then read just those.
    const ids = page.map((r) => r.id);
    const sizes = citus
      ? await sql<{ id: number; sz: number }>`
      with fs as materialized (
        select f.record_id, f.name, f.kind, ${FIELD_BYTES} as sz from fields f
        where f.record_id = any(${ids}::bigint[]) and f.name = any(${shown}::text[])
      ), es as materialized (
        select distinct on (e.rid, e.record_id, e.field) e.record_id, e.field, ${ENTRY_BYTES} as sz from entries e
        where e.record_id = any(${ids}::bigint[]) and e.field = any(${shown}::text[])
        order by e.rid, e.record_id, e.field, e.seq desc
      )
      select fs.record_id as id, sum(fs.sz + case when fs.kind = 'append' then coalesce(es.sz, 0) else 0 end) as sz
      from fs left join es on es.record_id = fs.record_id and es.field = fs.name
      group by fs.record_id`.execute(db)
      : await sql<{ id: number; sz: number }>`
      select k.id, coalesce((
        select sum(${FIELD_BYTES} + case when f.kind = 'append' then coalesce((
                 select ${ENTRY_BYTES} from entries e where e.record_id = f.record_id and e.field = f.name
                 order by e.seq desc limit 1), 0) else 0 end)
        from fields f where f.record_id = k.id and f.name = any(${shown}::text[])), 0) as sz
      from unnest(${ids}::bigint[]) as k(id)`.execute(db);
    const size = new Map(sizes.rows.map((r) => [r.id, r.sz]));
    let running = 0;
    const kept: PageRow[] = [];
    for (const r of page) {
      running += (size.get(r.id) ?? 0) + ROW_OVERHEAD_BYTES;
      if (kept.length > 0 && running > opts.maxBytes) break;
      kept.push(r);
    }
    page = kept;
    // Without a budget the fields always come back.
    read = (await pageFields(db, page.map((r) => r.id), shown, Number.MAX_SAFE_INTEGER, citus)) ?? new Map<number, FieldRow[]>();
  }
  const fieldsOf = read;
  const rows = page.map((r) => ({ ...r, fields: fieldsOf.get(r.id) ?? [] }));
  return { rows, more: res.rows.length > page.length };
}

/**
 * The shown fields of a page of records (append fields with their latest entry), or null
 * when they do not all fit `maxBytes`; then no value was read.
 */
async function pageFields(db: Kysely<Database>, ids: number[], shown: string[], maxBytes: number, citus: boolean): Promise<Map<number, FieldRow[]> | null> {
  const total = sql`sum(${FIELD_BYTES}) over ()`;
  const fieldRows = await sql<FieldColumns & { record_id: number; total: number }>`
    select f.record_id, ${fieldColumns(sql`case when ${total} <= ${maxBytes} then f.value end`)}, ${total} as total
    from fields f
    where f.record_id = any(${ids}::bigint[]) and f.name = any(${shown}::text[])
    order by f.record_id, f.name`.execute(db);
  const spent = fieldRows.rows.length > 0 ? fieldRows.rows[0].total + ids.length * ROW_OVERHEAD_BYTES : 0;
  if (spent > maxBytes) return null;
  const byRecord = new Map<number, FieldRow[]>();
  const appendNames = new Set<string>();
  for (const { record_id, total: _total, ...f } of fieldRows.rows) {
    if (f.kind === 'append') appendNames.add(f.name);
    const list = byRecord.get(record_id) ?? [];
    list.push(f);
    byRecord.set(record_id, list);
  }
  if (appendNames.size > 0) {
    const latest = await latestEntries(db, ids, [...appendNames], maxBytes - spent, citus);
    if (!latest) return null;
    for (const [id, list] of byRecord) {
      for (const f of list) if (f.kind === 'append') f.entries = latest.get(`${id}:${f.name}`) ?? [];
    }
  }
  return byRecord;
}

/**
 * The latest entry per (record, append field), keyed `id:field` (query shows only that one),
 * or null when they do not all fit `maxBytes` (then no value was read).
 */
async function latestEntries(db: Kysely<Database>, recordIds: number[], names: string[], maxBytes: number, citus: boolean) {
  type Row = EntryRow & { record_id: number; field: string; total: number };
  // Citus: each key's latest entry by DISTINCT ON led by `rid` (pushed down to every shard),
  // the budget's window over the gathered rows on the coordinator.
  const rows = citus
    ? await sql<Row>`
    with latest as materialized (
      select distinct on (e.rid, e.record_id, e.field) e.record_id, e.field, e.seq, e.value, e.author, e.identity_strength,
             e.evidence, e.based_on, e.invocation, e.created_at, ${ENTRY_BYTES} as sz
      from entries e
      where e.record_id = any(${recordIds}::bigint[]) and e.field = any(${names}::text[])
      order by e.rid, e.record_id, e.field, e.seq desc
    )
    select record_id, field, seq, case when sum(sz) over () <= ${maxBytes} then value end as value, author,
           identity_strength, evidence, based_on, invocation, created_at, sum(sz) over () as total
    from latest
    order by record_id, field`.execute(db)
    : await sql<Row>`
    select k.record_id, n.field, e.seq, case when sum(e.sz) over () <= ${maxBytes} then e.value end as value, e.author,
           e.identity_strength, e.evidence, e.based_on, e.invocation, e.created_at, sum(e.sz) over () as total
    from unnest(${recordIds}::bigint[]) as k(record_id)
    cross join unnest(${names}::text[]) as n(field)
    cross join lateral (
      select e.*, ${ENTRY_BYTES} as sz from entries e where e.record_id = k.record_id and e.field = n.field
      order by e.seq desc limit 1
    ) e
    order by k.record_id, n.field`.execute(db);
  const byKey = new Map<string, EntryRow[]>();
  for (const { record_id, field, total, ...entry } of rows.rows) {
    if (total > maxBytes) return null;
    byKey.set(`${record_id}:${field}`, [entry]);
  }
  return byKey;
}

/**
 * The page query of `queryRecords`: record ids, rids and versions matching every filter,
 * in creation order after `afterId`. Exported so a test can EXPLAIN the very statement.
 */
export function queryRecordsStatement(cls: string, filters: QueryFilter[], opts: { afterId: number; limit: number }) {
  // The first filter drives: its index (class, name, md5(value), record_id) or
  // (class, name, owner, record_id) yields matches in creation order, so the scan stops
  // after `limit` matches; the others are checked per match. A filter with several
  // candidate values (a JSON string and its parsed form) becomes one ordered branch per
  // candidate under UNION ALL, merged in order: `md5 = ANY(...)` would lose the index
  // order and sort every match. Without filters, records_class_id walks the class.
  const [first, ...rest] = filters;
  const valueCond = (a: ReturnType<typeof sql.raw>, field: string, v: unknown) => {
    const text = JSON.stringify(v);
    return sql`${a}.name = ${field} and md5((${a}.value::jsonb)::text) = md5((${text}::jsonb)::text)
               and ${a}.value::jsonb = ${text}::jsonb`;
  };
  const cond = (f: QueryFilter, alias: string) => {
    const a = sql.raw(alias);
    if (f.owner !== undefined) {
      return sql`${a}.name = ${f.field} and ${a}.owner = ${f.owner} and kslate_lease_held(${a}.owner, ${a}.lease_expires_at, now())`;
    }
    return sql`(${sql.join(
      (f.values ?? []).map((v) => sql`(${valueCond(a, f.field, v)})`),
      sql` or `,
    )})`;
  };
  const others = rest.map(
    (f, i) => sql`and exists (select 1 from fields ${sql.raw(`o${i}`)} where ${sql.raw(`o${i}`)}.rid = f1.rid and ${sql.raw(`o${i}`)}.record_id = f1.record_id and ${cond(f, `o${i}`)})`,
  );
  const branch = (driving: RawBuilder<unknown>) => sql`(
    select f1.record_id, f1.rid from fields f1
    where f1.class = ${cls} and ${driving} and f1.record_id > ${opts.afterId}
      ${sql.join(others, sql` `)}
    order by f1.record_id limit ${opts.limit})`;
  const f1 = sql.raw('f1');
  const branches = !first
    ? []
    : first.owner !== undefined
      ? [branch(cond(first, 'f1'))]
      : (first.values ?? []).map((v) => branch(valueCond(f1, first.field, v)));
  return first
    ? sql<PageRow>`
        select r.id, r.rid, r.record_version
        from (${sql.join(branches, sql` union all `)}) m join records r on r.rid = m.rid and r.id = m.record_id
        order by m.record_id limit ${opts.limit}`
    : sql<PageRow>`
        select r.id, r.rid, r.record_version from records r
        where r.class = ${cls} and r.id > ${opts.afterId}
        order by r.id limit ${opts.limit}`;
}
