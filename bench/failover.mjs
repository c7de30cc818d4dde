#!/usr/bin/env node
/**
 * The failover's unavailability window (issue 34, part 6; docs/ha.md): on the HA test's
 * cluster (etcd, three PostgreSQL 15 under Patroni in strict synchronous mode, HAProxy on
 * /primary; scripts/ha-deps.sh installs them), 16 writers through two `kslate serve`
 * processes while the primary fails `--rounds` times (default 5). Per round and gateway: the
 * window from the first 503 to the first 2xx write after it, and how long after the new
 * primary accepted writes (a probe writing straight through HAProxy) the gateway served one.
 * `npm run bench:failover` (SIGKILL of the primary), `-- --kind switchover` or `--kind freeze`.
 *
 * The cluster harness and the load are the HA test's own (test/ha/cluster.ts, workload.ts),
 * bundled here with esbuild, so the bench measures exactly what the test checks.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { stringify } from 'yaml';
import { freePort, round, sleep } from './lib/util.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const { values: opt } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    kind: { type: 'string', default: 'kill' },
    'db-timeout': { type: 'string', default: '3s' },
    out: { type: 'string', default: join(ROOT, 'bench', 'results') },
  },
});
const ROUNDS = Number(opt.rounds);
const KIND = opt.kind;
if (!['kill', 'switchover', 'freeze'].includes(KIND)) throw new Error(`--kind must be kill, switchover or freeze; got ${KIND}`);

/**
 * test/ha/cluster.ts and workload.ts as one ES module. pg and yaml stay imports, so the module
 * is written inside the repository (.cache/, ignored by git) where node_modules resolves them.
 */
async function loadHarness() {
  const outfile = join(ROOT, '.cache', `failover-harness-${process.pid}.mjs`);
  await build({
    stdin: {
      contents: "export * from './test/ha/cluster.ts'; export * from './test/ha/workload.ts';",
      resolveDir: ROOT,
      loader: 'ts',
    },
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    outfile,
    logLevel: 'error',
  });
  try {
    return await import(pathToFileURL(outfile).href);
  } finally {
    rmSync(outfile, { force: true });
  }
}

function serve(cluster, dir, port, metricsPort) {
  const child = spawn(
    process.execPath,
    [
      join(ROOT, 'bin', 'kslate.js'),
      'serve',
      '--database-url', cluster.url('kslate'),
      '--classes', join(dir, 'classes'),
      '--identity', 'apikey',
      '--apikeys', join(dir, 'apikeys.yaml'),
      '--listen', `127.0.0.1:${port}`,
      '--metrics-port', String(metricsPort),
      '--db-timeout', opt['db-timeout'],
      '--log-level', 'warn',
    ],
    { stdio: 'ignore', env: Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('KSLATE_'))) },
  );
  return child;
}

async function main() {
  const work = mkdtempSync(join(tmpdir(), 'kslate-bench-ha-'));
  const h = await loadHarness();
  const missing = h.missingTools();
  if (missing) throw new Error(missing);
  const cluster = await h.HaCluster.start({ nodes: 3 });
  const children = [];
  const rounds = [];
  try {
    await cluster.sql('create database kslate');
    await cluster.sql('create table ha_probe (at timestamptz not null)', 'kslate');
    const dir = join(work, 'gateway');
    mkdirSync(join(dir, 'classes'), { recursive: true });
    writeFileSync(
      join(dir, 'classes', 'ha.yaml'),
      stringify({ apiVersion: 'kslate.dev/v1', kind: 'SharedContext', metadata: { name: h.haClass.name, namespace: 'bench' }, spec: h.haClass.spec }),
    );
    writeFileSync(
      join(dir, 'apikeys.yaml'),
      stringify({ keys: Array.from({ length: h.WRITERS }, (_, i) => ({ name: `w${i}`, sha256: createHash('sha256').update(h.writerKey(i)).digest('hex') })) }),
    );
    const urls = [];
    for (let g = 0; g < 2; g++) {
      const port = await freePort();
      children.push(serve(cluster, dir, port, await freePort()));
      urls.push(`http://127.0.0.1:${port}`);
    }
    for (const url of urls) {
      await h.waitFor(`${url}/readyz`, async () => ((await fetch(`${url}/readyz`)).status === 200 ? true : undefined), 120_000);
    }
    for (const r of h.RECORDS) {
      await fetch(`${urls[0]}/v1/records/ha/${r}/fields/reg`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${h.writerKey(0)}`, 'content-type': 'application/json' },
        body: JSON.stringify({ value: `init-${r}`, expected_version: 0 }),
      });
    }

    for (let i = 0; i < ROUNDS; i++) {
      const load = new h.Workload(urls, cluster.url('kslate'), 30_000, `round${i}`);
      load.start();
      try {
        await h.waitFor('writes through both gateways', () => (urls.every((_, g) => load.writesOkAfter(g, 0).length >= 10) ? true : undefined), 60_000);
        const { leader, sync } = await cluster.waitHealthy(180_000);
        const t0 = h.now();
        if (KIND === 'kill') await cluster.kill(leader);
        else if (KIND === 'freeze') cluster.freeze(leader);
        else await cluster.switchover(leader, sync);
        await cluster.waitForLeader(180_000, leader);
        const newLeaderAt = h.now();
        if (KIND === 'kill') cluster.startPatroni(leader);
        if (KIND === 'freeze') cluster.thaw(leader);
        await cluster.waitHealthy(300_000);
        const settled = h.now();
        await h.waitFor('writes after recovery', () => (urls.every((_, g) => load.writesOkAfter(g, settled).length >= 10) ? true : undefined), 60_000);
        const accepted = load.primaryAcceptedAfter(t0);
        const row = { round: i + 1, kind: KIND, leader, 'new leader elected after (s)': round((newLeaderAt - t0) / 1000), 'new primary accepted writes after (s)': accepted && round((accepted - t0) / 1000) };
        urls.forEach((_, g) => {
          const first503 = load.ops.filter((o) => o.gateway === g && o.invoke >= t0 && o.status === 503).sort((a, b) => a.answer - b.answer)[0];
          const back = first503 && load.writesOkAfter(g, first503.answer).sort((a, b) => a.answer - b.answer)[0];
          row[`gw${g} unavailable (s)`] = back ? round((back.answer - first503.answer) / 1000) : null;
          const afterPrimary = accepted && load.writesOkAfter(g, accepted).sort((a, b) => a.answer - b.answer)[0];
          row[`gw${g} served after new primary (s)`] = afterPrimary ? round((afterPrimary.answer - accepted) / 1000) : null;
        });
        rounds.push(row);
        console.log(JSON.stringify(row));
      } finally {
        await load.stop();
      }
      await sleep(1_000);
    }
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await cluster.stop();
    rmSync(work, { recursive: true, force: true });
  }
  const windows = rounds.flatMap((r) => [r['gw0 unavailable (s)'], r['gw1 unavailable (s)']]).filter((x) => x !== null).sort((a, b) => a - b);
  const summary = {
    kind: KIND,
    rounds: rounds.length,
    'unavailable median (s)': windows.length ? windows[Math.floor(windows.length / 2)] : null,
    'unavailable max (s)': windows.length ? windows[windows.length - 1] : null,
    'served after new primary max (s)': Math.max(...rounds.flatMap((r) => [r['gw0 served after new primary (s)'], r['gw1 served after new primary (s)']]).filter((x) => x !== null)),
    machine: { cpus: cpus().length, loadavg: loadavg().map((x) => round(x)) },
  };
  console.log(JSON.stringify(summary));
  mkdirSync(opt.out, { recursive: true });
  const file = join(opt.out, `failover-${KIND}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify({ summary, rounds }, null, 2));
  console.log(`written ${file}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
