#!/usr/bin/env node
/**
 * Memory soak (issue 15 item 6): `npm run bench:soak` (10 minutes) or
 * `node bench/soak.mjs --minutes 2`. Starts PostgreSQL (embedded, or
 * KSLATE_BENCH_DATABASE_URL) and `kslate serve` as the main bench does, then drives puts and
 * gets at 64 keep-alive clients (three puts to one get, on 20,000 records) for the whole
 * time, sampling the gateway's RSS every 200 ms. Prints the curve (per-minute peak and last
 * RSS, requests per second) and whether it is flat: the last minute's peak no more than 10%
 * above the second minute's (the first minute is the heap growing to its working size).
 * Writes the curve as JSON under bench/results/.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CLASS, FIELDS, migrateDb, seed, startDatabase } from './lib/db.mjs';
import { authOf, startGateway, writeConfig } from './lib/gateway.mjs';
import { cannon } from './lib/load.mjs';
import { ownedIndex } from './lib/util.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const say = (m) => process.stdout.write(m + '\n');

async function main() {
  const { values } = parseArgs({ options: { minutes: { type: 'string' }, clients: { type: 'string' } }, strict: true });
  const minutes = Number(values.minutes ?? 10);
  const clients = Number(values.clients ?? 64);
  const records = 20_000;
  const cleanups = [];
  try {
    const db = await startDatabase({ dist: DIST, say, pgLog: () => undefined });
    cleanups.push(db.stop);
    await migrateDb(db.url, DIST);
    await seed(db.url, { put: records, query: 0, history: 0, tasks: 0 }, say);
    const conf = writeConfig(clients);
    cleanups.push(async () => conf.cleanup());
    const gw = await startGateway({ root: ROOT, databaseUrl: db.url, classesDir: conf.classesDir, keysFile: conf.keysFile, grpc: false });
    cleanups.push(() => gw.stop());
    say(`gateway pid ${gw.pid}; ${minutes} min at ${clients} clients (3 puts : 1 get), RSS every 200 ms`);
    say(`gateway V8 flags: ${gw.v8Flags.join(' ') || 'none'} (the chart's defaults, as in npm run bench)`);

    const versions = new Int32Array(records).fill(1);
    const perClient = (i) => {
      const st = { idx: 0, n: 0 };
      const auth = authOf(i % clients);
      const put = (first) => ({
        method: 'PUT',
        headers: { authorization: auth, 'content-type': 'application/json' },
        setupRequest(req) {
          if (first) st.idx = ownedIndex(i, clients, records);
          return { ...req, path: `/v1/records/${CLASS}/r-${st.idx}/fields/f1`, body: JSON.stringify({ value: { n: ++st.n, c: i }, expected_version: versions[st.idx] }) };
        },
        onResponse(status, body) {
          if (status === 200 || status === 201) versions[st.idx]++;
          else if (status === 409) {
            try {
              versions[st.idx] = JSON.parse(body).current_version;
            } catch {
              /* leave it */
            }
          }
        },
      });
      const get = { method: 'GET', headers: { authorization: auth }, setupRequest: (req) => ({ ...req, path: `/v1/records/${CLASS}/r-${st.idx}?fields=${FIELDS.join(',')}` }) };
      return [put(true), put(false), put(false), get];
    };

    // One cannon run per minute, back to back, so each minute has its own throughput.
    const curve = [];
    for (let m = 1; m <= minutes; m++) {
      gw.sampler.beginWindow();
      const r = await cannon({ url: gw.url, connections: clients, duration: 60, perClient });
      const peak = gw.sampler.endWindow();
      const point = { minute: m, rss_peak_mb: Math.round(peak), rss_last_mb: Math.round(gw.sampler.last), rps: Math.round(r.responses / r.seconds), ok: r.ok, errors: r.errors };
      curve.push(point);
      say(`  minute ${String(m).padStart(2)}: RSS peak ${point.rss_peak_mb} MB, last ${point.rss_last_mb} MB, ${point.rps} req/s, ${r.errors} errors`);
    }
    const ref = curve[Math.min(1, curve.length - 1)].rss_peak_mb;
    const last = curve[curve.length - 1].rss_peak_mb;
    const flat = last <= ref * 1.1;
    say(`${flat ? 'FLAT' : 'GROWING'}: last minute's peak ${last} MB vs minute 2's ${ref} MB (limit +10%); whole-run peak ${Math.round(gw.sampler.peak)} MB (target ≤ 200 MB: ${gw.sampler.peak <= 200 ? 'PASS' : 'MISS'})`);
    const out = join(ROOT, 'bench', 'results');
    mkdirSync(out, { recursive: true });
    const file = join(out, `soak-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, JSON.stringify({ minutes, clients, curve, flat, peak_mb: gw.sampler.peak }, null, 2));
    say(`written to ${file}`);
    return flat ? 0 : 1;
  } finally {
    while (cleanups.length) await cleanups.pop()().catch(() => undefined);
  }
}

main().then(
  (code) => process.exit(code),
  (e) => {
    say(`soak failed: ${e.stack ?? e}`);
    process.exit(1);
  },
);
