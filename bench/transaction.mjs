#!/usr/bin/env node
/**
 * `npm run bench:transaction` (issue 33 item 5): a transaction of 4 puts against the same 4
 * puts sent one by one, at 64 clients (closed loop, each client on a record of its own, so
 * every write applies). Reports, per mode, the 4-field updates per second, the field writes per
 * second and the latency of one 4-field update (p50, p99).
 *
 * Starts `kslate serve` from dist/ as bench/run.mjs does, on an embedded PostgreSQL or on a new
 * database of the server KSLATE_BENCH_DATABASE_URL names (dropped at the end).
 *
 * Flags: --clients N (64)  --seconds S (10; --quick: 3)  --quick
 */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CLASS, migrateDb, benchDatabase } from './lib/db.mjs';
import { authOf, startGateway, writeConfig } from './lib/gateway.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const { values: flags } = parseArgs({
  options: { clients: { type: 'string', default: '64' }, seconds: { type: 'string' }, quick: { type: 'boolean', default: false } },
});
const CLIENTS = Number(flags.clients);
const SECONDS = Number(flags.seconds ?? (flags.quick ? 3 : 10));
const FIELDS = ['f1', 'f2', 'f3', 'f4'];
const say = (m) => process.stderr.write(`${m}\n`);

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

/** Each client updates the 4 fields of its record in a loop; `update` does one 4-field update. */
async function run(gw, mode, update) {
  const lat = [];
  let errors = 0;
  const until = performance.now() + SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      const rid = `${mode}-${c}`;
      let version = 0;
      while (performance.now() < until) {
        const t0 = performance.now();
        const ok = await update(gw, c, rid, version);
        if (ok) {
          version++;
          lat.push(performance.now() - t0);
        } else errors++;
      }
    }),
  );
  const secs = (performance.now() - started) / 1000;
  lat.sort((a, b) => a - b);
  return { mode, updates_per_s: lat.length / secs, writes_per_s: (4 * lat.length) / secs, p50_ms: pct(lat, 50), p99_ms: pct(lat, 99), errors };
}

const send = (gw, c, method, path, body) =>
  fetch(gw.url + path, { method, headers: { authorization: authOf(c), 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(
    async (r) => {
      await r.arrayBuffer();
      return r.status < 300;
    },
  );

const singlePuts = async (gw, c, rid, version) => {
  for (const f of FIELDS) {
    if (!(await send(gw, c, 'PUT', `/v1/records/${CLASS}/${rid}/fields/${f}`, { value: version + 1, expected_version: version }))) return false;
  }
  return true;
};

const transaction = (gw, c, rid, version) =>
  send(gw, c, 'POST', `/v1/records/${CLASS}/${rid}/transactions`, {
    writes: FIELDS.map((f) => ({ op: 'put', field: f, value: version + 1, expected_version: version })),
  });

const db = await benchDatabase({ dist: DIST, say, tag: 'tx' });
const conf = writeConfig(CLIENTS);
let gw;
try {
  await migrateDb(db.url, DIST);
  gw = await startGateway({ root: ROOT, databaseUrl: db.url, classesDir: conf.classesDir, keysFile: conf.keysFile });
  say(`gateway ${gw.url}; ${CLIENTS} clients, ${SECONDS} s per mode`);
  // Warm up both paths (prepared statements, JIT) before measuring.
  await transaction(gw, 0, 'warm-tx', 0);
  await singlePuts(gw, 0, 'warm-single', 0);
  const rows = [await run(gw, 'single', singlePuts), await run(gw, 'transaction', transaction)];
  const r = (x) => Math.round(x * 10) / 10;
  console.log('| mode | 4-field updates/s | field writes/s | p50 ms | p99 ms | errors |');
  console.log('|---|---|---|---|---|---|');
  for (const x of rows) console.log(`| ${x.mode === 'single' ? '4 single puts' : 'transaction of 4 puts'} | ${r(x.updates_per_s)} | ${r(x.writes_per_s)} | ${r(x.p50_ms)} | ${r(x.p99_ms)} | ${x.errors} |`);
  console.log(`\ntransaction / single: throughput ×${r(rows[1].updates_per_s / rows[0].updates_per_s)}, p50 ×${r(rows[1].p50_ms / rows[0].p50_ms)}`);
} finally {
  await gw?.stop();
  conf.cleanup();
  await db.stop();
}
