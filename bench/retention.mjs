#!/usr/bin/env node
/**
 * History retention purge (issue 37): how fast the sweep's retention step purges a large
 * history, in budgeted sweeps. Seeds `--records` records x `--rows` history rows of one field
 * each (all older than the class's maxAge, so every row but the newest of each field is
 * purgeable), then runs sweeps with `--budget` ms until nothing is left, and reports rows
 * purged per second, each sweep's duration and the rows left.
 *
 *   npm run build && node bench/retention.mjs --records 1000 --rows 100 --budget 2000
 *
 * Needs KSLATE_BENCH_DATABASE_URL (or KSLATE_TEST_DATABASE_URL): an admin URL; a database of
 * its own is created and dropped. Writers do not run during this bench (put p99 during the
 * purge vs without, and the 10-minute size soak, are left for the full bench: see the report).
 */
import { randomBytes } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { migrateDb } from './lib/db.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const { values: opt } = parseArgs({
  options: {
    records: { type: 'string', default: '1000' },
    rows: { type: 'string', default: '100' },
    budget: { type: 'string', default: '2000' },
  },
});
const RECORDS = Number(opt.records);
const ROWS = Number(opt.rows);
const BUDGET = Number(opt.budget);
const say = (m) => process.stdout.write(`${m}\n`);
const admin = process.env.KSLATE_BENCH_DATABASE_URL ?? process.env.KSLATE_TEST_DATABASE_URL;
if (!admin) throw new Error('set KSLATE_BENCH_DATABASE_URL (an admin PostgreSQL URL)');

const name = `kslate_bench_ret_${randomBytes(4).toString('hex')}`;
const url = new URL(admin);
url.pathname = `/${name}`;
const run = async (u, q, params) => {
  const c = new pg.Client({ connectionString: u });
  await c.connect();
  try {
    return await c.query(q, params);
  } finally {
    await c.end();
  }
};

await run(admin, `create database ${name}`);
try {
  await migrateDb(url.toString(), DIST);
  const spec = { history: { maxAge: '1h' }, fields: { a: { kind: 'versioned' } }, roles: {} };
  let t0 = performance.now();
  await run(url.toString(), `insert into classes (name, namespace, spec) values ('ret', 'bench', $1::json)`, [JSON.stringify(spec)]);
  await run(url.toString(), `insert into records (class, rid, record_version) select 'ret', 'r' || g, $2 from generate_series(1, $1::int) g`, [RECORDS, ROWS]);
  await run(
    url.toString(),
    `insert into fields (record_id, class, name, kind, value, version, record_version, updated_at)
     select r.id, 'ret', 'a', 'versioned', '1'::json, $1, $1, now() from records r where r.class = 'ret'`,
    [ROWS],
  );
  await run(
    url.toString(),
    `insert into history (class, rid, field, op, version, record_version, value, author, outcome, created_at)
     select 'ret', 'r' || g, 'a', 'put', v, v, '1'::json, 'apikey:bench', 'applied', now() - interval '2 hours' + make_interval(secs => v)
     from generate_series(1, $1::int) g, generate_series(1, $2::int) v`,
    [RECORDS, ROWS],
  );
  await run(url.toString(), 'analyze');
  say(`seeded ${RECORDS * ROWS} history rows (${RECORDS} records x ${ROWS}) in ${Math.round(performance.now() - t0)} ms`);

  const { createPool, PgDb } = await import(join(DIST, 'db', 'kysely', 'index.js'));
  const { sweep } = await import(join(DIST, 'worker', 'sweep.js'));
  const db = new PgDb(createPool({ connectionString: url.toString(), max: 2 }));
  const log = { debug() {}, info() {}, warn() {}, error() {} };
  let total = 0;
  const sweeps = [];
  t0 = performance.now();
  for (let i = 0; i < 1000; i++) {
    const r = await sweep({ db, log, holder: 'bench' }, { budgetMs: BUDGET, steps: ['retention'] });
    const n = r.retention?.purged.get('ret') ?? 0;
    total += n;
    sweeps.push({ ms: r.durationMs, purged: n });
    if (!r.retention?.more) break;
  }
  const ms = performance.now() - t0;
  const left = Number((await run(url.toString(), `select count(*) as n from history where class = 'ret'`)).rows[0].n);
  await db.kysely.destroy();
  say(`purged ${total} rows in ${sweeps.length} sweep(s), ${Math.round(ms)} ms: ${Math.round(total / (ms / 1000))} rows/s`);
  say(`sweep durations (ms): ${sweeps.map((s) => s.ms).join(', ')}; budget ${BUDGET} ms`);
  say(`rows left: ${left} (expected ${RECORDS}: the current value of each record's field)`);
} finally {
  await run(admin, `drop database if exists ${name} with (force)`);
}
