#!/usr/bin/env node
/**
 * History retention (issue 37), three parts, against `kslate serve` as a child process and
 * budgeted sweeps in this process (the compiled dist/worker/sweep.js with its own pool, as
 * `kslate worker` runs them):
 *
 * 1. Purge under load: seeds `--records` x `--rows` history rows of one field, all older than
 *    the class's maxAge (every row but the current value of each record is purgeable), then
 *    runs sweeps with `--budget` ms back to back until nothing is left, while `--clients`
 *    clients put to live records of the same class and `--readers` clients page through the
 *    purged records' histories. Reports rows purged per second, each sweep's duration against
 *    the budget, the batch sizes, put p99 during the purge against the same load without it,
 *    and the gap check: a reader's full read (every page) of a record whose versions do not
 *    reach back to version 1 without a hole must have met `truncated_before` on some page.
 * 2. Size soak: `--soak` seconds of the same write load twice, on a class that keeps every
 *    row and on one with `history: {keepLast: 5}` (sweeps every `--sweep-every` s), sampling
 *    the history rows of each class and the history table's size; with retention it levels off.
 *
 *   npm run bench:retention -- --soak 600         # the full run: 1,000,000 rows, 64 clients, 10-minute soaks
 *   npm run bench:retention                       # the same with 1-minute soaks (the default)
 *   npm run build && node bench/retention.mjs --records 1000 --rows 100 --soak 30   # a quick look
 *
 * KSLATE_BENCH_DATABASE_URL (or KSLATE_TEST_DATABASE_URL): an admin URL; a database of its
 * own is created and dropped. KSLATE_RETENTION_ROWS overrides --records x --rows as a total
 * (records of 100 rows each), so a CI run can take a smaller count than the bench.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { stringify } from 'yaml';
import { migrateDb } from './lib/db.mjs';
import { authOf, startGateway, writeConfig } from './lib/gateway.mjs';
import { cannon } from './lib/load.mjs';
import { round } from './lib/util.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const { values: opt } = parseArgs({
  options: {
    records: { type: 'string', default: '10000' },
    rows: { type: 'string', default: '100' },
    budget: { type: 'string', default: '2000' },
    clients: { type: 'string', default: '64' },
    readers: { type: 'string', default: '4' },
    live: { type: 'string', default: '1024' },
    duration: { type: 'string', default: '10' },
    soak: { type: 'string', default: '60' },
    'sweep-every': { type: 'string', default: '5' },
    'sample-every': { type: 'string', default: '' },
    out: { type: 'string', default: join(ROOT, 'bench', 'results') },
  },
});
const envRows = process.env.KSLATE_RETENTION_ROWS ? Number(process.env.KSLATE_RETENTION_ROWS) : null;
const ROWS = envRows ? 100 : Number(opt.rows);
const RECORDS = envRows ? Math.max(1, Math.round(envRows / 100)) : Number(opt.records);
const BUDGET = Number(opt.budget);
const CLIENTS = Number(opt.clients);
const READERS = Number(opt.readers);
const LIVE = Number(opt.live);
const DURATION = Number(opt.duration);
const SOAK = Number(opt.soak);
const SWEEP_EVERY = Number(opt['sweep-every']);
const SAMPLE_EVERY = opt['sample-every'] ? Number(opt['sample-every']) : Math.max(1, Math.round(SOAK / 20));
const say = (m) => process.stdout.write(`${m}\n`);
const admin = process.env.KSLATE_BENCH_DATABASE_URL ?? process.env.KSLATE_TEST_DATABASE_URL;
if (!admin) throw new Error('set KSLATE_BENCH_DATABASE_URL (an admin PostgreSQL URL)');

const name = `kslate_bench_ret_${randomBytes(4).toString('hex')}`;
const url = new URL(admin);
url.pathname = `/${name}`;
const DB = url.toString();
const run = async (u, q, params) => {
  const c = new pg.Client({ connectionString: u });
  await c.connect();
  try {
    return await c.query(q, params);
  } finally {
    await c.end();
  }
};

const subjects = Array.from({ length: Math.max(CLIENTS, READERS) }, (_, i) => `apikey:bench-${i}`);
const roles = { agent: { subjects, read: ['*'], write: ['*'] } };
const CLASSES = {
  ret: { history: { maxAge: '1h' }, fields: { a: { kind: 'versioned' }, w: { kind: 'soft' } }, roles },
  soak_keep: { fields: { w: { kind: 'soft' } }, roles },
  soak_ret: { history: { keepLast: 5 }, fields: { w: { kind: 'soft' } }, roles },
};

/** Each client puts a soft field of live records of its own slice of `cls`. */
function putClient(cls, i) {
  const per = Math.max(1, Math.floor(LIVE / CLIENTS));
  let n = 0;
  return [
    {
      method: 'PUT',
      headers: { authorization: authOf(i), 'content-type': 'application/json' },
      setupRequest(req) {
        const idx = i * per + (n % per);
        return { ...req, path: `/v1/records/${cls}/live-${idx}/fields/w`, body: JSON.stringify({ value: { n: ++n, c: i } }) };
      },
    },
  ];
}

/** A reader's full read of one record's history, every page; what it saw of the marker and the versions of `a`. */
async function readAll(base, i, rid) {
  const versions = [];
  let marker = false;
  let before;
  for (let page = 0; page < 1000; page++) {
    const q = new URLSearchParams({ field: 'a', limit: '40', ...(before ? { before } : {}) });
    const res = await fetch(`${base}/v1/records/ret/${rid}/history?${q}`, { headers: { authorization: authOf(i) } });
    if (res.status !== 200) throw new Error(`history ${rid}: ${res.status} ${await res.text()}`);
    const body = await res.json();
    if (body.truncated_before) marker = true;
    for (const h of body.history) if (h.outcome === 'applied') versions.push(Number(h.version));
    if (!body.next_before) break;
    before = body.next_before;
  }
  versions.sort((x, y) => x - y);
  // Whole: every version from 1 to the newest, no hole.
  const whole = versions.length > 0 && versions[0] === 1 && versions.every((v, k) => k === 0 || v === versions[k - 1] + 1);
  return { whole, marker };
}

async function seed() {
  const t0 = performance.now();
  for (const [cls, spec] of Object.entries(CLASSES)) {
    await run(DB, `insert into classes (name, namespace, spec) values ($1, 'bench', $2::json)`, [cls, JSON.stringify(spec)]);
  }
  await run(DB, `insert into records (class, rid, record_version) select 'ret', 'old-' || g, $2 from generate_series(1, $1::int) g`, [RECORDS, ROWS]);
  await run(
    DB,
    `insert into fields (record_id, class, name, kind, value, version, record_version, updated_at)
     select r.id, 'ret', 'a', 'versioned', '1'::json, $1, $1, now() from records r where r.class = 'ret'`,
    [ROWS],
  );
  await run(
    DB,
    `insert into history (class, rid, field, op, version, record_version, value, author, outcome, created_at)
     select 'ret', 'old-' || g, 'a', 'put', v, v, '1'::json, 'apikey:bench-0', 'applied', now() - interval '2 hours' + make_interval(secs => v)
     from generate_series(1, $1::int) g, generate_series(1, $2::int) v`,
    [RECORDS, ROWS],
  );
  await run(DB, 'vacuum analyze');
  say(`seeded ${RECORDS * ROWS} history rows (${RECORDS} records x ${ROWS}) in ${Math.round(performance.now() - t0)} ms`);
}

const historySize = async () =>
  Number((await run(DB, `select pg_total_relation_size('history') as n`)).rows[0].n);
/** Bytes: history whole (table + indexes + TOAST) and by part, and every table of the kslate schema whole. */
const sizes = async () => {
  const r = (
    await run(
      DB,
      `select pg_total_relation_size('history') as history, pg_relation_size('history') as heap, pg_indexes_size('history') as index,
              coalesce((select pg_total_relation_size(reltoastrelid) from pg_class where oid = 'history'::regclass and reltoastrelid <> 0), 0) as toast,
              (select sum(pg_total_relation_size(c.oid)) from pg_class c join pg_namespace n on n.oid = c.relnamespace
                where c.relkind = 'r' and n.nspname = 'public') as "all"`,
    )
  ).rows[0];
  return Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Number(v)]));
};
const classRows = async (cls) => Number((await run(DB, `select count(*)::bigint as n from history where class = $1`, [cls])).rows[0].n);

await run(admin, `create database ${name}`);
const cfg = writeConfig(Math.max(CLIENTS, READERS));
let gw;
try {
  await migrateDb(DB, DIST);
  await seed();
  writeFileSync(
    join(cfg.classesDir, 'retention.yaml'),
    Object.entries(CLASSES)
      .map(([cls, spec]) => stringify({ apiVersion: 'kslate.dev/v1', kind: 'SharedContext', metadata: { name: cls, namespace: 'bench' }, spec }))
      .join('---\n'),
  );
  gw = await startGateway({ root: ROOT, databaseUrl: DB, classesDir: cfg.classesDir, keysFile: cfg.keysFile, say });
  const { createPool, PgDb } = await import(join(DIST, 'db', 'kysely', 'index.js'));
  const { sweep } = await import(join(DIST, 'worker', 'sweep.js'));
  const sweepDb = new PgDb(createPool({ connectionString: DB, max: 2, timeoutMs: 300_000 }));
  const log = { debug() {}, info() {}, warn: (m) => say(`  sweep warn: ${m}`), error: (m) => say(`  sweep error: ${m}`) };

  // 1. Put load without a purge, then with one.
  await cannon({ url: gw.url, connections: CLIENTS, duration: 2, perClient: (i) => putClient('ret', i) });
  const base = await cannon({ url: gw.url, connections: CLIENTS, duration: DURATION, perClient: (i) => putClient('ret', i) });
  say(`puts without purge: ${round(base.ok / base.seconds, 0)}/s, p50 ${round(base.latency.p50, 2)} ms, p99 ${round(base.latency.p99, 2)} ms`);

  let purging = true;
  const sweeps = [];
  const t0 = performance.now();
  const purge = (async () => {
    for (let i = 0; i < 100_000; i++) {
      const r = await sweep({ db: sweepDb, log, holder: 'bench/retention' }, { budgetMs: BUDGET, steps: ['retention'] });
      const b = r.retention?.batches ?? [];
      sweeps.push({ ms: r.durationMs, purged: r.retention?.purged.get('ret') ?? 0, batches: b.length, maxLimit: Math.max(0, ...b.map((x) => x.limit)), lastLimit: b.at(-1)?.limit ?? 0 });
      if (r.errors.length) say(`  sweep errors: ${JSON.stringify(r.errors)}`);
      if (!r.retention?.more) break;
    }
    purging = false;
    return (performance.now() - t0) / 1000;
  })();
  const reads = { full: 0, whole: 0, marked: 0, gapsWithoutMarker: 0 };
  const readers = Array.from({ length: READERS }, async (_, k) => {
    for (let n = 0; purging; n++) {
      const rid = `old-${1 + ((k * 7919 + n * 104729) % RECORDS)}`;
      const r = await readAll(gw.url, k, rid);
      reads.full++;
      if (r.whole) reads.whole++;
      if (r.marker) reads.marked++;
      if (!r.whole && !r.marker) reads.gapsWithoutMarker++;
    }
  });
  const windows = [];
  while (purging) {
    const w = await cannon({ url: gw.url, connections: CLIENTS, duration: Math.min(DURATION, 5), perClient: (i) => putClient('ret', i) });
    windows.push({ ok: w.ok, seconds: w.seconds, p50: w.latency.p50, p99: w.latency.p99, max: w.latency.max });
  }
  const purgeSeconds = await purge;
  await Promise.all(readers);
  const purged = sweeps.reduce((a, s) => a + s.purged, 0);
  const p99s = windows.map((w) => w.p99).sort((a, b) => a - b);
  const left = Number((await run(DB, `select count(*)::int as n from history where class = 'ret' and rid like 'old-%'`)).rows[0].n);
  const overBudget = sweeps.map((s) => s.ms - BUDGET).filter((x) => x > 0);
  const result = {
    at: new Date().toISOString(),
    rows: RECORDS * ROWS,
    records: RECORDS,
    clients: CLIENTS,
    readers: READERS,
    budget_ms: BUDGET,
    purged,
    purge_seconds: round(purgeSeconds, 1),
    rows_per_second: round(purged / purgeSeconds, 0),
    sweeps: sweeps.length,
    sweep_ms: {
      max: Math.max(...sweeps.map((s) => s.ms)),
      mean: round(sweeps.reduce((a, s) => a + s.ms, 0) / sweeps.length, 0),
      worst_overrun: overBudget.length ? Math.max(...overBudget) : 0,
      over_budget: overBudget.length,
      over_budget_by_more_than_500: overBudget.filter((x) => x > 500).length,
    },
    batch_limit: { max: Math.max(...sweeps.map((s) => s.maxLimit)), last_median: sweeps.map((s) => s.lastLimit).sort((a, b) => a - b)[Math.floor(sweeps.length / 2)] },
    left,
    put_without_purge: { rps: round(base.ok / base.seconds, 0), p50: round(base.latency.p50, 2), p99: round(base.latency.p99, 2) },
    put_during_purge: {
      rps: round(windows.reduce((a, w) => a + w.ok, 0) / windows.reduce((a, w) => a + w.seconds, 0), 0),
      p99_median_window: round(p99s[Math.floor(p99s.length / 2)] ?? 0, 2),
      p99_worst_window: round(p99s.at(-1) ?? 0, 2),
      windows: windows.length,
    },
    reads,
  };
  say(`purged ${purged} rows in ${result.purge_seconds} s over ${sweeps.length} sweeps: ${result.rows_per_second} rows/s; ${left} rows left (expected ${RECORDS})`);
  say(`sweep durations: max ${result.sweep_ms.max} ms, mean ${result.sweep_ms.mean} ms, worst overrun ${result.sweep_ms.worst_overrun} ms past a ${BUDGET} ms budget (${result.sweep_ms.over_budget} sweeps past it, ${result.sweep_ms.over_budget_by_more_than_500} by more than 500 ms); batch limit max ${result.batch_limit.max}, last batch median ${result.batch_limit.last_median}`);
  say(`puts during purge: ${result.put_during_purge.rps}/s, p99 ${result.put_during_purge.p99_median_window} ms (median window), ${result.put_during_purge.p99_worst_window} ms (worst window); without: p99 ${result.put_without_purge.p99} ms`);
  say(`readers: ${reads.full} full reads, ${reads.whole} whole, ${reads.marked} with truncated_before, ${reads.gapsWithoutMarker} gaps without the marker`);

  // 2. Size soak: the same write load on a class that keeps everything, then on one that keeps 5 rows per field.
  const soak = {};
  if (SOAK > 0) {
    for (const cls of ['soak_keep', 'soak_ret']) {
      const samples = [];
      const size0 = await sizes();
      let soaking = true;
      const sampler = (async () => {
        const s0 = performance.now();
        while (soaking) {
          await new Promise((r) => setTimeout(r, SAMPLE_EVERY * 1000));
          const st = (await run(DB, `select n_dead_tup::bigint as dead, autovacuum_count::bigint as av from pg_stat_user_tables where relname = 'history'`)).rows[0];
          const sz = await sizes();
          samples.push({
            s: round((performance.now() - s0) / 1000, 0),
            rows: await classRows(cls),
            table_mb: round((sz.history - size0.history) / 1048576, 1),
            // history's heap, its indexes and its TOAST, and every table of the database (table + index + TOAST), MB
            history_mb: { heap: round(sz.heap / 1048576, 1), index: round(sz.index / 1048576, 1), toast: round(sz.toast / 1048576, 1) },
            all_mb: round(sz.all / 1048576, 1),
            all_growth_mb: round((sz.all - size0.all) / 1048576, 1),
            dead: Number(st?.dead ?? 0),
            autovacuums: Number(st?.av ?? 0),
          });
        }
      })();
      const sweeper = (async () => {
        while (soaking && cls === 'soak_ret') {
          await sweep({ db: sweepDb, log, holder: 'bench/retention/soak' }, { budgetMs: BUDGET, steps: ['retention'] });
          await new Promise((r) => setTimeout(r, SWEEP_EVERY * 1000));
        }
      })();
      const load = await cannon({ url: gw.url, connections: CLIENTS, duration: SOAK, perClient: (i) => putClient(cls, i) });
      soaking = false;
      await Promise.all([sampler, sweeper]);
      soak[cls] = { puts: load.ok, rps: round(load.ok / load.seconds, 0), samples };
      const half = samples.slice(Math.floor(samples.length / 2));
      const growth = half.length > 1 ? round(half.at(-1).table_mb - half[0].table_mb, 1) : null;
      say(`soak ${cls} (${SOAK} s, ${soak[cls].rps} puts/s): history rows ${samples.map((x) => x.rows).join(', ')}`);
      say(`  table growth over the soak (MB): ${samples.map((x) => x.table_mb).join(', ')}; in its second half ${growth} MB`);
      say(`  dead tuples: ${samples.map((x) => x.dead).join(', ')}; autovacuums of history so far: ${samples.at(-1)?.autovacuums ?? 0}`);
      // Growth of every table (table + index + TOAST) at 1, 5 and 10 minutes (or the samples nearest).
      const at = (sec) => samples.reduce((b, x) => (Math.abs(x.s - sec) < Math.abs(b.s - sec) ? x : b), samples[0]);
      soak[cls].growth_mb_at = Object.fromEntries([60, 300, 600].filter((sec) => sec <= SOAK + SAMPLE_EVERY).map((sec) => [`${sec}s`, at(sec)?.all_growth_mb ?? null]));
      say(`  database growth (all tables, table + index + TOAST, MB) at ${JSON.stringify(soak[cls].growth_mb_at)}; history heap/index/toast now ${JSON.stringify(samples.at(-1)?.history_mb)}`);
    }
  }
  // With the server's autovacuum off (as in a CI server's conf.d), nothing reuses purged space: bytes grow with or without retention.
  const autovacuum = (await run(DB, `select current_setting('autovacuum') as a`)).rows[0].a;
  if (autovacuum !== 'on') say(`  note: the server has autovacuum = ${autovacuum}: purged rows' space is never reused, so bytes grow with retention too`);
  result.soak = { seconds: SOAK, autovacuum, ...soak };
  await sweepDb.kysely.destroy();
  mkdirSync(opt.out, { recursive: true });
  const file = join(opt.out, `retention-${result.at.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(result, null, 2));
  say(`wrote ${file}`);
  say(`gap check ${result.reads.gapsWithoutMarker === 0 ? 'PASS' : 'FAIL'}`);
  if (result.reads.gapsWithoutMarker > 0) process.exitCode = 1;
} finally {
  await gw?.stop?.().catch(() => undefined);
  cfg.cleanup();
  await run(admin, `drop database if exists ${name} with (force)`);
}
