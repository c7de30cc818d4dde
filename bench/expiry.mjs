#!/usr/bin/env node
/**
 * TTL expiry under load (issue 12): expire N records (with fields and history) while 64
 * clients put to live records of the same class, and report records expired per second and
 * the put latency during expiry against the same load without it. `npm run bench:expiry`
 * (1,000,000 records), `-- --records 100000 --duration 5` for a quick look.
 *
 * The sweep runs in this process through the compiled handler (dist/worker/sweep.js) with
 * its own pool, as `kslate worker` would; the gateway is `kslate serve` as a child process.
 */
import { writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { migrateDb, postmasterPid, startDatabase, withClient } from './lib/db.mjs';
import { authOf, startGateway, writeConfig } from './lib/gateway.mjs';
import { Probe, cannon } from './lib/load.mjs';
import { machineCpu, round, sleep } from './lib/util.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const CLS = 'expiring';

const { values: opt } = parseArgs({
  options: {
    records: { type: 'string', default: '1000000' },
    live: { type: 'string', default: '10000' },
    clients: { type: 'string', default: '64' },
    duration: { type: 'string', default: '15' },
    budget: { type: 'string', default: '5000' },
    history: { type: 'string', default: '3' },
    out: { type: 'string', default: join(ROOT, 'bench', 'results') },
  },
});
const N = Number(opt.records);
const LIVE = Number(opt.live);
const CLIENTS = Number(opt.clients);
const DURATION = Number(opt.duration);
const BUDGET = Number(opt.budget);
const HIST = Number(opt.history);
const say = (m) => process.stdout.write(`${m}\n`);

async function seed(url) {
  const t0 = performance.now();
  await withClient(url, async (c) => {
    await c.query(`set maintenance_work_mem = '256MB'`);
    await c.query(`set session_replication_role = replica`).catch(() => undefined);
    await c.query(
      `insert into classes (name, namespace, spec) values ($1, 'bench', $2::json)
       on conflict (name) do update set spec = excluded.spec`,
      [CLS, JSON.stringify(classSpec())],
    );
    await c.query(
      `insert into records (class, rid, record_version, last_write_at)
       select $1, 'old-' || g, 2, now() - interval '2 hours' from generate_series(1, $2::int) g
       union all select $1, 'live-' || g, 1, now() from generate_series(0, $3::int - 1) g`,
      [CLS, N, LIVE],
    );
    await c.query(
      `insert into fields (record_id, class, name, kind, value, version, record_version, author, identity_strength, updated_at, bytes)
       select r.id, $1, f, 'versioned', '{"n":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}', 1, 1,
              'apikey:bench-0', 'shared-secret', now(), 100
       from records r, unnest(array['f1','f2']) f where r.class = $1`,
      [CLS],
    );
    await c.query(
      `insert into history (class, rid, field, op, version, record_version, value, author, identity_strength, outcome, bytes)
       select $1, 'old-' || g, 'f1', 'put', v, v, '{"n":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}',
              'apikey:bench-0', 'shared-secret', 'applied', 100
       from generate_series(1, $2::int) g, generate_series(1, $3::int) v`,
      [CLS, N, HIST],
    );
    await c.query('vacuum analyze records, fields, history');
  });
  say(`seeded ${N} expired records (2 fields, ${HIST} history rows each) and ${LIVE} live ones in ${round((performance.now() - t0) / 1000, 1)} s`);
}

function classSpec() {
  return {
    ttl: '1h',
    fields: { f1: { kind: 'versioned' }, f2: { kind: 'versioned' } },
    roles: { agent: { subjects: Array.from({ length: CLIENTS }, (_, i) => `apikey:bench-${i}`), read: ['*'], write: ['*'] } },
  };
}

/** Each client puts to live records of its own slice, with the version it knows. */
function putClient(versions, i) {
  const st = { idx: 0, n: 0 };
  const per = Math.floor(LIVE / CLIENTS);
  return [
    {
      method: 'PUT',
      headers: { authorization: authOf(i), 'content-type': 'application/json' },
      setupRequest(req) {
        st.idx = i * per + (st.n % per);
        return { ...req, path: `/v1/records/${CLS}/live-${st.idx}/fields/f1`, body: JSON.stringify({ value: { n: ++st.n, c: i }, expected_version: versions[st.idx] }) };
      },
      onResponse(status, body) {
        if (status === 200 || status === 201) versions[st.idx]++;
        else if (status === 409) {
          try {
            versions[st.idx] = JSON.parse(body).current_version;
          } catch {
            /* keep */
          }
        }
      },
    },
  ];
}

async function main() {
  const db = await startDatabase({ dist: DIST, say });
  const cfgDir = writeConfig(CLIENTS);
  let gw;
  try {
    await migrateDb(db.url, DIST);
    await seed(db.url);
    writeFileSync(
      join(cfgDir.classesDir, 'expiring.yaml'),
      stringify({ apiVersion: 'kslate.dev/v1', kind: 'SharedContext', metadata: { name: CLS, namespace: 'bench' }, spec: classSpec() }),
    );
    gw = await startGateway({ root: ROOT, databaseUrl: db.url, classesDir: cfgDir.classesDir, keysFile: cfgDir.keysFile, say });
    const versions = new Array(LIVE).fill(1);
    const ctxUrl = gw.url;
    const probeEnv = { gatewayPid: gw.pid, postmasterPid: await postmasterPid(db.url), sampler: gw.sampler };

    // Warm-up, then the same load without expiry.
    await cannon({ url: ctxUrl, connections: CLIENTS, duration: 3, perClient: (i) => putClient(versions, i) });
    let probe = new Probe(probeEnv);
    probe.start();
    const base = await cannon({ url: ctxUrl, connections: CLIENTS, duration: DURATION, perClient: (i) => putClient(versions, i) });
    const baseProbe = probe.stop();
    say(`puts without expiry: ${round(base.ok / base.seconds, 0)}/s, p50 ${round(base.latency.p50, 2)} ms, p99 ${round(base.latency.p99, 2)} ms`);

    // Expiry: budgeted sweeps back to back, as a worker with a short interval would run them.
    const { sweep } = await import(join(DIST, 'worker', 'sweep.js'));
    const { createPool, PgDb } = await import(join(DIST, 'db', 'kysely', 'index.js'));
    const sweepDb = new PgDb(createPool({ connectionString: db.url, max: 3, timeoutMs: 300_000 }));
    const log = { debug() {}, info() {}, warn: (m) => say(`  sweep warn: ${m}`), error: (m) => say(`  sweep error: ${m}`) };
    const sweeps = [];
    let expiring = true;
    const t0 = performance.now();
    const expiry = (async () => {
      for (;;) {
        const s0 = performance.now();
        const r = await sweep({ db: sweepDb, log, holder: 'bench/expiry' }, { budgetMs: BUDGET });
        sweeps.push({ ms: Math.round(performance.now() - s0), records: r.expired?.records ?? 0, history: r.expired?.historyRows ?? 0, more: r.expired?.more, steps: r.stepMs, errors: r.errors });
        if (r.errors.length) say(`  sweep errors: ${JSON.stringify(r.errors)}`);
        if (!r.expired?.more && (r.expired?.records ?? 0) === 0) break;
      }
      expiring = false;
      return (performance.now() - t0) / 1000;
    })();
    const windows = [];
    probe = new Probe(probeEnv);
    probe.start();
    while (expiring) {
      const w = await cannon({ url: ctxUrl, connections: CLIENTS, duration: Math.min(DURATION, 10), perClient: (i) => putClient(versions, i) });
      windows.push({ ok: w.ok, seconds: w.seconds, p50: w.latency.p50, p99: w.latency.p99, max: w.latency.max, expiring });
    }
    const duringProbe = probe.stop();
    const expirySeconds = await expiry;
    const expired = sweeps.reduce((a, s) => a + s.records, 0);
    const purged = sweeps.reduce((a, s) => a + s.history, 0);
    const okSum = windows.reduce((a, w) => a + w.ok, 0);
    const secSum = windows.reduce((a, w) => a + w.seconds, 0);
    const worstP99 = Math.max(...windows.map((w) => w.p99));
    const medianP99 = windows.map((w) => w.p99).sort((a, b) => a - b)[Math.floor(windows.length / 2)];
    const result = {
      at: new Date().toISOString(),
      records: N,
      history_per_record: HIST,
      live: LIVE,
      clients: CLIENTS,
      budget_ms: BUDGET,
      expired,
      history_purged: purged,
      expiry_seconds: round(expirySeconds, 1),
      records_per_second: round(expired / expirySeconds, 0),
      sweeps: sweeps.length,
      sweep_ms: { max: Math.max(...sweeps.map((s) => s.ms)), mean: round(sweeps.reduce((a, s) => a + s.ms, 0) / sweeps.length, 0) },
      // Summed over the sweeps: where the time went (expire includes the purge of history).
      step_ms: sweeps.reduce((a, s) => {
        for (const [k, v] of Object.entries(s.steps ?? {})) a[k] = (a[k] ?? 0) + v;
        return a;
      }, {}),
      put_without_expiry: { rps: round(base.ok / base.seconds, 0), p50: round(base.latency.p50, 2), p99: round(base.latency.p99, 2), cpu: baseProbe.cpu },
      put_during_expiry: { rps: round(okSum / secSum, 0), p99_median_window: round(medianP99, 2), p99_worst_window: round(worstP99, 2), windows: windows.map((w) => ({ ...w, p50: round(w.p50, 2), p99: round(w.p99, 2) })), cpu: duringProbe.cpu },
      left: await withClient(db.url, async (c) => (await c.query(`select count(*)::int as n from records where class = $1 and rid like 'old-%'`, [CLS])).rows[0].n),
      machine: machineCpu().cores ?? undefined,
    };
    await sweepDb.kysely.destroy();
    say(`expired ${expired} records (${purged} history rows) in ${result.expiry_seconds} s over ${sweeps.length} sweeps: ${result.records_per_second} records/s`);
    say(`puts during expiry: ${result.put_during_expiry.rps}/s, p99 ${result.put_during_expiry.p99_median_window} ms (median window), ${result.put_during_expiry.p99_worst_window} ms (worst window)`);
    say(`puts without expiry: ${result.put_without_expiry.rps}/s, p99 ${result.put_without_expiry.p99} ms`);
    say(`time per step over all sweeps (ms): ${JSON.stringify(result.step_ms)}`);
    mkdirSync(opt.out, { recursive: true });
    const file = join(opt.out, `expiry-${result.at.replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, JSON.stringify(result, null, 2));
    say(`written ${file}`);
    if (result.left !== 0) throw new Error(`${result.left} expired records were left`);
  } finally {
    await gw?.stop();
    cfgDir.cleanup();
    await db.stop();
  }
}

main().catch(async (e) => {
  process.stderr.write(`bench:expiry failed: ${e.stack ?? e}\n`);
  await sleep(10);
  process.exit(1);
});
