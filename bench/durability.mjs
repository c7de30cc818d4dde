#!/usr/bin/env node
/**
 * `npm run bench:durability` (issue 38 item 2): what `durability: relaxed` buys. Soft puts at
 * 64 clients (closed loop, autocannon as bench/run.mjs drives put, each client on records of
 * its own) to a strict soft field and to a relaxed one of the same class, in `--pairs` adjacent
 * pairs (strict then relaxed, each after a CHECKPOINT); prints each pair's throughput and p99
 * and the median ratio. A relaxed put commits with synchronous_commit off (docs/api.md
 * "Durability"), so the difference is what waiting for the WAL flush costs on this storage.
 *
 * Starts `kslate serve` from dist/ on an embedded PostgreSQL (or KSLATE_BENCH_DATABASE_URL's
 * server, in a database of its own dropped at the end), as bench/transaction.mjs does.
 *
 * Flags: --clients N (64)  --seconds S (10; --quick: 3)  --pairs P (3)  --quick
 */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { checkpoint, migrateDb, postmasterPid, benchDatabase } from './lib/db.mjs';
import { authOf, startGateway, writeConfig } from './lib/gateway.mjs';
import { Probe, cannon } from './lib/load.mjs';
import { machineCpu, ownedIndex, round, sleep } from './lib/util.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const { values: flags } = parseArgs({
  options: {
    clients: { type: 'string', default: '64' },
    seconds: { type: 'string' },
    pairs: { type: 'string', default: '3' },
    quick: { type: 'boolean', default: false },
  },
});
const CLIENTS = Number(flags.clients);
const SECONDS = Number(flags.seconds ?? (flags.quick ? 3 : 10));
const PAIRS = Number(flags.pairs);
const RECORDS = 10_000;
const CLS = 'benchsoft';
const say = (m) => process.stderr.write(`${m}\n`);

/** One connection's soft puts of `field` on its own records. */
const putClient = (field) => (i) => {
  let n = 0;
  return [
    {
      method: 'PUT',
      headers: { authorization: authOf(i % CLIENTS), 'content-type': 'application/json' },
      setupRequest: (req) => ({
        ...req,
        path: `/v1/records/${CLS}/r-${ownedIndex(i, CLIENTS, RECORDS)}/fields/${field}`,
        body: JSON.stringify({ value: { n: ++n, c: i } }),
      }),
    },
  ];
};

const db = await benchDatabase({ dist: DIST, say, tag: 'dur' });
const conf = writeConfig(CLIENTS, {
  extra: [{ name: CLS, spec: { fields: { strict: { kind: 'soft' }, relaxed: { kind: 'soft', durability: 'relaxed' } } } }],
});
let gw;
try {
  await migrateDb(db.url, DIST);
  gw = await startGateway({ root: ROOT, databaseUrl: db.url, classesDir: conf.classesDir, keysFile: conf.keysFile });
  const env = { gatewayPid: gw.pid, postmasterPid: await postmasterPid(db.url), sampler: gw.sampler, gcEvents: null };
  const m0 = machineCpu();
  await sleep(1000);
  const busy = round(machineCpu().busy - m0.busy, 2);
  say(`gateway ${gw.url}; ${CLIENTS} clients, ${SECONDS} s per window, ${PAIRS} pairs; machine busy ${busy} cores before start${busy > 0.3 ? ' (loaded: expect noise)' : ''}`);
  // Every record and field written once first (both fields exist before the measured puts).
  for (const field of ['strict', 'relaxed']) await cannon({ url: gw.url, connections: CLIENTS, duration: Math.max(1, SECONDS / 3), perClient: putClient(field) });
  const window = async (field) => {
    await checkpoint(db.url);
    await cannon({ url: gw.url, connections: CLIENTS, duration: 1, perClient: putClient(field) });
    const probe = new Probe(env);
    probe.start();
    const run = await cannon({ url: gw.url, connections: CLIENTS, duration: SECONDS, perClient: putClient(field) });
    const p = probe.stop();
    return { field, rps: round(run.ok / run.seconds, 1), p50: round(run.latency.p50, 2), p99: round(run.latency.p99, 2), errors: run.responses - run.ok, gw: round(p.cpu.gateway, 2), pg: round(p.cpu.postgres, 2) };
  };
  const pairs = [];
  for (let i = 0; i < PAIRS; i++) {
    const strict = await window('strict');
    const relaxed = await window('relaxed');
    pairs.push({ strict, relaxed, ratio: round(relaxed.rps / strict.rps, 2) });
    say(`  pair ${i + 1}: strict ${strict.rps}/s p99 ${strict.p99} ms, relaxed ${relaxed.rps}/s p99 ${relaxed.p99} ms -> x${pairs.at(-1).ratio}`);
  }
  console.log(`| pair | strict puts/s | strict p50 / p99 ms | relaxed puts/s | relaxed p50 / p99 ms | relaxed / strict | CPU cores gw / pg (strict; relaxed) |`);
  console.log('|---:|---:|---:|---:|---:|---:|---|');
  pairs.forEach((x, i) =>
    console.log(`| ${i + 1} | ${x.strict.rps} | ${x.strict.p50} / ${x.strict.p99} | ${x.relaxed.rps} | ${x.relaxed.p50} / ${x.relaxed.p99} | ${x.ratio} | ${x.strict.gw} / ${x.strict.pg}; ${x.relaxed.gw} / ${x.relaxed.pg} |`),
  );
  const med = [...pairs].sort((a, b) => a.ratio - b.ratio)[Math.floor((pairs.length - 1) / 2)];
  console.log(`\nrelaxed / strict soft put@${CLIENTS}: median ratio ${med.ratio} (pair: strict ${med.strict.rps}/s p99 ${med.strict.p99} ms, relaxed ${med.relaxed.rps}/s p99 ${med.relaxed.p99} ms); errors ${pairs.reduce((a, x) => a + x.strict.errors + x.relaxed.errors, 0)}`);
} finally {
  await gw?.stop();
  conf.cleanup();
  await db.stop();
}
