/**
 * History retention per class (issue 37, migration 0013): the sweep purges rows older than
 * maxAge, beyond the newest keepLast per field, and rejected attempts older than
 * rejectedMaxAge, in bounded batches; it never purges the row holding a field's current
 * value, the newest row per field, or the applied rows after the oldest checkpoint; a class
 * change applies on the next sweep; readers of a purged history see `truncated_before`.
 * Against a real gateway and PostgreSQL.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { createWorkerMetrics } from '../../runtime/worker-metrics.js';
import { retentionRules, sweep, type SweepDeps } from '../../worker/sweep.js';
import { updateRows } from '../setup/db.js';
import { startTestGateway, quietLog, type ClassInput, type TestGateway } from '../setup/gateway.js';

const roles = { crew: { subjects: ['apikey:alice', 'apikey:bob'], read: ['*'], write: ['*'] } };
const fields = { a: { kind: 'versioned' as const }, b: { kind: 'versioned' as const }, s: { kind: 'soft' as const } };
const cls = (name: string, history?: Record<string, unknown>): ClassInput => ({
  name,
  namespace: 'team-a',
  spec: { ...(history ? { history } : {}), fields, roles },
});

let t: TestGateway;
let sql: pg.Client;
let db: PgDb;
let holderN = 0;
const deps = (): SweepDeps => ({ db, log: quietLog, holder: `test/retention/${++holderN}` });

beforeAll(async () => {
  t = await startTestGateway([
    cls('last3', { keepLast: 3 }),
    cls('aged', { maxAge: '1h' }),
    cls('rejects', { rejectedMaxAge: '1h' }),
    cls('forever'),
    cls('batch', { maxAge: '1h' }),
    cls('weekly'),
  ]);
  sql = new pg.Client({ connectionString: t.db.url });
  await sql.connect();
  db = new PgDb(createPool({ connectionString: t.db.url, max: 4, timeoutMs: 60_000 }));
}, 120_000);
afterAll(async () => {
  await sql?.end();
  await db?.kysely.destroy();
  await t?.close();
});

/** Versioned puts of `field` from version `from`, each expecting the previous one. */
async function puts(c: string, id: string, field: string, n: number, from = 0) {
  for (let i = 0; i < n; i++) {
    const r = await t.call('alice', 'PUT', `/v1/records/${c}/${id}/fields/${field}`, { value: `v${from + i + 1}`, expected_version: from + i });
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  }
}
const rows = async (c: string, id: string) =>
  (await sql.query(`select field, version, outcome, record_version from history where class = $1 and rid = $2 order by field, id`, [c, id])).rows;
/** Pretend every history row of the record was written `seconds` ago. */
const backdate = (c: string, id: string, seconds: number) =>
  updateRows(sql, 'history', `created_at = created_at - make_interval(secs => ${Number(seconds)})`, `class = ${pg.escapeLiteral(c)} and rid = ${pg.escapeLiteral(id)}`);

test('keepLast keeps the newest rows per field; other fields and classes without history are left alone', async () => {
  await puts('last3', 'r1', 'a', 6);
  await puts('last3', 'r1', 'b', 2);
  await puts('forever', 'r1', 'a', 6);
  const report = await sweep(deps());
  expect(report.ok, JSON.stringify(report.errors)).toBe(true);
  expect(report.retention!.purged.get('last3')).toBe(3);
  expect(report.retention!.purged.has('forever')).toBe(false);
  expect((await rows('last3', 'r1')).map((r) => `${r.field}${r.version}`)).toEqual(['a4', 'a5', 'a6', 'b1', 'b2']);
  expect(await rows('forever', 'r1')).toHaveLength(6);
  // A later write pushes the oldest kept row out on the next sweep.
  await puts('last3', 'r1', 'a', 1, 6);
  await sweep(deps());
  expect((await rows('last3', 'r1')).map((r) => `${r.field}${r.version}`)).toEqual(['a5', 'a6', 'a7', 'b1', 'b2']);
});

test('maxAge purges old rows but never the current value, the newest row per field, or rows after the oldest checkpoint', async () => {
  await puts('aged', 'plain', 'a', 4);
  // A rejected attempt newer than the current value: the newest row of the field, kept; the current value's row too.
  await puts('aged', 'stale', 'a', 3);
  expect((await t.call('bob', 'PUT', '/v1/records/aged/stale/fields/a', { value: 'x', expected_version: 1 })).status).toBe(409);
  // A checkpoint at record version 2: the rows after it stay however old they are.
  await puts('aged', 'cp', 'a', 2);
  expect((await t.call('alice', 'PUT', '/v1/records/aged/cp/checkpoint', { document: { step: 1 } })).status).toBeLessThan(300);
  await puts('aged', 'cp', 'a', 2, 2);
  await puts('aged', 'cp', 'b', 1);
  for (const id of ['plain', 'stale', 'cp']) await backdate('aged', id, 7200);
  await puts('aged', 'plain', 'b', 1); // fresh: younger than maxAge

  const report = await sweep(deps());
  expect(report.ok, JSON.stringify(report.errors)).toBe(true);
  expect((await rows('aged', 'plain')).map((r) => `${r.field}${r.version}`)).toEqual(['a4', 'b1']);
  expect((await rows('aged', 'stale')).map((r) => `${r.field}${r.version ?? '-'}:${r.outcome}`)).toEqual(['a3:applied', 'a-:stale']);
  // cp: a1 and a2 (record versions 1 and 2) purged; a3, a4 and b1 came after the checkpoint (record version 2).
  expect((await rows('aged', 'cp')).map((r) => `${r.field}${r.version}`)).toEqual(['a3', 'a4', 'b1']);
  // Checkpoint load still answers from the current fields.
  const load = await t.call('alice', 'GET', '/v1/records/aged/cp/checkpoint');
  expect(load.status).toBe(200);
  expect(load.body.changed_fields.map((f: any) => f.field)).toEqual(['a', 'b']);
});

test('rejectedMaxAge purges old rejected attempts only', async () => {
  await puts('rejects', 'r', 'a', 2);
  for (let i = 0; i < 3; i++) {
    expect((await t.call('bob', 'PUT', '/v1/records/rejects/r/fields/a', { value: 'x', expected_version: 0 })).status).toBe(409);
  }
  await puts('rejects', 'r', 'a', 1, 2); // the newest row is applied again
  await backdate('rejects', 'r', 7200);
  await sweep(deps());
  expect((await rows('rejects', 'r')).map((r) => `${r.version ?? '-'}:${r.outcome}`)).toEqual(['1:applied', '2:applied', '3:applied']);
});

test('a class change from keep-forever to a maxAge applies to existing rows on the next sweep', async () => {
  await puts('forever', 'c', 'a', 5);
  await backdate('forever', 'c', 7200);
  await sweep(deps());
  expect(await rows('forever', 'c')).toHaveLength(5);
  const spec = { fields, roles, history: { maxAge: '1h' } };
  await sql.query(`update classes set spec = $1 where name = 'forever'`, [JSON.stringify(spec)]);
  const report = await sweep(deps());
  expect(report.retention!.purged.get('forever')).toBeGreaterThanOrEqual(4);
  expect((await rows('forever', 'c')).map((r) => r.version)).toEqual(['5']);
  // And back: a longer maxAge restarts the walk, nothing more is purged.
  await sql.query(`update classes set spec = $1 where name = 'forever'`, [JSON.stringify({ ...spec, history: { maxAge: '30d' } })]);
  await sweep(deps());
  expect((await rows('forever', 'c')).map((r) => r.version)).toEqual(['5']);
});

test('batches are bounded and read about as many rows as they delete (the class-age index, from the cursor)', async () => {
  for (let r = 0; r < 5; r++) await puts('batch', `b${r}`, 'a', 5);
  for (let r = 0; r < 5; r++) await backdate('batch', `b${r}`, 7200);
  const rules = retentionRules({ fields: {}, roles: {}, history: { maxAge: '1h' } })!;
  const seen: number[] = [];
  let more = true;
  let purged = 0;
  while (more) {
    const b = await db.purgeHistory('batch', 'age', rules, 4);
    expect(b.scanned).toBeLessThanOrEqual(4);
    expect(b.purged).toBeLessThanOrEqual(4);
    seen.push(b.scanned);
    purged += b.purged;
    more = b.more;
  }
  expect(purged).toBe(20); // 5 records x 4 old rows, the current value of each kept
  // Each row was read once: the walk never goes back over kept rows.
  expect(seen.reduce((a, b) => a + b, 0), JSON.stringify(seen)).toBe(25);
  const again = await db.purgeHistory('batch', 'age', rules, 4);
  expect(again).toEqual({ purged: 0, scanned: 0, more: false });
  // The candidate read walks history_class_age within the class, never the table.
  await sql.query('set enable_seqscan = off');
  const plan = (await sql.query(`explain select h.id from history h where h.class = 'batch' and h.created_at < now() - interval '1 hour'
      and (h.created_at, h.id) > (now() - interval '10 days', 0) order by h.created_at, h.id limit 4`)).rows.map((r) => r['QUERY PLAN']).join('\n');
  await sql.query('reset enable_seqscan');
  expect(plan).toMatch(/history_class_age/);
});

test('a row kept only by a checkpoint is purged on the next sweep after the checkpoint is re-saved past it', async () => {
  // A checkpoint at record version 2, then two more puts of a: a3 and a4 come after it.
  await puts('aged', 'cp2', 'a', 2);
  expect((await t.call('alice', 'PUT', '/v1/records/aged/cp2/checkpoint', { document: { step: 1 } })).status).toBeLessThan(300);
  await puts('aged', 'cp2', 'a', 2, 2);
  await backdate('aged', 'cp2', 7200);
  await sweep(deps());
  // a3 is neither the current value nor the newest row: the checkpoint alone keeps it.
  expect((await rows('aged', 'cp2')).map((r) => `${r.field}${r.version}`)).toEqual(['a3', 'a4']);
  // Another sweep with nothing new changes nothing (the walks' cursors are past a3).
  await sweep(deps());
  expect((await rows('aged', 'cp2')).map((r) => `${r.field}${r.version}`)).toEqual(['a3', 'a4']);
  // Re-saved at record version 4: nothing after it; the next sweep purges a3, keeps the current value.
  expect((await t.call('alice', 'PUT', '/v1/records/aged/cp2/checkpoint', { document: { step: 2 } })).status).toBeLessThan(300);
  const report = await sweep(deps());
  expect(report.ok, JSON.stringify(report.errors)).toBe(true);
  expect((await rows('aged', 'cp2')).map((r) => `${r.field}${r.version}`)).toEqual(['a4']);
  const page = await t.call('alice', 'GET', '/v1/records/aged/cp2/history');
  expect(page.body.truncated_before).toBeDefined();
});

test('a class change from keep-forever to 7 days applies to existing rows on the next sweep', async () => {
  await puts('weekly', 'w', 'a', 4);
  await updateRows(sql, 'history', `created_at = created_at - interval '8 days'`, `class = 'weekly' and rid = 'w' and version <= 3`);
  await sweep(deps());
  expect(await rows('weekly', 'w')).toHaveLength(4); // kept forever
  await sql.query(`update classes set spec = $1 where name = 'weekly'`, [JSON.stringify({ fields, roles, history: { maxAge: '7d' } })]);
  const report = await sweep(deps());
  expect(report.retention!.purged.get('weekly')).toBe(3);
  // The 8-day-old rows went; the fresh current value stays.
  expect((await rows('weekly', 'w')).map((r) => r.version)).toEqual(['4']);
});

test('the worker metrics count rows purged per class and give the oldest retained row age per class (classes with history only)', async () => {
  await puts('aged', 'metrics', 'a', 4);
  await backdate('aged', 'metrics', 7200);
  const report = await sweep(deps());
  expect(report.ok, JSON.stringify(report.errors)).toBe(true);
  const purged = report.retention!.purged.get('aged')!;
  expect(purged).toBeGreaterThanOrEqual(3);
  const m = createWorkerMetrics();
  m.setGauges(report.gauges!, await db.listClasses());
  m.sweepDone(report);
  const text = await m.registry.metrics();
  const value = (name: string, cls: string) => {
    const line = text.split('\n').find((l) => l.startsWith(`${name}{class="${cls}"}`));
    return line === undefined ? undefined : Number(line.split(' ').at(-1));
  };
  expect(value('svc_history_purged_total', 'aged')).toBe(purged);
  // The kept rows of the class's records were written 2 h ago (backdated; the current values stay): the oldest retained row is that old.
  expect(value('svc_history_oldest_row_age_seconds', 'aged')).toBeGreaterThanOrEqual(7200);
  expect(value('svc_history_oldest_row_age_seconds', 'aged')).toBeLessThan(7200 + 600);
  // A class without history has no oldest-row series.
  const withHistory = new Set((await db.listClasses()).filter((c) => retentionRules(c.spec as never)).map((c) => c.name));
  for (const l of text.split('\n').filter((x) => x.startsWith('svc_history_oldest_row_age_seconds{'))) {
    expect(withHistory.has(/class="([^"]+)"/.exec(l)![1]!), l).toBe(true);
  }
});
