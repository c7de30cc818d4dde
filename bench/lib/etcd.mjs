/**
 * The peer in the same run (issue 38 item 5): etcd on loopback in a temp dir, its
 * compare-and-swap and its get driven at the top concurrency by the same load generator that
 * drives kslate and the reference gateway.
 *
 * The choice of protocol: kslate and the reference are driven over HTTP/JSON by autocannon
 * (keep-alive connections = clients, one closure per connection, every answer's status and
 * latency taken). etcd is driven the same way, over its own HTTP/JSON API (the grpc-gateway
 * that etcd serves on its client port: POST /v3/kv/txn and /v3/kv/range, keys and values in
 * base64), so each of the three servers parses one HTTP request and writes one JSON answer per
 * operation and the load generator costs the same per request (measured: the `loadgen` CPU
 * per request is in every row). etcd's native gRPC would spare it the gateway's JSON
 * translation; kslate's gRPC transport is measured elsewhere against kslate's HTTP.
 *
 * The operations:
 *   CAS: txn If(mod_revision(key) == r) Then(put key) Else(range key) on the client's own
 *        key `bench/r-<i>/f1` (the put scenario's records and ownership); success answers the
 *        new revision (the txn's header), failure the current one (the range), as a STALE
 *        answers kslate's current version.
 *   get: range of the record's document key `bench/r-<i>`, which holds the JSON of the eight
 *        fields kslate's get answers (seeded from the database's record r-0).
 * etcd runs with its defaults (one member, fsync on every commit: the durability kslate's
 * strict writes have), and is stopped once its rows are measured.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLASS, withClient } from './db.mjs';
import { RssSampler } from './gateway.mjs';
import { Probe, cannon } from './load.mjs';
import { row } from './scenarios.mjs';
import { freePort, ownedIndex, randInt, round, sleep } from './util.mjs';

const b64 = (s) => Buffer.from(s).toString('base64');
const JSON_HEADERS = { 'content-type': 'application/json' };

/**
 * Run the set-up script (scripts/etcd.sh: finds etcd, or installs Debian's etcd-server with
 * apt-get). Returns { bin } or { reason } when etcd cannot be had here.
 */
export function ensureEtcd(root) {
  const r = spawnSync('sh', [join(root, 'scripts', 'etcd.sh')], { encoding: 'utf8', timeout: 600_000 });
  if (r.status === 0 && r.stdout.trim() !== '') return { bin: r.stdout.trim().split('\n').pop() };
  return { reason: (r.stderr || r.error?.message || `scripts/etcd.sh exited ${r.status}`).trim().split('\n').pop() };
}

/** Start etcd on free loopback ports in a temp dir; wait until it answers. */
export async function startEtcd(bin) {
  const dir = mkdtempSync(join(tmpdir(), 'kslate-bench-etcd-'));
  const client = await freePort();
  const peer = await freePort();
  const url = `http://127.0.0.1:${client}`;
  const child = spawn(
    bin,
    [
      '--name', 'bench',
      '--data-dir', join(dir, 'data'),
      '--listen-client-urls', url,
      '--advertise-client-urls', url,
      '--listen-peer-urls', `http://127.0.0.1:${peer}`,
      '--initial-advertise-peer-urls', `http://127.0.0.1:${peer}`,
      '--initial-cluster', `bench=http://127.0.0.1:${peer}`,
      '--logger', 'zap',
      '--log-level', 'warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const tail = [];
  const keep = (d) => {
    tail.push(String(d).trimEnd());
    if (tail.length > 30) tail.shift();
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exited = null;
  const exitPromise = new Promise((resolve) => child.once('exit', (code, signal) => resolve((exited = { code, signal }))));
  const stop = async () => {
    sampler?.stop();
    if (!exited) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exitPromise;
      clearTimeout(t);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  let sampler = null;
  for (let i = 0; ; i++) {
    const ok = await fetch(`${url}/v3/kv/range`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ key: b64('x') }) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (exited || i > 300) {
      await stop();
      throw new Error(`etcd did not answer within 30 s${exited ? ` (exited ${exited.code ?? exited.signal})` : ''}:\n${tail.join('\n')}`);
    }
    await sleep(100);
  }
  const version = await fetch(`${url}/version`).then((r) => r.json()).then((v) => v.etcdserver, () => '?');
  sampler = new RssSampler(child.pid);
  return { url, pid: child.pid, version, sampler, tail, stop, get exited() { return exited; } };
}

async function post(url, path, body) {
  const r = await fetch(url + path, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(body) });
  if (!r.ok) throw new Error(`etcd ${path}: HTTP ${r.status} ${await r.text()}`);
  return r.json();
}

/**
 * Seed `records` records: `bench/r-<i>` (the document) and `bench/r-<i>/f1`, 64 puts per txn
 * (etcd's --max-txn-ops default is 128) on 8 connections. Returns every f1 key's mod_revision.
 */
async function seedEtcd(url, records, doc) {
  const revs = new Float64Array(records);
  const docB64 = b64(doc);
  const per = 64;
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < records) {
        // This txn's range is fixed before the await: `next` moves on while it is in flight
        // (the other seeders take theirs), and the answer's revision belongs to these records
        // only. (Reading `next` after the await gave other txns' records this revision: about
        // one key in five then failed its first compare - the 9361 "failed compares".)
        const from = next;
        const to = Math.min(records, next + per / 2);
        next = to;
        const ops = [];
        for (let i = from; i < to; i++) {
          ops.push({ request_put: { key: b64(`${CLASS}/r-${i}`), value: docB64 } });
          ops.push({ request_put: { key: b64(`${CLASS}/r-${i}/f1`), value: b64(JSON.stringify({ n: 0, c: -1 })) } });
        }
        const r = await post(url, '/v3/kv/txn', { success: ops });
        for (let i = from; i < to; i++) revs[i] = Number(r.header.revision);
      }
    }),
  );
  return revs;
}

const REVISION = /"revision":"(\d+)"/;
const MOD_REVISION = /"mod_revision":"(\d+)"/;

/**
 * One connection's CAS requests: its own records, the mod_revision it last saw. `inFlight`
 * holds the record of every request sent and not yet answered: a window ends with one such
 * request per connection, which etcd may still apply after the load generator stopped reading,
 * so those records' revisions are read again (resync) before the next window.
 */
function casClient(ctx, revs, i, connections, st, inFlight) {
  const n = revs.length;
  let idx = 0;
  let k = 0;
  return [
    {
      method: 'POST',
      path: '/v3/kv/txn',
      headers: JSON_HEADERS,
      setupRequest(req) {
        idx = ownedIndex(i, connections, n);
        inFlight.add(idx);
        const key = b64(`${CLASS}/r-${idx}/f1`);
        return {
          ...req,
          body: JSON.stringify({
            compare: [{ target: 'MOD', key, mod_revision: String(revs[idx]), result: 'EQUAL' }],
            success: [{ request_put: { key, value: b64(JSON.stringify({ n: ++k, c: i })) } }],
            failure: [{ request_range: { key } }],
          }),
        };
      },
      onResponse(status, body) {
        if (status !== 200) return; // stays in flight: its outcome is read at the resync
        inFlight.delete(idx);
        // A txn that put answers its revision in the header (the key's new mod_revision); one
        // that did not answers the key's current mod_revision in the range.
        if (body.includes('"succeeded":true')) {
          st.applied++;
          revs[idx] = Number(REVISION.exec(body)[1]);
        } else {
          st.stale++;
          const m = MOD_REVISION.exec(body);
          if (m) revs[idx] = Number(m[1]);
        }
      },
    },
  ];
}

function getClient(records, st) {
  return [
    {
      method: 'POST',
      path: '/v3/kv/range',
      headers: JSON_HEADERS,
      setupRequest: (req) => ({ ...req, body: JSON.stringify({ key: b64(`${CLASS}/r-${randInt(records)}`) }) }),
      onResponse(status, body) {
        if (status === 200 && body.includes('"kvs"')) st.found++;
      },
    },
  ];
}

/**
 * Read the current mod_revision of the records whose last CAS was not answered when a window
 * ended, so the next window's first compare on them expects the right revision.
 */
async function resync(url, revs, inFlight) {
  const idxs = [...inFlight];
  inFlight.clear();
  await Promise.all(
    idxs.map(async (idx) => {
      const r = await post(url, '/v3/kv/range', { key: b64(`${CLASS}/r-${idx}/f1`) });
      revs[idx] = Number(r.kvs[0].mod_revision);
    }),
  );
}

async function measured(ctx, etcd, { connections, perClient, reset, settle }) {
  const { cfg } = ctx;
  const env = { ...ctx.probeEnv, gatewayPid: etcd.pid, sampler: etcd.sampler, gcEvents: null };
  if (cfg.warmup > 0) await cannon({ url: etcd.url, connections, duration: cfg.warmup, perClient });
  await settle?.();
  reset?.(); // the warm-up's operations are not counted
  const probe = new Probe(env);
  probe.start();
  const run = await cannon({ url: etcd.url, connections, duration: cfg.duration, perClient });
  const measuredProbe = probe.stop();
  await settle?.();
  return { run, probe: measuredProbe };
}

/** The run of the median throughput among `runs` (lower middle). */
const medianRun = (runs) => [...runs].sort((a, b) => a.rps - b.rps)[Math.floor((runs.length - 1) / 2)];

/**
 * The etcd rows: CAS and get at the top concurrency, `cfg.pairs` windows each, the median
 * window's row shown with every window's throughput. `putTop` / `getTop` are kslate's HTTP
 * rows at that concurrency (and `refPut` / `refGet` the reference's): each gets `ratio_etcd`.
 * Returns the rows, or one "not available" row per operation with the reason when etcd cannot
 * be installed here.
 */
export async function etcdScenario(ctx, { putTop, getTop, refPut, refGet }) {
  const { cfg, say, root } = ctx;
  const c = cfg.levels[cfg.levels.length - 1];
  const found = ensureEtcd(root);
  if (found.reason) {
    say(`  etcd: not available (${found.reason}); its rows are skipped`);
    return ['put', 'get'].map((scenario) => ({ scenario, transport: 'etcd', clients: c, unavailable: true, reason: found.reason }));
  }
  const etcd = await startEtcd(found.bin);
  try {
    // The document a get answers: record r-0's eight fields as JSON, as the database holds them.
    const doc = await withClient(ctx.dbUrl, (db) =>
      db.query(
        `select coalesce(json_object_agg(f.name, f.value order by f.name), '{}')::text as doc
         from records r join fields f on f.record_id = r.id where r.class = $1 and r.rid = 'r-0'`,
        [CLASS],
      ),
    ).then((r) => r.rows[0].doc);
    const t0 = performance.now();
    const revs = await seedEtcd(etcd.url, cfg.sizes.put, doc);
    say(`  etcd ${etcd.version} pid ${etcd.pid} at ${etcd.url}; seeded ${cfg.sizes.put} records (document + f1 keys) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    const casRuns = [];
    const inFlight = new Set();
    const settle = () => resync(etcd.url, revs, inFlight);
    for (let p = 0; p < cfg.pairs; p++) {
      const st = { applied: 0, stale: 0 };
      const reset = () => Object.assign(st, { applied: 0, stale: 0 });
      const h = await measured(ctx, etcd, { connections: c, perClient: (i) => casClient(ctx, revs, i, c, st, inFlight), reset, settle });
      // Counted as kslate's puts are: applied writes (a failed compare answers 200 too).
      h.run.ok = st.applied;
      casRuns.push({ h, st });
    }
    const casRows = casRuns.map(({ h, st }) => row('put', 'etcd', c, h.run, h.probe, { etcd_op: 'CAS: txn If(mod_revision == r) Then(put) Else(range)', stale: st.stale }));
    const cas = medianRun(casRows);
    if (casRows.length > 1) cas.etcd_runs = casRows.map((r) => r.rps);

    const getRuns = [];
    for (let p = 0; p < cfg.pairs; p++) {
      const st = { found: 0 };
      const h = await measured(ctx, etcd, { connections: c, perClient: () => getClient(cfg.sizes.put, st), reset: () => (st.found = 0) });
      // Counted as kslate's gets are: reads that found the record.
      h.run.ok = st.found;
      getRuns.push(row('get', 'etcd', c, h.run, h.probe, { etcd_op: 'range of the record document key' }));
    }
    const get = medianRun(getRuns);
    if (getRuns.length > 1) get.etcd_runs = getRuns.map((r) => r.rps);
    if (etcd.exited) throw new Error(`etcd exited: ${JSON.stringify(etcd.exited)}\n${etcd.tail.join('\n')}`);

    for (const [kslate, ref, peer] of [[putTop, refPut, cas], [getTop, refGet, get]]) {
      if (kslate) {
        kslate.ratio_etcd = peer.rps > 0 ? round(kslate.rps / peer.rps, 2) : null;
        kslate.ratio_etcd_of = `etcd ${peer.scenario === 'put' ? 'CAS' : 'get'}`;
      }
      if (ref) ref.ratio_etcd = peer.rps > 0 ? round(ref.rps / peer.rps, 2) : null;
    }
    say(
      `  etcd CAS@${c}: ${cas.rps} ops/s (p50 ${cas.p50} ms, p99 ${cas.p99} ms, failed compares ${cas.stale}); ` +
        `kslate put ${putTop?.ratio_etcd ?? '–'} of it, reference ${refPut?.ratio_etcd ?? '–'}`,
    );
    say(
      `  etcd get@${c}: ${get.rps} req/s (p50 ${get.p50} ms, p99 ${get.p99} ms); ` +
        `kslate get ${getTop?.ratio_etcd ?? '–'} of it, reference ${refGet?.ratio_etcd ?? '–'}`,
    );
    return [cas, get];
  } finally {
    await etcd.stop();
  }
}
