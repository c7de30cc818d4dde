#!/usr/bin/env node
/**
 * `npm run bench:citus-profile` (issue 35, docs/scale-out.md "Where a Citus write's time
 * goes"): one client calling kslate_write in a closed loop, on plain PostgreSQL and on the
 * Citus cluster (test/citus/cluster.ts, a coordinator and two workers on loopback), to show
 * where a Citus write's extra PostgreSQL CPU goes:
 *
 * 1. CPU per write on each node (coordinator, workers), for the delegated call through the
 *    coordinator, the same call made on the record's worker directly, and plain PostgreSQL.
 * 2. What one write runs: citus.log_remote_commands on the coordinator (the commands it
 *    sends) and citus.log_local_commands on the worker (the shard statements the write
 *    function's body runs through Citus's local execution), as the NOTICEs those settings send to the session, counted per write.
 * 3. With --perf: `perf record` of the whole machine while the delegated loop runs, then
 *    CPU samples of the worker's and coordinator's backends by shared object and by
 *    function (the top 25), to tell planning (Citus's distributed planner, deparse, shard
 *    pruning) from executing.
 *
 * Flags: --writes N (default 3000 per loop), --perf. Prints its findings and writes
 * bench/results/citus-profile-<time>.json. Run it on an idle machine.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { postgresCpu, round } from './lib/util.mjs';
import { clusterModule } from './lib/citus-cluster.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');
const { values: flags } = parseArgs({ options: { writes: { type: 'string', default: '3000' }, perf: { type: 'boolean', default: false } } });
const N = Number(flags.writes);
const say = (m) => process.stdout.write(`${m}\n`);
const loadAvg = Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);

const WRITE = `select kslate_write('bench', $1, 'f', 'versioned', 'put', null, null, null, 'apikey:a', 'strong', $2::text, null, null, null, null, null::integer)`;

/** `n` writes, one at a time, on one connection to `url`, over `records` record ids from `rids`. */
async function loop(url, rids, n, onPid) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    if (onPid) onPid((await c.query('select pg_backend_pid() as pid')).rows[0].pid);
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await c.query({ name: 'w', text: WRITE, values: [rids[i % rids.length], `{"n":${i}}`] });
    return ((performance.now() - t0) * 1000) / n;
  } finally {
    await c.end();
  }
}

/** CPU seconds of each node's postmaster and backends. */
const nodeCpu = (cluster) => Object.fromEntries(cluster.nodes.map((n) => [n.name, postgresCpu(n.proc.pid)]));

async function measured(cluster, label, fn) {
  const c0 = nodeCpu(cluster);
  const usPerWrite = await fn();
  const c1 = nodeCpu(cluster);
  const cpu = Object.fromEntries(cluster.nodes.map((n) => [n.name, round(((c1[n.name] - c0[n.name]) * 1e6) / N, 0)]));
  const total = Object.values(cpu).reduce((a, b) => a + b, 0);
  say(`${label}: ${round(usPerWrite, 0)} µs a write (one client), PostgreSQL CPU µs a write: ${JSON.stringify(cpu)}, all ${total}`);
  return { us_per_write: round(usPerWrite, 0), cpu_us_per_write: cpu, cpu_us_total: total };
}

function perfReport(data, pids) {
  const r = spawnSync('perf', ['report', '-i', data, '--stdio', '--no-children', '--sort', 'dso,sym', '--pid', pids.join(','), '--percent-limit', '0.7'], { encoding: 'utf8', maxBuffer: 64 << 20 });
  const rows = r.stdout.split('\n').filter((l) => /^\s*\d+\.\d+%/.test(l)).slice(0, 25).map((l) => l.trim().replace(/\s+/g, ' '));
  const byDso = spawnSync('perf', ['report', '-i', data, '--stdio', '--no-children', '--sort', 'dso', '--pid', pids.join(',')], { encoding: 'utf8', maxBuffer: 64 << 20 });
  return { by_dso: byDso.stdout.split('\n').filter((l) => /^\s*\d+\.\d+%/.test(l)).map((l) => l.trim().replace(/\s+/g, ' ')), top: rows };
}

async function main() {
  const { CitusCluster } = await clusterModule('profile');
  const { migrate } = await import(join(dist, 'db', 'migrate.js'));
  say(`bench:citus-profile — ${N} writes a loop, load average ${loadAvg} at start${loadAvg > 1 ? ' (loaded: CPU figures are inflated)' : ''}`);
  const cluster = await CitusCluster.start({ workers: 2 });
  const result = { at: new Date().toISOString(), loadAvg, writes: N };
  try {
    await cluster.createDatabase('kcitus');
    await cluster.on('coordinator', 'postgres', (c) => c.query('create database kplain'));
    for (const [db, mode] of [['kcitus', 'citus'], ['kplain', 'plain']]) {
      const pool = new pg.Pool({ connectionString: cluster.url(db), max: 1 });
      await migrate(pool, { mode });
      await pool.end();
    }
    // 200 records whose shards are on the first worker, so the direct loop can run there too.
    const w1 = cluster.workers[0];
    const rids = await cluster.on('coordinator', 'kcitus', async (c) => {
      const out = [];
      for (let i = 0; out.length < 200; i++) {
        const rid = `r${i}`;
        const { rows } = await c.query(`select nodeport from citus_shards s join pg_dist_shard d using (shardid)
          where s.table_name = 'records'::regclass and get_shard_id_for_distribution_column('records', $1::text) = s.shardid`, [rid]);
        if (rows[0]?.nodeport === w1.port) out.push(rid);
      }
      return out;
    });
    await loop(cluster.url('kplain'), rids, 500); // warm-up: records created, plans cached
    await loop(cluster.url('kcitus'), rids, 500);
    await loop(cluster.nodeUrl(w1.name, 'kcitus'), rids, 500);

    result.plain = await measured(cluster, 'plain PostgreSQL', () => loop(cluster.url('kplain'), rids, N));
    result.citus_delegated = await measured(cluster, 'Citus, through the coordinator (delegated)', () => loop(cluster.url('kcitus'), rids, N));
    result.citus_on_worker = await measured(cluster, "Citus, on the record's worker directly", () => loop(cluster.nodeUrl(w1.name, 'kcitus'), rids, N));

    // What one write runs: Citus reports both as NOTICEs to the session that set them.
    const W = 10;
    const notices = async (url, set) => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      const seen = [];
      try {
        await c.query(`set ${set} = on`);
        c.on('notice', (n) => seen.push(n.message));
        for (let i = 0; i < W; i++) await c.query({ name: 'w', text: WRITE, values: [rids[i], `{"n":${i}}`] });
      } finally {
        await c.end();
      }
      return seen;
    };
    const remote = (await notices(cluster.url('kcitus'), 'citus.log_remote_commands')).filter((m) => /^issuing /.test(m));
    const local = (await notices(cluster.nodeUrl(w1.name, 'kcitus'), 'citus.log_local_commands')).filter((m) => /locally/.test(m));
    result.per_write = { coordinator_commands_sent: remote.length / W, worker_local_shard_statements: local.length / W };
    const kinds = new Map();
    for (const l of local) {
      const m = /locally: (\w+)/.exec(l);
      const k = m ? m[1].toLowerCase() : '?';
      kinds.set(k, (kinds.get(k) ?? 0) + 1 / W);
    }
    result.per_write.worker_statement_kinds = Object.fromEntries(kinds);
    result.sample = { coordinator: remote.slice(0, 2).map((l) => l.slice(0, 300)), worker: local.slice(0, 14).map((l) => l.slice(l.indexOf('locally:'), l.indexOf('locally:') + 200)) };
    say(`one write: ${JSON.stringify(result.per_write)}`);
    for (const l of result.sample.coordinator) say(`  coordinator: ${l}`);
    for (const l of result.sample.worker) say(`  worker: ${l}`);

    if (flags.perf) {
      const data = join(root, 'bench', 'results', 'citus-profile.perf.data');
      const perf = spawn('perf', ['record', '-a', '-F', '999', '-o', data], { stdio: 'ignore' });
      await new Promise((r) => setTimeout(r, 1000));
      let coordinatorPid = 0;
      await loop(cluster.url('kcitus'), rids, N, (pid) => (coordinatorPid = pid));
      perf.kill('SIGINT');
      await new Promise((r) => perf.once('exit', r));
      // The loop's backend on the coordinator, and the busiest other postgres process: the
      // worker's backend that ran the delegated writes.
      const byPid = spawnSync('perf', ['report', '-i', data, '--stdio', '--comm', 'postgres', '--sort', 'pid'], { encoding: 'utf8', maxBuffer: 64 << 20 });
      const pids = byPid.stdout.split('\n').map((l) => /^\s+[\d.]+%\s+(\d+):/.exec(l)?.[1]).filter(Boolean).map(Number);
      const workerPid = pids.find((p) => p !== coordinatorPid);
      result.perf = { [`worker backend ${workerPid}`]: perfReport(data, [workerPid]), [`coordinator backend ${coordinatorPid}`]: perfReport(data, [coordinatorPid]) };
      for (const [k, v] of Object.entries(result.perf)) {
        say(`perf, ${k} backends, by shared object:`);
        for (const l of v.by_dso) say(`  ${l}`);
        say(`perf, ${k} backends, top functions:`);
        for (const l of v.top) say(`  ${l}`);
      }
    }
  } finally {
    await cluster.stop();
  }
  mkdirSync(join(root, 'bench', 'results'), { recursive: true });
  const file = join(root, 'bench', 'results', `citus-profile-${result.at.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(result, null, 2));
  say(`written ${file}`);
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`bench:citus-profile failed: ${e?.stack ?? e}\n`);
    process.exit(1);
  },
);
