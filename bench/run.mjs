#!/usr/bin/env node
/**
 * kslate benchmark harness (issue #5). `npm run bench` (full, ~10 min), `npm run bench -- --quick`
 * (~2 min), `--smoke` (seconds; what test/bench/smoke.test.ts runs).
 *
 * Starts PostgreSQL (embedded in a temp dir, or KSLATE_BENCH_DATABASE_URL), applies the schema,
 * seeds set-based, starts `kslate serve` as a child process, drives it with autocannon, runs a
 * minimal reference gateway (bench/lib/reference.mjs) and the raw-SQL baseline with the pg
 * driver in the same run, prints one Markdown table and writes
 * it as JSON under bench/results/. See docs/performance.md.
 *
 * Plain ESM JavaScript on purpose: Node 20 cannot run TypeScript, the project has no TS runner,
 * and the harness needs only two compiled modules (dist/: startEmbeddedPostgres, migrate);
 * everything else it measures over the network, as a client would.
 *
 * Flags: --quick | --smoke   size and length of the run
 *        --only a,b          scenarios: floor,put,get,etcd,hot,claim,query,history,mcp,grpc
 *                            (etcd: the peer, bench/lib/etcd.mjs; scripts/etcd.sh installs it if missing)
 *        --profile           run the gateway under --cpu-prof and summarise the hottest frames
 *        --trace-gc          run the gateway under --trace-gc; each row gets its GC pauses
 *        --auto-explain MS   (embedded PostgreSQL) log plans of statements slower than MS ms
 *        --gateway-nice=N    renice the gateway process (e.g. =-10) to see how much CPU scheduling matters
 *        --node-defaults     run the gateway with Node's V8 defaults, not the chart's NODE_OPTIONS
 *        --write-batching on|off   the gateway's --write-batching (default: the gateway's, on)
 *        --out DIR           where the JSON goes (default bench/results)
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  enableAutoExplain,
  migrateDb,
  postmasterPid,
  seed,
  serverInfo,
  startDatabase,
  summarizeAutoExplain,
} from './lib/db.mjs';
import { grpcServerBuilt, mcpServerBuilt, startGateway, writeConfig } from './lib/gateway.mjs';
import { etcdScenario } from './lib/etcd.mjs';
import { capturePlans } from './lib/plans.mjs';
import { detectLock } from './lib/raw.mjs';
import { installReference, startReference, uninstallReference } from './lib/reference.mjs';
import { summarizeProfile } from './lib/profile.mjs';
import { evaluateTargets, renderTable } from './lib/report.mjs';
import {
  claimScenario,
  floorScenario,
  getScenario,
  halfPeakScenario,
  historyScenario,
  hotScenario,
  putReference,
  putScenario,
  queryScenario,
} from './lib/scenarios.mjs';
import { bracketRatio, grpcScenario, grpcWireScenario, mcpScenario, mcpWireScenario } from './lib/transports.mjs';
import { machineCpu, round, sleep } from './lib/util.mjs';
import { CLASS, HIST_RID, checkpoint, withClient } from './lib/db.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const ALL = ['floor', 'put', 'get', 'etcd', 'hot', 'claim', 'query', 'history', 'mcp', 'grpc'];

const MODES = {
  full: {
    sizes: { put: 100_000, query: 1_000_000, history: 100_000, tasks: 1_000 },
    levels: [1, 16, 64],
    readLevels: [1, 16],
    warmup: 3,
    duration: 15,
    pairs: 3, // kslate / reference pairs at the top level of put and get (median ratio)
    readDuration: 10,
  },
  quick: {
    sizes: { put: 20_000, query: 100_000, history: 20_000, tasks: 1_000 },
    levels: [1, 16, 64],
    readLevels: [1, 16],
    warmup: 1,
    duration: 3,
    pairs: 3,
    readDuration: 2,
  },
  // Tiny and short: proves the harness starts, drives every scenario and reports. Few clients,
  // so it fits next to a parallel test run on a shared PostgreSQL (max_connections 100).
  smoke: {
    sizes: { put: 300, query: 2_000, history: 300, tasks: 50 },
    levels: [1, 4],
    readLevels: [1],
    warmup: 0,
    duration: 0.3,
    pairs: 3,
    readDuration: 0.3,
  },
};

const say = (m) => process.stdout.write(m + '\n');

/** A short digest of the compiled gateway (dist/), so runs of different builds are told apart. */
function buildId() {
  const h = createHash('sha256');
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.js')) h.update(p.slice(DIST.length)).update(readFileSync(p));
    }
  };
  walk(DIST);
  return h.digest('hex').slice(0, 12);
}

async function main() {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean' },
      smoke: { type: 'boolean' },
      only: { type: 'string' },
      profile: { type: 'boolean' },
      'trace-gc': { type: 'boolean' },
      'auto-explain': { type: 'string' },
      'gateway-nice': { type: 'string' },
      'node-defaults': { type: 'boolean' },
      'write-batching': { type: 'string' },
      out: { type: 'string' },
    },
    strict: true,
  });
  const mode = values.smoke ? 'smoke' : values.quick ? 'quick' : 'full';
  const cfg = { ...MODES[mode] };
  cfg.identities = cfg.levels[cfg.levels.length - 1];
  const only = values.only ? values.only.split(',').map((s) => s.trim()) : ALL;
  for (const s of only) if (!ALL.includes(s)) throw new Error(`--only: unknown scenario "${s}"; use ${ALL.join(',')}`);
  if (!existsSync(join(DIST, 'runtime', 'main.js'))) throw new Error('dist/ is missing: run `npm run build` first (npm run bench does).');
  const outDir = resolve(values.out ?? join(ROOT, 'bench', 'results'));
  const started = new Date();
  const build = buildId();
  const stamp = started.toISOString().replace(/[:.]/g, '-');
  const profileDir = values.profile ? join(outDir, `profile-${stamp}`) : null;

  const cleanups = [];
  const cleanup = async () => {
    while (cleanups.length) await cleanups.pop()().catch(() => undefined);
  };
  const onSignal = () => {
    say('\ninterrupted; stopping the gateway and PostgreSQL');
    cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  let failed = false;
  const rows = [];
  try {
    // How busy the machine is before we start: other processes skew every figure.
    const m0 = machineCpu();
    const sampleMs = mode === 'smoke' ? 200 : 1000;
    await sleep(sampleMs);
    const busyBefore = round(((machineCpu().busy - m0.busy) * 1000) / sampleMs, 2);
    say(`kslate bench (${mode}): machine busy ${busyBefore} cores before start${busyBefore > 0.3 ? ' (other processes are running: expect noise)' : ''}; starting PostgreSQL`);
    // The embedded server's log: kept for --auto-explain, and tapped while plans are captured.
    const pgLogChunks = [];
    let tap = null;
    const pgLog = (m) => {
      if (tap !== null) tap.push(String(m));
      if (values['auto-explain'] && /plan:/.test(m) && pgLogChunks.length < 5000) pgLogChunks.push(String(m));
    };
    const pgTap = {
      begin: () => (tap = []),
      take: () => {
        const text = (tap ?? []).join('\n');
        tap = null;
        return text;
      },
    };
    const db = await startDatabase({ dist: DIST, say, pgLog });
    cleanups.push(db.stop);
    await migrateDb(db.url, DIST);
    const rawLock = await withClient(db.url, (c) => detectLock(c));
    const pg = await serverInfo(db.url);
    pg.where = db.embedded ? 'embedded, temp dir' : 'KSLATE_BENCH_DATABASE_URL';
    // The million query records take most of the seeding: skip them when query is not run.
    if (!only.includes('query')) cfg.sizes = { ...cfg.sizes, query: 0 };
    say(`PostgreSQL ${pg.version} ready; seeding ${JSON.stringify(cfg.sizes)}`);
    const seeded = await seed(db.url, cfg.sizes, say);
    if (values['auto-explain']) {
      if (db.embedded) await enableAutoExplain(db.url, values['auto-explain']);
      else say('  --auto-explain needs the embedded PostgreSQL (its log is read here); ignored');
    }

    const conf = writeConfig(cfg.identities);
    cleanups.push(async () => conf.cleanup());
    // The minimal reference gateway (issue 15): the design bar for put and get, same database,
    // same records, same load, measured in the same run (bench/lib/reference.mjs).
    let ref = null;
    if (only.includes('put') || only.includes('get') || only.includes('history')) {
      // History: the reference reads hist-0's rows rendered at read time, and from a side
      // table of the same rows stored already rendered (what that design would cost to read).
      await withClient(db.url, (c) => installReference(c, { cls: CLASS, renderedRids: only.includes('history') ? [HIST_RID] : [] }));
      cleanups.push(() => withClient(db.url, (c) => uninstallReference(c)));
      ref = await startReference({ databaseUrl: db.url, identities: cfg.identities });
      cleanups.push(() => ref.stop());
    }

    const wantGrpc = only.includes('grpc') && grpcServerBuilt(ROOT);
    if (profileDir) mkdirSync(profileDir, { recursive: true });
    const gw = await startGateway({
      root: ROOT,
      databaseUrl: db.url,
      classesDir: conf.classesDir,
      keysFile: conf.keysFile,
      grpc: wantGrpc,
      profileDir,
      traceGc: values['trace-gc'],
      nice: values['gateway-nice'],
      nodeDefaults: values['node-defaults'],
      extraArgs: values['write-batching'] ? ['--write-batching', values['write-batching']] : [],
    });
    cleanups.push(() => gw.stop());
    say(`gateway pid ${gw.pid} at ${gw.url}${gw.grpcPort ? ` (gRPC :${gw.grpcPort})` : ''}`);
    if (ref) say(`reference gateway pid ${ref.pid} at ${ref.url}`);

    const ctx = {
      cfg,
      ref,
      root: ROOT,
      url: gw.url,
      gw,
      dbUrl: db.url,
      say,
      versions: new Int32Array(cfg.sizes.put).fill(1),
      probeEnv: {
        gatewayPid: gw.pid,
        postmasterPid: await postmasterPid(db.url),
        sampler: gw.sampler,
        gcEvents: values['trace-gc'] ? gw.gcEvents : null,
      },
    };

    const runOne = async (name, fn) => {
      if (!only.includes(name)) return [];
      say(`scenario ${name}`);
      try {
        const out = await fn();
        rows.push(...out);
        return out;
      } catch (e) {
        failed = true;
        say(`  ${name} FAILED: ${e.stack ?? e}`);
        rows.push({ scenario: name, failed: String(e.message ?? e).split('\n')[0] });
        return [];
      } finally {
        if (gw.exited) throw new Error(`the gateway exited during ${name}: ${JSON.stringify(gw.exited)}\n${gw.tail.join('\n')}`);
      }
    };

    const idleRssMb = round(gw.sampler.last, 1);
    const top = cfg.levels[cfg.levels.length - 1];
    await runOne('floor', () => floorScenario(ctx));
    const putRows = await runOne('put', () => putScenario(ctx));
    if (putRows.some((r) => r.history_check && !r.history_check.ok)) failed = true;
    const httpPuts = putRows.filter((r) => r.transport === 'http');
    if (httpPuts.length > 0) {
      const peak = Math.max(...httpPuts.map((r) => r.rps));
      say('scenario put at 50% of peak');
      rows.push(...(await halfPeakScenario(ctx, peak)));
    }
    const getRows = await runOne('get', () => getScenario(ctx));
    // The peer (issue 38): etcd's CAS and get at the top concurrency, right after kslate's and
    // the reference's put and get rows, whose ratios to it it sets.
    const topOf = (rs, t) => rs.filter((r) => r.transport === t && r.clients === top).at(-1);
    await runOne('etcd', () =>
      etcdScenario(ctx, { putTop: topOf(putRows, 'http'), refPut: topOf(putRows, 'reference'), getTop: topOf(getRows, 'http'), refGet: topOf(getRows, 'reference') }),
    );
    // The reference idles (its pool closes idle connections after a second) until history.
    const refAside = ctx.ref;
    ctx.ref = null;
    const hot = await runOne('hot', () => hotScenario(ctx));
    if (hot[0] && !hot[0].proof.ok) failed = true;
    await runOne('claim', () => claimScenario(ctx));
    await runOne('query', () => queryScenario(ctx));
    ctx.ref = refAside;
    await runOne('history', () => historyScenario(ctx));
    if (ref) {
      if (ref.exited) say(`WARNING: the reference gateway exited: ${JSON.stringify(ref.exited)}\n${ref.tail.join('\n')}`);
      await ref.stop();
      ctx.ref = null;
    }
    let httpPutTop = httpPuts.find((r) => r.clients === top);
    const wantMcp = only.includes('mcp') && mcpServerBuilt(ROOT);
    if (wantMcp || wantGrpc) {
      // The transport rows are compared with an HTTP put made right before them, minutes
      // apart; the writes of the scenarios before leave enough dead rows for autovacuum to
      // start on fields (1.8M rows) in the middle of them (a full run's gRPC row once ran
      // beside it: PostgreSQL CPU per put 0.65 ms against 0.47). Vacuum first, untimed.
      const t0 = performance.now();
      await withClient(db.url, (c) => c.query('vacuum (analyze) records, fields, history'));
      say(`vacuumed records, fields and history before the transport rows (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
      say('scenario put over HTTP again (reference for MCP and gRPC)');
      const ref = await putReference(ctx);
      rows.push(...ref);
      httpPutTop = ref[0];
    }
    // Every transport row starts after a checkpoint, as the HTTP put it is compared with does
    // (putReference): the same WAL state at the start.
    const transportRow = async (scenario) => {
      await checkpoint(db.url);
      return scenario(ctx, httpPutTop);
    };
    await runOne('mcp', async () => {
      if (!wantMcp) {
        say('  mcp: not available (dist/runtime/http/mcp/server.js is not in this build)');
        return [{ scenario: 'put', transport: 'mcp', clients: top, unavailable: true }];
      }
      // The wire client's row (the target) first, right after its HTTP reference.
      return [...(await transportRow(mcpWireScenario)), ...(await transportRow(mcpScenario))];
    });
    const mcpRows = rows.filter((r) => r.scenario === 'put' && (r.transport === 'mcp' || r.transport === 'mcp wire'));
    const httpBeforeMcp = httpPutTop;
    await runOne('grpc', async () => {
      if (!wantGrpc) {
        say('  grpc: not available (dist/runtime/grpc/server.js is not in this build)');
        return [{ scenario: 'put', transport: 'grpc', clients: top, unavailable: true }];
      }
      // Its own HTTP reference, made right before its wire row: each row of puts leaves dead
      // rows and index growth behind, so an HTTP row made three rows earlier met a lighter
      // database (a quick run: PostgreSQL CPU per put 0.20 ms in the HTTP row, 0.29-0.30 in the
      // gRPC rows after the two MCP rows).
      if (httpPutTop && wantMcp) {
        const again = await putReference(ctx);
        rows.push(...again);
        httpPutTop = again[0];
      }
      return [...(await transportRow(grpcWireScenario)), ...(await transportRow(grpcScenario))];
    });
    // Each transport's rows against the better of the HTTP rows around them (bracketRatio):
    // MCP's are between the first HTTP reference and gRPC's (or one more after them, when
    // gRPC did not run); gRPC's get one more after them.
    const grpcRows = rows.filter((r) => r.scenario === 'put' && (r.transport === 'grpc' || r.transport === 'grpc wire'));
    if (httpPutTop && (mcpRows.length > 0 || grpcRows.length > 0)) {
      const httpBeforeGrpc = httpPutTop;
      let httpAfterGrpc = null;
      const mcpHasNoAfter = httpBeforeGrpc === httpBeforeMcp && mcpRows.some((r) => r.rps > 0);
      if (grpcRows.some((r) => r.rps > 0) || mcpHasNoAfter) {
        say('scenario put over HTTP again (after the transport rows)');
        const after = await putReference(ctx);
        rows.push(...after);
        httpAfterGrpc = after[0];
      }
      bracketRatio(mcpRows, httpBeforeMcp, httpBeforeGrpc !== httpBeforeMcp ? httpBeforeGrpc : httpAfterGrpc);
      bracketRatio(grpcRows, httpBeforeGrpc, httpAfterGrpc);
      for (const r of [...mcpRows, ...grpcRows]) if (r.rps > 0) say(`  ${r.transport} put@${r.clients}: ${r.ratio} of ${r.ratio_of}`);
    }

    const peakRssMb = round(gw.sampler.peak, 1);
    cleanups.pop();
    await gw.stop();

    // The statements behind each operation, with their plans, from the server itself.
    let plans = null;
    if (db.embedded) {
      say('capturing the gateway\'s statements and plans (auto_explain)');
      plans = await capturePlans({ root: ROOT, dbUrl: db.url, conf, pgLog: pgTap, versions: ctx.versions, say }).catch((e) => {
        say(`  plan capture failed: ${e.message}`);
        return null;
      });
    }

    let profile = null;
    if (profileDir) {
      const file = readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile'));
      if (file) profile = summarizeProfile(join(profileDir, file));
    }

    const targets = evaluateTargets(rows, { cfg, peakRssMb });
    const buildAfter = buildId();
    if (buildAfter !== build) say(`WARNING: dist/ changed during the run (build ${build} -> ${buildAfter}); figures may mix two builds`);
    const schema = await withClient(db.url, (c) => c.query('select max(version) as v from kslate_migrations')).then((r) => r.rows[0].v);
    // Background work PostgreSQL did during the run (compare with each row's window).
    const autovacuum = await withClient(db.url, (c) =>
      c.query(`select relname, last_autovacuum, last_autoanalyze, autovacuum_count, autoanalyze_count, n_dead_tup
               from pg_stat_user_tables where relname in ('records', 'fields', 'history') order by relname`),
    ).then((r) => r.rows);
    const meta = {
      mode,
      when: started.toISOString(),
      machine: `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB`,
      node: process.versions.node,
      pg,
      sizesText: `${cfg.sizes.put.toLocaleString('en')} put/get records × 8 fields, ${cfg.sizes.query.toLocaleString('en')} query records, ${cfg.sizes.history.toLocaleString('en')} history rows, ${cfg.sizes.tasks.toLocaleString('en')} tasks (seeded in ${seeded.seconds.toFixed(1)} s)`,
      busyBefore,
      idleRssMb,
      build,
      buildAfter,
      schema,
      gatewayNice: values['gateway-nice'] ?? null,
      gatewayV8Flags: gw.v8Flags,
      gatewayV8FlagsFrom: `${values['node-defaults'] ? 'Node\'s defaults' : 'the chart\'s defaults'}${process.env.KSLATE_BENCH_NODE_ARGS ? ' + KSLATE_BENCH_NODE_ARGS' : ''}`,
      version: JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version,
      durationsText: `${cfg.warmup} s warm-up + ${cfg.duration} s measured per run (${cfg.readDuration} s for query/history); put and get against the reference at ${cfg.levels[cfg.levels.length - 1]} clients: median of ${cfg.pairs} pairs`,
    };
    const table = renderTable(rows, targets, meta);
    say('\n' + table + '\n');
    if (profile) {
      say(`gateway CPU profile (${profile.seconds} s sampled), self time by package:`);
      for (const p of profile.by_package.slice(0, 12)) say(`  ${String(p.self_pct).padStart(5)}%  ${p.where}`);
      say('hottest functions (self time):');
      for (const f of profile.top_functions.slice(0, 20)) say(`  ${String(f.self_pct).padStart(5)}%  ${f.fn}`);
    }
    say(`raw baseline lock step: ${rawLock}`);
    if (plans) {
      say('statements per operation (auto_explain, ANALYZE; ms inside PostgreSQL):');
      for (const [name, op] of Object.entries(plans.operations)) {
        const list = op.statements.map((st) => `${st.statement.slice(0, 60)}… ${st.ms.toFixed(2)} ms`);
        say(`  ${name} (HTTP ${op.status}): ${op.statements.length} statement(s)`);
        for (const l of list) say(`    ${l}`);
      }
      for (const [name, d] of Object.entries(plans.raw_matches_gateway)) {
        say(`  raw ${name} baseline sends what the gateway sends: ${d.same ? 'yes' : 'NO (see warning above)'}`);
      }
    } else {
      say('statements per operation: not captured (needs the embedded PostgreSQL, whose log the harness reads)');
    }
    const autoExplain = values['auto-explain'] ? summarizeAutoExplain(pgLogChunks) : null;
    if (autoExplain) {
      say(`auto_explain: statements slower than ${values['auto-explain']} ms (count, slowest, statement):`);
      for (const g of autoExplain.slice(0, 10)) say(`  ${String(g.count).padStart(6)}  ${g.max_ms.toFixed(1).padStart(8)} ms  ${g.statement}`);
    }
    mkdirSync(outDir, { recursive: true });
    const file = join(outDir, `${stamp}.json`);
    writeFileSync(
      file,
      JSON.stringify(
        { meta, config: cfg, seed_seconds: seeded.seconds, peak_rss_mb: peakRssMb, raw_lock: rawLock, autovacuum, targets, rows, plans, profile, auto_explain: autoExplain },
        null,
        2,
      ),
    );
    say(`results written to ${file}`);
  } catch (e) {
    failed = true;
    say(`bench failed: ${e.stack ?? e}`);
  } finally {
    await cleanup();
  }
  return failed ? 1 : 0;
}

main().then((code) => process.exit(code));
