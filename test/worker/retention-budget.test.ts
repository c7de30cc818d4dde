/**
 * The retention step keeps to `--sweep-budget` (issue 37): its batches are sized from the
 * rate it measures and shrink near the deadline, so a sweep ends within its budget plus one
 * small batch (fixed 10,000-row batches made 2 s sweeps last 3.3 s). Each class gets a share
 * of the budget. The deterministic test runs the real purge on a real PostgreSQL with a
 * virtual clock that each batch advances by a cost per row, so the bound is exact and the
 * test does not depend on the machine's load; a second test checks the same sweep on the
 * wall clock with a generous bound.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import type { SweepDb } from '../../db/port.js';
import { PURGE_BATCH, RETENTION_FIRST_BATCH, RETENTION_FIRST_BATCH_BY_RECORD, RETENTION_MIN_BATCH, sweep } from '../../worker/sweep.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { quietLog } from '../setup/gateway.js';
import { CITUS } from '../setup/citus.js';

/** On Citus a batch purges record by record (a delegated call each), so a walk's first batch is the small probe. */
const FIRST = CITUS ? RETENTION_FIRST_BATCH_BY_RECORD : RETENTION_FIRST_BATCH;

let tdb: TestDb;
let sql: pg.Client;
let db: PgDb;

/** `records` x `rows` history rows of field `a` in class `cls`, all older than its maxAge (1 h). */
async function seed(cls: string, records: number, rows: number) {
  const spec = { history: { maxAge: '1h' }, fields: { a: { kind: 'versioned' } }, roles: {} };
  await sql.query(`insert into classes (name, namespace, spec) values ($1, 'ns', $2::json)`, [cls, JSON.stringify(spec)]);
  await sql.query(`insert into records (class, rid, record_version) select $1, 'r' || g, $3 from generate_series(1, $2::int) g`, [cls, records, rows]);
  await sql.query(
    `insert into fields (rid, record_id, class, name, kind, value, version, record_version, updated_at)
     select r.rid, r.id, $1, 'a', 'versioned', '1'::json, $2, $2, now() from records r where r.class = $1`,
    [cls, rows],
  );
  await sql.query(
    `insert into history (class, rid, field, op, version, record_version, value, author, outcome, created_at)
     select $1, 'r' || g, 'a', 'put', v, v, '1'::json, 'apikey:t', 'applied', now() - interval '2 hours' + make_interval(secs => v)
     from generate_series(1, $2::int) g, generate_series(1, $3::int) v`,
    [cls, records, rows],
  );
}

beforeAll(async () => {
  tdb = await freshDatabase();
  sql = new pg.Client({ connectionString: tdb.url });
  await sql.connect();
  await seed('ret1', 100, 100);
  await seed('ret2', 100, 100);
  await sql.query('analyze');
  db = new PgDb(createPool({ connectionString: tdb.url, max: 2, timeoutMs: 60_000 }));
}, 120_000);
afterAll(async () => {
  await sql?.end();
  await db?.kysely.destroy();
  await tdb?.drop();
});

/** The cost model of the virtual clock: a fixed 2 ms per batch plus 0.1 ms per row read or deleted. */
const cost = (rows: number) => 2 + rows * 0.1;

test('batches follow the measured rate and shrink near the deadline: the sweep ends within budget plus one small batch', async () => {
  let clock = 0;
  // The real database, with a clock that each purge batch moves forward by its modelled cost.
  const timed = new Proxy(db, {
    get(target, prop) {
      if (prop === 'purgeHistory') {
        return async (...args: Parameters<SweepDb['purgeHistory']>) => {
          const r = await target.purgeHistory(...args);
          clock += cost(Math.max(r.scanned, r.purged));
          return r;
        };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  }) as PgDb;
  const budgetMs = 500;
  const report = await sweep({ db: timed, log: quietLog, holder: 'test/budget/virtual' }, { steps: ['retention'], budgetMs, now: () => clock });
  expect(report.ok, JSON.stringify(report.errors)).toBe(true);
  const r = report.retention!;
  const limits = r.batches.map((b) => b.limit);
  // 20,000 purgeable rows at 10 rows per virtual ms do not fit in 500 ms: the walk is left for the next sweep.
  expect(r.more).toBe(true);
  expect(report.durationMs, JSON.stringify(r.batches)).toBeLessThanOrEqual(budgetMs + cost(RETENTION_MIN_BATCH));
  // Sized, not fixed: the first batch of a walk is the probe size, none is above the cap, and
  // the batch that ran into the deadline was a minimum-size one.
  expect(limits[0]).toBe(FIRST);
  expect(Math.max(...limits)).toBeLessThanOrEqual(PURGE_BATCH);
  expect(Math.min(...limits)).toBe(RETENTION_MIN_BATCH);
  expect(limits.at(-1)).toBe(RETENTION_MIN_BATCH);
  // About budget / 10 of work per batch away from the deadline (10 rows/ms x 50 ms, within the smoothing).
  expect(limits.filter((l) => l > 300 && l < 700).length, JSON.stringify(limits)).toBeGreaterThan(0);
  // Both classes had a share of the budget.
  expect(r.purged.get('ret1')!).toBeGreaterThan(0);
  expect(r.purged.get('ret2')!).toBeGreaterThan(0);
  expect(new Set(r.batches.map((b) => b.class))).toEqual(new Set(['ret1', 'ret2']));
});

test('on the wall clock the sweep stays near its budget and the next sweeps finish the purge', async () => {
  const budgetMs = 1000;
  let left = true;
  for (let i = 0; i < 100 && left; i++) {
    const report = await sweep({ db, log: quietLog, holder: `test/budget/real/${i}` }, { steps: ['retention'], budgetMs });
    expect(report.ok, JSON.stringify(report.errors)).toBe(true);
    // Generous: a loaded 2-core machine can stall one small batch; a fixed 10,000-row batch overran by a second or more.
    expect(report.durationMs, JSON.stringify(report.retention!.batches)).toBeLessThan(budgetMs * 2.5);
    left = report.retention!.more;
  }
  expect(left).toBe(false);
  // What is left of each record: the row holding its field's current value.
  const n = (await sql.query(`select count(*)::int as n from history where class in ('ret1', 'ret2')`)).rows[0].n;
  expect(n).toBe(200);
}, 120_000);
