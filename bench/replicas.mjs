#!/usr/bin/env node
/**
 * get@64 with 0, 1 and 2 standbys serving reads (issue 34 part 6; docs/ha.md "Reads from
 * standbys"), in one run: a PostgreSQL 15 primary and two streaming standbys made by
 * pg_basebackup (the HA test's harness, test/ha/streaming.ts, bundled here with esbuild), one
 * `kslate serve` restarted with 0, 1 then 2 `--database-replica-url`, 64 keep-alive clients
 * reading random records of 1,000. Rounds alternate the order (0,1,2 then 2,1,0) so a machine
 * whose load drifts does not favour one setting. Per row: requests/s, p50/p99, and where the
 * gateway's reads went (svc_db_reads_total by target).
 *
 * `npm run bench:replicas` (as root: PostgreSQL runs as the postgres user; scripts/ha-deps.sh
 * installs postgresql-15). Flags: --rounds 2, --duration 10 (s), --warmup 3 (s), --connections 64.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { authOf, startGateway, writeConfig } from './lib/gateway.mjs';
import { CLASS } from './lib/db.mjs';
import { cannon } from './lib/load.mjs';
import { randInt, round } from './lib/util.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values: opt } = parseArgs({
  options: {
    rounds: { type: 'string', default: '2' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '3' },
    connections: { type: 'string', default: '64' },
    records: { type: 'string', default: '1000' },
    out: { type: 'string', default: join(ROOT, 'bench', 'results') },
  },
});
const ROUNDS = Number(opt.rounds);
const DURATION = Number(opt.duration);
const WARMUP = Number(opt.warmup);
const CONNECTIONS = Number(opt.connections);
const RECORDS = Number(opt.records);
const IDENTITIES = 8;
const say = (m) => process.stderr.write(`${m}\n`);

/** test/ha/streaming.ts as one ES module, written where node_modules resolves pg. */
async function loadHarness() {
  const outfile = join(ROOT, '.cache', `replicas-harness-${process.pid}.mjs`);
  mkdirSync(dirname(outfile), { recursive: true });
  await build({
    stdin: { contents: "export * from './test/ha/streaming.ts';", resolveDir: ROOT, loader: 'ts' },
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

async function readsByTarget(metricsUrl) {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const out = {};
  for (const m of text.matchAll(/^svc_db_reads_total\{target="([^"]+)"\} (\S+)$/gm)) out[m[1]] = Number(m[2]);
  return out;
}

/** Write f1..f3 of bench/r-0..RECORDS-1 through the gateway, 16 at a time. */
async function seed(url) {
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async (_, w) => {
      for (;;) {
        const i = next++;
        if (i >= RECORDS) return;
        for (const f of ['f1', 'f2', 'f3']) {
          const r = await fetch(`${url}/v1/records/${CLASS}/r-${i}/fields/${f}`, {
            method: 'PUT',
            headers: { authorization: authOf(w % IDENTITIES), 'content-type': 'application/json' },
            body: JSON.stringify({ value: `${f} of record ${i}: ${'x'.repeat(64)}`, expected_version: 0 }),
          });
          if (!r.ok && r.status !== 409) throw new Error(`seed PUT ${r.status}: ${await r.text()}`);
        }
      }
    }),
  );
}

async function main() {
  const { StreamingCluster } = await loadHarness();
  say('starting a primary and two streaming standbys (pg_basebackup)…');
  const cluster = await StreamingCluster.start(2);
  const conf = writeConfig(IDENTITIES);
  let gw = null;
  try {
    await cluster.sql(cluster.primary, 'create database kslate');
    const primaryUrl = cluster.url(cluster.primary, 'kslate');
    const standbyUrls = cluster.standbys.map((s) => cluster.url(s, 'kslate'));
    const serve = async (n) =>
      startGateway({
        root: ROOT,
        databaseUrl: primaryUrl,
        classesDir: conf.classesDir,
        keysFile: conf.keysFile,
        extraArgs: ['--allow-async-replication', 'true', ...standbyUrls.slice(0, n).flatMap((u) => ['--database-replica-url', u])],
      });
    gw = await serve(0);
    say(`seeding ${RECORDS} records…`);
    await seed(gw.url);
    await cluster.caughtUp();
    await gw.stop();
    gw = null;

    const rows = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? [0, 1, 2] : [2, 1, 0];
      for (const n of order) {
        gw = await serve(n);
        // startGateway picks the metrics port; the gateway logs where it listens.
        const line = gw.tail.find((l) => /metrics and \/readyz on/.test(l)) ?? '';
        const metricsUrl = /on (http:\/\/[^\s)]+)\)/.exec(line)?.[1];
        const perClient = (i) => [
          { method: 'GET', headers: { authorization: authOf(i % IDENTITIES) }, setupRequest: (req) => ({ ...req, path: `/v1/records/${CLASS}/r-${randInt(RECORDS)}` }) },
        ];
        await cannon({ url: gw.url, connections: CONNECTIONS, duration: WARMUP, perClient });
        const before = metricsUrl ? await readsByTarget(metricsUrl) : {};
        const res = await cannon({ url: gw.url, connections: CONNECTIONS, duration: DURATION, perClient });
        const after = metricsUrl ? await readsByTarget(metricsUrl) : {};
        const reads = Object.fromEntries(Object.keys(after).map((k) => [k, (after[k] ?? 0) - (before[k] ?? 0)]));
        const row = {
          round: r,
          standbys: n,
          rps: Math.round(res.ok / res.seconds),
          p50_ms: round(res.latency.p50),
          p99_ms: round(res.latency.p99),
          non_2xx: res.responses - res.ok,
          errors: res.errors + res.timeouts,
          reads_by_target: reads,
          loadavg: loadavg().map((x) => round(x)),
        };
        console.log(JSON.stringify(row));
        rows.push(row);
        await gw.stop();
        gw = null;
      }
    }
    const mean = (n, k) => {
      const xs = rows.filter((x) => x.standbys === n).map((x) => x[k]);
      return xs.reduce((a, b) => a + b, 0) / xs.length;
    };
    const base = mean(0, 'rps');
    const summary = {
      bench: 'replicas',
      connections: CONNECTIONS,
      duration_s: DURATION,
      rounds: ROUNDS,
      machine: { cpus: cpus().length, loadavg: loadavg().map((x) => round(x)) },
      ...Object.fromEntries(
        [0, 1, 2].map((n) => [
          `${n} standbys`,
          { rps: Math.round(mean(n, 'rps')), ratio_to_0: round(mean(n, 'rps') / base), p50_ms: round(mean(n, 'p50_ms')), p99_ms: round(mean(n, 'p99_ms')) },
        ]),
      ),
    };
    console.log(JSON.stringify(summary));
    mkdirSync(opt.out, { recursive: true });
    const file = join(opt.out, `replicas-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, JSON.stringify({ summary, rows }, null, 2));
    say(`written ${file}`);
  } finally {
    if (gw) await gw.stop().catch(() => undefined);
    conf.cleanup();
    await cluster.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
