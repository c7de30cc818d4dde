#!/usr/bin/env node
/**
 * `npm run bench:citus` (issue 35, docs/scale-out.md "What costs more on Citus"): kslate on a
 * Citus cluster on loopback (a coordinator and two workers: three nodes, test/citus/cluster.ts,
 * Citus built from KSLATE_CITUS_SRC) against plain PostgreSQL in the same run — a database on
 * the coordinator's own server without the extension, so both run on the same binaries and
 * settings. One `kslate serve` per database; 64 clients, each its own record, a closed loop of
 * PUTs then of GETs for --seconds each.
 *
 * - Per-write cost: CPU seconds of every PostgreSQL process of the cluster (all nodes) during
 *   the put phase, divided by the writes; the ratio Citus / plain. One box cannot show the
 *   scale-out gain (the workers share its cores); the ratio is what a write costs more.
 * - The rebalance's effect on put p99: puts on the Citus database while a third worker is
 *   added and the shards rebalanced onto it (citus_add_node, citus_rebalance_start,
 *   citus_rebalance_wait); p99 before, during and after, and failed requests.
 * - Plain PostgreSQL, cost per write by schema: a server-side loop of N kslate_write calls on
 *   schema 13 (before 0014's rid columns and fill triggers), on the current schema, and on the
 *   current schema with the fill triggers dropped.
 *
 * Flags: --seconds N (default 15), --clients N (64), --loop N (20000 writes per server-side
 * loop). Results: printed, and bench/results/citus-<time>.json. A machine whose load average
 * is above 1 when the run starts gets every number labelled "loaded".
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { freePort, Latencies, postgresCpu, round, sleep } from './lib/util.mjs';
import { clusterModule } from './lib/citus-cluster.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');
const { values: flags } = parseArgs({
  options: { seconds: { type: 'string', default: '15' }, clients: { type: 'string', default: '64' }, loop: { type: 'string', default: '20000' } },
});
const SECONDS = Number(flags.seconds);
const CLIENTS = Number(flags.clients);
const LOOP = Number(flags.loop);
const say = (m) => process.stdout.write(`${m}\n`);
const loadAvg = Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
const label = loadAvg > 1 ? 'loaded' : 'idle';

const CLASS = {
  apiVersion: 'kslate.dev/v1',
  kind: 'SharedContext',
  metadata: { name: 'bench', namespace: 'bench' },
  spec: {
    fields: { f: { kind: 'versioned' } },
    roles: { all: { subjects: Array.from({ length: CLIENTS }, (_, i) => `apikey:c${i}`), read: ['*'], write: ['*'] } },
  },
};
const keyOf = (i) => `bench-citus-key-${i}`;

async function gateway(dir, url, mode) {
  mkdirSync(join(dir, 'classes'), { recursive: true });
  const { stringify } = await import('yaml');
  writeFileSync(join(dir, 'classes', 'bench.yaml'), stringify(CLASS));
  writeFileSync(
    join(dir, 'apikeys.yaml'),
    stringify({ keys: Array.from({ length: CLIENTS }, (_, i) => ({ name: `c${i}`, sha256: createHash('sha256').update(keyOf(i)).digest('hex') })) }),
  );
  const port = await freePort();
  const args = ['serve', '--database-url', url, '--database-mode', mode, '--classes', join(dir, 'classes'), '--identity', 'apikey', '--apikeys', join(dir, 'apikeys.yaml'),
    '--listen', `127.0.0.1:${port}`, '--metrics-port', String(await freePort()), '--allow-async-replication', 'true', '--grpc-port', '0', '--log-level', 'warn'];
  const proc = spawn(process.execPath, [join(root, 'bin', 'kslate.js'), ...args], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  for (let i = 0; ; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/readyz`);
      if (r.status === 200) break;
    } catch {
      /* not up yet */
    }
    if (i > 600) throw new Error(`gateway on ${url} not ready`);
    await sleep(100);
  }
  // Stopping twice (the plain phase's gateway is stopped when its phase ends and again in the
  // final clean-up) must not wait for an exit that already happened.
  const exited = () => proc.exitCode !== null || proc.signalCode !== null;
  return { port, proc, stop: () => (exited() ? Promise.resolve() : new Promise((r) => (proc.once('exit', r), proc.kill('SIGTERM')))) };
}

/**
 * `clients` closed loops for `seconds`: client i puts (or gets) record r<i>. Every answer's
 * latency, with when it came (for the rebalance's windows), and the failures.
 */
/** Each record's current version, by gateway port and client: a versioned put must name it (expected_version). */
const versions = new Map();

async function drive(port, kind, seconds, onTick) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
  const samples = [];
  let failed = 0;
  const t0 = performance.now();
  // `seconds`, or a function giving the deadline (performance.now() time) as it moves.
  const until = typeof seconds === 'function' ? seconds : () => t0 + seconds * 1000;
  const one = (i, n) =>
    new Promise((resolve) => {
      const vkey = `${port}/${i}`;
      const body = kind === 'put' ? JSON.stringify({ value: { n, by: i }, expected_version: versions.get(vkey) ?? 0 }) : undefined;
      const path = kind === 'put' ? `/v1/records/bench/r${i}/fields/f` : `/v1/records/bench/r${i}`;
      const start = performance.now();
      const req = http.request(
        { host: '127.0.0.1', port, path, method: kind === 'put' ? 'PUT' : 'GET', agent,
          headers: { authorization: `Bearer ${keyOf(i)}`, ...(body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {}) } },
        (res) => {
          res.resume();
          res.on('end', () => {
            const end = performance.now();
            if (res.statusCode >= 300) failed++;
            else {
              samples.push([end - t0, end - start]);
              if (kind === 'put') versions.set(vkey, (versions.get(vkey) ?? 0) + 1);
            }
            resolve();
          });
        },
      );
      req.on('error', () => {
        failed++;
        resolve();
      });
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, i) => {
      for (let n = 0; performance.now() < until(); n++) await one(i, n);
    }),
  );
  agent.destroy();
  onTick?.();
  return { samples, failed, seconds: (performance.now() - t0) / 1000 };
}

function summary(samples, from = 0, to = Infinity) {
  const lat = new Latencies();
  for (const [at, ms] of samples) if (at >= from && at < to) lat.push(ms);
  const s = lat.summary();
  return { count: s.count, p50_ms: round(s.p50), p99_ms: round(s.p99), max_ms: round(s.max) };
}

const clusterCpu = (cluster) => cluster.nodes.reduce((t, n) => t + (n.proc?.pid ? postgresCpu(n.proc.pid) : 0), 0);

async function serverLoop(url, n, drop) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    if (drop) for (const t of ['fields', 'entries', 'checkpoints']) await c.query(`drop trigger if exists ${t}_fill_rid on ${t}`);
    await c.query(`truncate records, fields, history cascade`);
    const runs = [];
    for (let k = 0; k < 3; k++) {
      const t0 = performance.now();
      await c.query(`do $$ begin for i in 1..${n} loop
        perform kslate_write('bench', 'r' || (i % 200), 'f', 'versioned', 'put', null, null, null, 'apikey:a', 'strong', '{"n":' || i || '}', null, null, null, null, null::integer);
      end loop; end $$`);
      runs.push(((performance.now() - t0) * 1000) / n);
    }
    runs.sort((a, b) => a - b);
    return round(runs[1], 1);
  } finally {
    await c.end();
  }
}

async function main() {
  const { CitusCluster } = await clusterModule('bench');
  const { migrate } = await import(join(dist, 'db', 'migrate.js'));
  const { migrations } = await import(join(dist, 'db', 'migrations', 'index.js'));
  say(`bench:citus — ${CLIENTS} clients, ${SECONDS} s a phase, load average ${loadAvg} at start: numbers are ${label}`);
  const cluster = await CitusCluster.start({ workers: 2 });
  const gws = [];
  const result = { label, loadAvg, clients: CLIENTS, seconds: SECONDS, at: new Date().toISOString() };
  try {
    await cluster.createDatabase('kcitus');
    await cluster.on('coordinator', 'postgres', (c) => c.query('create database kplain'));
    for (const [db, mode] of [['kcitus', 'citus'], ['kplain', 'plain']]) {
      const pool = new pg.Pool({ connectionString: cluster.url(db), max: 1 });
      await migrate(pool, { mode });
      await pool.end();
    }
    const phases = {};
    for (const [db, mode] of [['kplain', 'plain'], ['kcitus', 'citus']]) {
      const gw = await gateway(join(cluster.dir, `gw-${db}`), cluster.url(db), mode);
      gws.push(gw);
      await drive(gw.port, 'put', 2); // warm-up: records created, statements prepared
      const cpu0 = clusterCpu(cluster);
      const put = await drive(gw.port, 'put', SECONDS);
      const cpu1 = clusterCpu(cluster);
      const get = await drive(gw.port, 'get', SECONDS);
      const cpu2 = clusterCpu(cluster);
      phases[mode] = {
        put: { per_s: round(put.samples.length / put.seconds, 0), ...summary(put.samples), failed: put.failed, pg_cpu_ms_per_op: round(((cpu1 - cpu0) * 1000) / put.samples.length, 3) },
        get: { per_s: round(get.samples.length / get.seconds, 0), ...summary(get.samples), failed: get.failed, pg_cpu_ms_per_op: round(((cpu2 - cpu1) * 1000) / get.samples.length, 3) },
      };
      say(`${mode}: ${JSON.stringify(phases[mode])}`);
      if (mode === 'plain') await gw.stop();
    }
    result.phases = phases;
    result.ratio = {
      put_pg_cpu_per_write: round(phases.citus.put.pg_cpu_ms_per_op / phases.plain.put.pg_cpu_ms_per_op, 2),
      get_pg_cpu_per_read: round(phases.citus.get.pg_cpu_ms_per_op / phases.plain.get.pg_cpu_ms_per_op, 2),
      put_p99: round(phases.citus.put.p99_ms / phases.plain.put.p99_ms, 2),
    };
    say(`Citus / plain: ${JSON.stringify(result.ratio)}`);

    // The rebalance under put load.
    const gw = gws[gws.length - 1];
    let began = 0;
    let ended = 0;
    const t0 = performance.now();
    // Puts until SECONDS after the rebalance ended (however long it takes), so the "after"
    // window is always measured; at most an hour in all.
    let stopAt = t0 + 3_600_000;
    const [load] = await Promise.all([
      drive(gw.port, 'put', () => stopAt),
      (async () => {
        await sleep(SECONDS * 1000);
        began = performance.now() - t0;
        try {
          await cluster.addWorker(['kcitus']);
          await cluster.on('coordinator', 'kcitus', async (c) => {
            await c.query('select citus_rebalance_start()');
            await c.query('select citus_rebalance_wait()');
          });
        } finally {
          ended = performance.now() - t0;
          stopAt = performance.now() + SECONDS * 1000;
        }
      })(),
    ]);
    result.rebalance = {
      seconds: round((ended - began) / 1000, 1),
      failed: load.failed,
      before: summary(load.samples, 0, began),
      during: summary(load.samples, began, ended),
      after: summary(load.samples, ended),
    };
    say(`rebalance: ${JSON.stringify(result.rebalance)}`);

    // Plain PostgreSQL: the cost of a write by schema (server-side loop).
    const loops = {};
    for (const [name, upTo, drop] of [['schema 13', 13, false], ['current', Infinity, false], ['current, fill triggers dropped', Infinity, true]]) {
      const db = `kloop${Object.keys(loops).length}`;
      await cluster.on('coordinator', 'postgres', (c) => c.query(`create database ${db}`));
      const c = new pg.Client({ connectionString: cluster.url(db) });
      await c.connect();
      await c.query('create table kslate_migrations (version integer primary key, name text not null, applied_at timestamptz not null default now())');
      for (const m of migrations.filter((x) => x.version <= upTo)) await c.query(m.up);
      await c.end();
      loops[name] = await serverLoop(cluster.url(db), LOOP, drop);
      say(`plain server-side loop, ${name}: ${loops[name]} µs per kslate_write`);
    }
    result.plain_us_per_write = loops;
  } finally {
    for (const g of gws) await g.stop().catch(() => undefined);
    await cluster.stop();
  }
  mkdirSync(join(root, 'bench', 'results'), { recursive: true });
  const file = join(root, 'bench', 'results', `citus-${result.at.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(result, null, 2));
  say(`written ${file}`);
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`bench:citus failed: ${e?.stack ?? e}\n`);
    process.exit(1);
  },
);
