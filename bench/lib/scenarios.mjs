/**
 * The scenarios of issue #5. Each returns result rows:
 * { scenario, transport, clients, rps, p50, p99, peakRssMb, cpu, ok, responses, codes, ... }.
 */
import { isDeepStrictEqual } from 'node:util';
import { CLASS, FIELDS, HIST_RID, HOT, QCLASS, TEAMS, checkpoint, withClient } from './db.mjs';
import { authOf } from './gateway.mjs';
import { Latencies, ownedIndex, randInt, round } from './util.mjs';
import { Probe, cannon, keepAliveAgent, openLoop } from './load.mjs';
import { connectAll, rawGet, rawOpenLoop, rawPut, rawRun } from './raw.mjs';

const JSON_HEADERS = (i, k) => ({ authorization: authOf(i % k), 'content-type': 'application/json' });

/** A result row from a load run and its probe. */
export function row(scenario, transport, clients, run, probe, extra = {}, countAll = false) {
  const counted = countAll ? run.responses : run.ok;
  return {
    scenario,
    transport,
    clients,
    seconds: round(run.seconds, 2),
    window: [probe.startedAt, probe.endedAt],
    rps: round(counted / run.seconds, 1),
    ok: run.ok,
    responses: run.responses,
    codes: run.codes,
    errors: run.errors ?? 0,
    timeouts: run.timeouts ?? 0,
    p50: round(run.latency.p50, 3),
    p90: round(run.latency.p90, 3),
    p99: round(run.latency.p99, 3),
    max: round(run.latency.max, 3),
    mean: round(run.latency.mean, 3),
    peakRssMb: probe.peakRssMb === null ? null : round(probe.peakRssMb, 1),
    cpu: {
      gateway: round(probe.cpu.gateway, 2),
      postgres: round(probe.cpu.postgres, 2),
      loadgen: round(probe.cpu.loadgen, 2),
      machine: round(probe.cpu.machine, 2),
      irq: round(probe.cpu.irq, 2),
      other: round(probe.cpu.other, 2),
      steal: round(probe.cpu.steal, 2),
    },
    ...(probe.gc ? { gateway_gc: probe.gc } : {}),
    // CPU time each party spent per counted request, in ms (cores / throughput).
    cpu_ms_per_op: {
      gateway: perOp(probe.cpu.gateway, counted, run.seconds),
      postgres: perOp(probe.cpu.postgres, counted, run.seconds),
      loadgen: perOp(probe.cpu.loadgen, counted, run.seconds),
    },
    ...extra,
  };
}

const perOp = (cores, count, seconds) => (cores === null || count === 0 ? null : round((cores * seconds * 1000) / count, 3));

/** autocannon: warm up, then a measured run inside the probe. */
async function cannonMeasured(ctx, { connections, perClient, warmup, duration }) {
  if (warmup > 0) await cannon({ url: ctx.url, connections, duration: warmup, perClient });
  const probe = new Probe(ctx.probeEnv);
  probe.start();
  const run = await cannon({ url: ctx.url, connections, duration, perClient });
  return { run, probe: probe.stop() };
}

// ---- floor: what one round trip costs here, before any kslate work ----------------------------

/**
 * Two reference points at 1 client: the smallest PostgreSQL statement from the pg driver, and
 * the smallest authenticated gateway request that does not touch the database (GET
 * /v1/classes, served from the class cache). Every other figure is a multiple of these.
 */
export async function floorScenario(ctx) {
  const { cfg, say } = ctx;
  const r = await rawRun({
    url: ctx.dbUrl,
    clients: 1,
    warmup: cfg.warmup,
    duration: cfg.readDuration,
    probe: new Probe({ ...ctx.probeEnv, sampler: null, gcEvents: null }),
    op: async (conn) => (await conn.query('select $1::int as x', [1])).rowCount === 1,
  });
  const pgRow = row('floor: select 1', 'raw', 1, r, r.probe);
  const h = await cannonMeasured(ctx, {
    connections: 1,
    perClient: () => [{ method: 'GET', path: '/v1/classes', headers: { authorization: authOf(0) } }],
    warmup: cfg.warmup,
    duration: cfg.readDuration,
  });
  const httpRow = row('floor: GET /v1/classes (no database)', 'http', 1, h.run, h.probe);
  say(`  floor: pg round trip p50 ${pgRow.p50} ms (${pgRow.rps}/s); gateway without database p50 ${httpRow.p50} ms (${httpRow.rps}/s)`);
  return [pgRow, httpRow];
}

// ---- the reference gateway (bench/lib/reference.mjs) -----------------------------------------

/** STALE answers of an HTTP run (a put client whose versions went out of sync would show here). */
const staleOf = (run) => run.codes?.[409] ?? 0;

/**
 * The same load (same clients, same records, same `ctx.versions`) against the reference
 * gateway, right after the kslate run, after a CHECKPOINT. Its CPU and RSS are measured as the
 * kslate gateway's are (the probe's "gateway" is the reference's process here). Returns its
 * row, or null when the harness runs no reference. Waits until its idle pool connections have
 * closed, so the raw-SQL run after it has the database's connection slots.
 */
async function referenceRun(ctx, scenario, c, perClient, duration) {
  if (!ctx.ref) return null;
  const { cfg } = ctx;
  await checkpoint(ctx.dbUrl);
  const refCtx = {
    ...ctx,
    url: ctx.ref.url,
    probeEnv: { ...ctx.probeEnv, gatewayPid: ctx.ref.pid, sampler: ctx.ref.sampler, gcEvents: null },
  };
  // The reference writes the same history table, whose trigger renders every row for
  // kslate's history reads (migration 0008, ~20-40 µs of PostgreSQL per row here). That is
  // kslate's design cost, not the minimal design's: the trigger is off while the reference
  // writes (its rows are rendered when read, as rows older than 0008 are). Raw SQL sends
  // kslate's statements, so it keeps paying it.
  const writes = scenario === 'put';
  if (writes) await withClient(ctx.dbUrl, (db) => db.query('alter table history disable trigger history_render'));
  let h;
  try {
    h = await cannonMeasured(refCtx, { connections: c, perClient, warmup: cfg.warmup, duration });
  } finally {
    if (writes) await withClient(ctx.dbUrl, (db) => db.query('alter table history enable always trigger history_render'));
  }
  const r = row(scenario, 'reference', c, h.run, h.probe, scenario === 'put' ? { stale: staleOf(h.run) } : {});
  if (ctx.ref.exited) throw new Error(`the reference gateway exited: ${JSON.stringify(ctx.ref.exited)}\n${ctx.ref.tail.join('\n')}`);
  await ctx.ref.drained(ctx.dbUrl, withClient);
  return r;
}

function addRefRatio(http, ref, of) {
  if (!ref) return;
  http.ratio_ref = ref.rps > 0 ? round(http.rps / ref.rps, 2) : null;
  http.ratio_ref_of = of;
}

/**
 * kslate and the reference gateway, each right after the other, `pairs` times (at the top
 * concurrency; once below it). One pair's ratio moved by a quarter between runs of the same
 * build (put 0.58 against 0.74-0.80: a stall in either row decides it); the median of
 * adjacent pairs does not follow one stall, and each ratio still compares runs seconds apart.
 * Returns the median pair's rows, its ratio being the median, and every pair's figures.
 */
async function pairedRuns(ctx, scenario, c, perClient, pairs, extra) {
  const { cfg } = ctx;
  const all = [];
  for (let p = 0; p < pairs; p++) {
    await checkpoint(ctx.dbUrl);
    const h = await cannonMeasured(ctx, { connections: c, perClient, warmup: cfg.warmup, duration: cfg.duration });
    const http = row(scenario, 'http', c, h.run, h.probe, extra(h.run));
    const ref = await referenceRun(ctx, scenario, c, perClient, cfg.duration);
    addRefRatio(http, ref, `reference gateway ${scenario}`);
    all.push({ http, ref });
    if (!ref) break;
  }
  const median = medianPair(all);
  if (all.length > 1) {
    median.http.ratio_ref_pairs = all.map((x) => ({ http: x.http.rps, reference: x.ref.rps, ratio: x.http.ratio_ref }));
  }
  return median;
}

/** ' (median of 3 pairs: 0.55, 0.61, 0.63)', or '' for one pair. */
export const pairsText = (http) =>
  http.ratio_ref_pairs ? ` (median of ${http.ratio_ref_pairs.length} pairs: ${http.ratio_ref_pairs.map((p) => p.ratio).join(', ')})` : '';

/**
 * The pair whose `by` is the median (the lower middle one for an even count); by default the
 * kslate row's ratio to the reference.
 */
export function medianPair(all, by = (pair) => pair.http.ratio_ref ?? 0) {
  const sorted = [...all].sort((a, b) => by(a) - by(b));
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

// ---- put ----------------------------------------------------------------------------------

/** Per-connection put requests: a random record of its own, with the version it knows. */
function putClient(ctx, i, connections) {
  const { versions, cfg } = ctx;
  const st = { idx: 0, n: 0 };
  return [
    {
      method: 'PUT',
      headers: JSON_HEADERS(i, cfg.identities),
      setupRequest(req) {
        const idx = ownedIndex(i, connections, cfg.sizes.put);
        st.idx = idx;
        return {
          ...req,
          path: `/v1/records/${CLASS}/r-${idx}/fields/f1`,
          body: JSON.stringify({ value: { n: ++st.n, c: i }, expected_version: versions[idx] }),
        };
      },
      onResponse(status, body) {
        if (status === 200 || status === 201) versions[st.idx]++;
        else if (status === 409) resync(versions, st.idx, body);
      },
    },
  ];
}

function resync(versions, idx, body) {
  try {
    const b = JSON.parse(body);
    if (Number.isInteger(b.current_version)) versions[idx] = b.current_version;
  } catch {
    /* leave it */
  }
}

export async function putScenario(ctx) {
  const { cfg, say } = ctx;
  const rows = [];
  const top = cfg.levels[cfg.levels.length - 1];
  for (const c of cfg.levels) {
    const { http, ref } = await pairedRuns(ctx, 'put', c, (i) => putClient(ctx, i, c), c === top ? cfg.pairs : 1, (run) => ({ stale: staleOf(run) }));
    await checkpoint(ctx.dbUrl);
    const counters = new Array(c).fill(0);
    const r = await rawRun({
      url: ctx.dbUrl,
      clients: c,
      warmup: cfg.warmup,
      duration: cfg.duration,
      probe: new Probe({ ...ctx.probeEnv, sampler: null, gcEvents: null }),
      op: (conn, i) =>
        rawPut(conn, ownedIndex(i, c, cfg.sizes.put), ctx.versions, `apikey:bench-${i % cfg.identities}`, {
          n: ++counters[i],
          c: i,
        }),
    });
    const raw = row('put', 'raw', c, r, r.probe, { stale: r.other });
    http.ratio = round(http.rps / raw.rps, 2);
    http.ratio_of = 'raw SQL put';
    rows.push(http, ...(ref ? [ref] : []), raw);
    say(
      `  put@${c}: http ${http.rps} req/s (p50 ${http.p50} ms, p99 ${http.p99} ms, STALE ${http.stale}), ` +
        `${ref ? `reference ${ref.rps} req/s (p50 ${ref.p50} ms, STALE ${ref.stale}), ` : ''}raw ${raw.rps} tx/s (STALE ${raw.stale}) ` +
        `-> ${http.ratio} of raw${ref ? `, ${http.ratio_ref} of reference${pairsText(http)}` : ''}`,
    );
  }
  // kslate, the reference and raw SQL wrote the same records in turn: every record's f1 must
  // stand at the version its applied history rows lead to (1, 2, ... each once). Nothing is in
  // flight: the raw run, last at each level, awaits its transactions.
  const check = await putHistoryCheck(ctx);
  const last = rows.filter((r) => r.transport === 'http').at(-1);
  if (last) last.history_check = check;
  say(`  put: ${check.records} records, ${check.applied} applied history rows; field version = applied versions 1..v: ${check.ok ? 'yes' : `NO on ${check.bad} records (${check.examples.join(', ')})`}`);
  return rows;
}

/** Do the f1 fields of bench/r-* agree with their applied history rows (all three writers)? */
async function putHistoryCheck(ctx) {
  const { rows } = await withClient(ctx.dbUrl, (c) =>
    c.query(
      `select r.rid, f.version, h.n, h.d, h.m
       from records r join fields f on f.record_id = r.id and f.name = 'f1'
       cross join lateral (select count(*)::int as n, count(distinct version)::int as d, max(version)::int as m
                           from history h where h.class = r.class and h.rid = r.rid and h.field = 'f1' and h.outcome = 'applied') h
       where r.class = $1 and r.rid like 'r-%'`,
      [CLASS],
    ),
  );
  const bad = rows.filter((x) => !(x.version === x.n && x.n === x.d && x.d === x.m));
  return {
    ok: bad.length === 0,
    records: rows.length,
    applied: rows.reduce((a, x) => a + x.n, 0),
    bad: bad.length,
    examples: bad.slice(0, 5).map((x) => `${x.rid}: field v${x.version}, ${x.n} applied rows, ${x.d} distinct, max v${x.m}`),
  };
}

/**
 * HTTP put at the top concurrency again, right before MCP and gRPC, so their ratio compares
 * runs minutes apart at most (other load on a shared machine drifts).
 */
export async function putReference(ctx) {
  const { cfg, say } = ctx;
  const c = cfg.levels[cfg.levels.length - 1];
  await checkpoint(ctx.dbUrl);
  const h = await cannonMeasured(ctx, { connections: c, perClient: (i) => putClient(ctx, i, c), warmup: cfg.warmup, duration: cfg.duration });
  const r = row('put (HTTP reference for MCP/gRPC)', 'http', c, h.run, h.probe);
  say(`  put@${c} over HTTP again: ${r.rps} req/s (p50 ${r.p50} ms, p99 ${r.p99} ms)`);
  return [r];
}

/**
 * p99 at half of peak: an open-loop run at 50% of the best HTTP put throughput measured,
 * on as many keep-alive sockets as the top concurrency level; latency counts from when each
 * request was due. Then the same offered rate straight to PostgreSQL. Both windows start
 * right after a checkpoint, and the two run as `cfg.pairs` adjacent pairs: the tail is the
 * database's WAL flush after a checkpoint (docs/performance.md), a burst that lands in one
 * window and not the next, so one window moved the verdict between 9.6 and 37 ms on one
 * build. The pair with the median gateway p99 is shown; every pair is listed.
 */
export async function halfPeakScenario(ctx, peakRps) {
  const { cfg } = ctx;
  const rate = Math.max(1, Math.round(peakRps / 2));
  const all = [];
  for (let p = 0; p < cfg.pairs; p++) {
    const http = await halfPeakGateway(ctx, rate, peakRps);
    const raw = await halfPeakRaw(ctx, rate, peakRps);
    all.push({ http, raw });
  }
  const median = medianPair(all, (pair) => pair.http.p99);
  if (all.length > 1) {
    median.http.p99_pairs = all.map((x) => ({ http: x.http.p99, raw: x.raw.p99 }));
    ctx.say(`  median of ${all.length} pairs: gateway p99 ${median.http.p99} ms, raw SQL ${median.raw.p99} ms`);
  }
  return [median.http, median.raw];
}

/** ' (median of 3 pairs, gateway / raw SQL: 9.1 / 6.2, …)', or '' for one pair. */
export const p99PairsText = (http) =>
  http?.p99_pairs ? ` (median of ${http.p99_pairs.length} pairs, gateway / raw SQL: ${http.p99_pairs.map((p) => `${p.http} / ${p.raw}`).join(', ')})` : '';

async function halfPeakGateway(ctx, rate, peakRps) {
  const { cfg, versions, say } = ctx;
  const sockets = cfg.levels[cfg.levels.length - 1];
  const u = new URL(ctx.url);
  const busy = new Set();
  let n = 0;
  const next = () => {
    let idx = -1;
    for (let tries = 0; tries < 20; tries++) {
      const cand = randInt(cfg.sizes.put);
      if (!busy.has(cand)) {
        idx = cand;
        break;
      }
    }
    if (idx < 0) return null;
    busy.add(idx);
    const i = n++;
    const body = JSON.stringify({ value: { n: i, c: 'open-loop' }, expected_version: versions[idx] });
    return {
      method: 'PUT',
      path: `/v1/records/${CLASS}/r-${idx}/fields/f1`,
      headers: { ...JSON_HEADERS(i, cfg.identities), 'content-length': Buffer.byteLength(body) },
      body,
      done(status, text) {
        busy.delete(idx);
        if (status === 200 || status === 201) versions[idx]++;
        else if (status === 409) resync(versions, idx, text);
      },
    };
  };
  const agent = keepAliveAgent(sockets);
  const opts = { host: u.hostname, port: Number(u.port), rate, agent, next };
  await checkpoint(ctx.dbUrl);
  await openLoop({ ...opts, duration: Math.max(cfg.warmup, 0.5) });
  const probe = new Probe(ctx.probeEnv);
  probe.start();
  const run = await openLoop({ ...opts, duration: cfg.duration });
  const p = probe.stop();
  agent.destroy();
  // What happened around each burst: the gateway's GC pauses (with --trace-gc) and the load
  // generator's own stalls, from the burst's first due request to its last one's answer.
  const gcEvents = ctx.probeEnv.gcEvents;
  for (const c of run.slow_clusters) {
    const from = run.started + c.at_s * 1000 - 100;
    const to = run.started + c.until_s * 1000 + c.max_ms + 100;
    if (gcEvents) c.gc = gcEvents.filter((g) => g.at >= from && g.at <= to && g.ms >= 2).map((g) => `${g.kind} ${Math.round(g.ms)} ms`);
    c.loadgen_stalls = run.loadgen_lags.filter((l) => l.at >= from && l.at <= to).map((l) => `${l.ms} ms`);
  }
  const r = row('put p99 at 50% of peak', 'http open loop', sockets, run, p, {
    target_rate: rate,
    peak_rps: peakRps,
    slow_clusters: run.slow_clusters,
  });
  say(`  put at ${rate} req/s (50% of ${peakRps}): achieved ${r.rps}, p50 ${r.p50} ms, p99 ${r.p99} ms`);
  if (run.slow_clusters.length > 0) {
    const around = (c) =>
      [c.gc?.length ? `GC ${c.gc.join(', ')}` : c.gc ? 'no GC pause' : '', c.loadgen_stalls.length ? `load generator stalled ${c.loadgen_stalls.join(', ')}` : '']
        .filter(Boolean)
        .join('; ');
    say(
      `    requests over 25 ms came in bursts: ${run.slow_clusters
        .map((c) => `${c.n} at ${c.at_s} s (worst ${c.max_ms} ms${around(c) ? `; ${around(c)}` : ''})`)
        .join(', ')}`,
    );
  }
  return r;
}

/** The same offered rate straight to PostgreSQL: how much of the tail is the database's. */
async function halfPeakRaw(ctx, rate, peakRps) {
  const { cfg, versions, say } = ctx;
  const sockets = cfg.levels[cfg.levels.length - 1];
  await checkpoint(ctx.dbUrl);
  let m = 0;
  const rawBusy = new Set();
  const raw = await rawOpenLoop({
    url: ctx.dbUrl,
    clients: sockets,
    warmup: cfg.warmup,
    duration: cfg.duration,
    rate,
    probe: new Probe({ ...ctx.probeEnv, sampler: null, gcEvents: null }),
    op: async (conn) => {
      let idx = randInt(cfg.sizes.put);
      for (let tries = 0; rawBusy.has(idx) && tries < 20; tries++) idx = randInt(cfg.sizes.put);
      if (rawBusy.has(idx)) return false;
      rawBusy.add(idx);
      try {
        return await rawPut(conn, idx, versions, 'apikey:bench-0', { n: ++m, c: 'open-loop' });
      } finally {
        rawBusy.delete(idx);
      }
    },
  });
  const rr = row('put p99 at 50% of peak', 'raw open loop', sockets, raw, raw.probe, { target_rate: rate, peak_rps: peakRps });
  say(`  raw SQL put at ${rate} tx/s: achieved ${rr.rps}, p50 ${rr.p50} ms, p99 ${rr.p99} ms`);
  return rr;
}

// ---- get ----------------------------------------------------------------------------------

/** Per-connection get requests: a random seeded record, every field. */
function getClient(ctx, i) {
  const { cfg } = ctx;
  return [
    {
      method: 'GET',
      headers: { authorization: authOf(i % cfg.identities) },
      setupRequest: (req) => ({ ...req, path: `/v1/records/${CLASS}/r-${randInt(cfg.sizes.put)}` }),
    },
  ];
}

/** Each bench record read once with the gateway's get statement, on 8 connections. */
async function warmRecords(url, records, names) {
  const conns = await connectAll(url, 8);
  let next = 0;
  try {
    await Promise.all(conns.map(async (c) => {
      while (next < records) await rawGet(c, `r-${next++}`, names);
    }));
  } finally {
    await Promise.all(conns.map((c) => c.end().catch(() => undefined)));
  }
}

export async function getScenario(ctx) {
  const { cfg, say } = ctx;
  const rows = [];
  const names = [...FIELDS, 'job']; // every field the role may read, as the gateway asks for them
  // Read every record once first, untimed: whichever runs first would otherwise pay for
  // bringing the put scenario's records back into the caches (kslate runs first at every
  // level; at 100,000 records its get@1 ran on a cold cache).
  const t0 = performance.now();
  await warmRecords(ctx.dbUrl, cfg.sizes.put, names);
  say(`  every record read once before the runs (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  const top = cfg.levels[cfg.levels.length - 1];
  for (const c of cfg.levels) {
    const { http, ref } = await pairedRuns(ctx, 'get', c, (i) => getClient(ctx, i), c === top ? cfg.pairs : 1, () => ({}));
    if (ref) await checkpoint(ctx.dbUrl);
    const r = await rawRun({
      url: ctx.dbUrl,
      clients: c,
      warmup: cfg.warmup,
      duration: cfg.duration,
      probe: new Probe({ ...ctx.probeEnv, sampler: null, gcEvents: null }),
      op: async (conn) => (await rawGet(conn, `r-${randInt(cfg.sizes.put)}`, names)) === 8,
    });
    const raw = row('get', 'raw', c, r, r.probe);
    http.ratio = round(http.rps / raw.rps, 2);
    http.ratio_of = 'raw SQL get';
    rows.push(http, ...(ref ? [ref] : []), raw);
    say(
      `  get@${c}: http ${http.rps} req/s (p50 ${http.p50} ms, p99 ${http.p99} ms), ` +
        `${ref ? `reference ${ref.rps} req/s (p50 ${ref.p50} ms), ` : ''}raw ${raw.rps} reads/s -> ${http.ratio} of raw` +
        `${ref ? `, ${http.ratio_ref} of reference${pairsText(http)}` : ''}`,
    );
  }
  return rows;
}

// ---- hot: read-then-put on 10 records, and the no-lost-update proof -----------------------

export async function hotScenario(ctx) {
  const { cfg, say } = ctx;
  const c = cfg.levels[cfg.levels.length - 1];
  const acks = []; // [record index, version] of every 2xx put any agent saw, warm-up included
  const makeRun = () => {
    const st = { applied: 0, stale: 0, other: 0, lat: new Latencies() };
    const perClient = (i) => {
      const headers = JSON_HEADERS(i, cfg.identities);
      let n = 0;
      return [
        {
          method: 'GET',
          headers: { authorization: headers.authorization },
          setupRequest(req, context) {
            context.k = randInt(HOT);
            context.t0 = performance.now();
            return { ...req, path: `/v1/records/${CLASS}/hot-${context.k}?fields=f1` };
          },
          onResponse(status, body, context) {
            context.v = status === 200 ? (JSON.parse(body).fields.f1?.version ?? 0) : null;
          },
        },
        {
          method: 'PUT',
          headers,
          setupRequest(req, context) {
            if (context.v === null || context.v === undefined) return null;
            return {
              ...req,
              path: `/v1/records/${CLASS}/hot-${context.k}/fields/f1`,
              body: JSON.stringify({ value: { agent: i, n: ++n, read: context.v }, expected_version: context.v }),
            };
          },
          onResponse(status, body, context) {
            st.lat.push(performance.now() - context.t0);
            if (status === 200 || status === 201) {
              st.applied++;
              acks.push([context.k, JSON.parse(body).version]);
            } else if (status === 409) st.stale++;
            else st.other++;
          },
        },
      ];
    };
    return { st, perClient };
  };
  await checkpoint(ctx.dbUrl);
  if (cfg.warmup > 0) {
    const w = makeRun();
    await cannon({ url: ctx.url, connections: c, duration: cfg.warmup, perClient: w.perClient });
  }
  const m = makeRun();
  const probe = new Probe(ctx.probeEnv);
  probe.start();
  const run = await cannon({ url: ctx.url, connections: c, duration: cfg.duration, perClient: m.perClient });
  const p = probe.stop();
  const cycles = m.st.applied + m.st.stale + m.st.other;
  const proof = await replayHot(ctx, acks, c);
  const r = row(
    'hot',
    'http',
    c,
    { ...run, ok: cycles, responses: cycles, latency: m.st.lat.summary() },
    p,
    {
      unit: 'read-then-put cycles/s (latency: read + put)',
      applied: m.st.applied,
      stale: m.st.stale,
      other: m.st.other,
      proof,
    },
  );
  say(
    `  hot@${c}: ${r.rps} cycles/s, applied ${m.st.applied}, STALE ${m.st.stale}; replay: ${proof.ok ? 'no lost update' : 'VIOLATIONS: ' + proof.violations.slice(0, 5).join('; ')}`,
  );
  return [r];
}

/** Read a record's whole f1 history through the gateway (newest first, paged). */
async function historyOf(ctx, rid) {
  const rows = [];
  let before = null;
  for (;;) {
    const q = new URLSearchParams({ field: 'f1', limit: '10000' });
    if (before) q.set('before', before);
    const res = await fetch(`${ctx.url}/v1/records/${CLASS}/${rid}/history?${q}`, { headers: { authorization: authOf(0) } });
    if (res.status !== 200) throw new Error(`history of ${rid}: HTTP ${res.status} ${await res.text()}`);
    const b = await res.json();
    rows.push(...b.history);
    if (!b.next_before) break;
    before = b.next_before;
  }
  return rows;
}

/**
 * The proof: replay each hot record's history oldest first. Every applied put must carry
 * version = previous applied version + 1 and expected_version = version - 1 (it was based on
 * the latest value), no version may be applied twice, the field must end at the last applied
 * version, and every 2xx an agent received must be one distinct applied row.
 */
async function replayHot(ctx, acks, connections) {
  const violations = [];
  let appliedRows = 0;
  let staleRows = 0;
  let unacked = 0;
  // Puts still in flight when the load generator stopped finish on the gateway a little later.
  await new Promise((r) => setTimeout(r, 1000));
  for (let k = 0; k < HOT; k++) {
    const rid = `hot-${k}`;
    let hist;
    let final;
    for (let attempt = 0; attempt < 5; attempt++) {
      // The field first, then its history: the history must end at the field's version.
      const res = await fetch(`${ctx.url}/v1/records/${CLASS}/${rid}?fields=f1`, { headers: { authorization: authOf(0) } });
      final = (await res.json()).fields.f1.version;
      hist = (await historyOf(ctx, rid)).filter((h) => h.op === 'put').sort((a, b) => a.seq - b.seq);
      const last = hist.filter((h) => h.outcome === 'applied').at(-1);
      if (last && last.version === final) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const applied = hist.filter((h) => h.outcome === 'applied');
    staleRows += hist.filter((h) => h.outcome === 'stale').length;
    appliedRows += applied.length;
    let prev = 0; // the seeded creation (version 1) is the first applied row
    const seen = new Set();
    for (const h of applied) {
      if (seen.has(h.version)) violations.push(`${rid}: version ${h.version} applied twice`);
      seen.add(h.version);
      if (h.version !== prev + 1) violations.push(`${rid}: version ${h.version} follows ${prev}`);
      if (h.expected_version !== h.version - 1) {
        violations.push(`${rid}: version ${h.version} applied on expected_version ${h.expected_version}`);
      }
      prev = h.version;
    }
    if (final !== prev) violations.push(`${rid}: field at version ${final}, last applied ${prev}`);
    const mine = acks.filter(([kk]) => kk === k).map(([, v]) => v);
    const ackSet = new Set(mine);
    if (ackSet.size !== mine.length) violations.push(`${rid}: one version acknowledged to two writers`);
    for (const v of ackSet) if (!seen.has(v)) violations.push(`${rid}: acknowledged version ${v} not in history`);
    unacked += applied.filter((h) => h.author !== 'apikey:seed').length - ackSet.size;
  }
  // A put still in flight when the load generator stopped is applied but never acknowledged.
  if (unacked > connections * 2) violations.push(`${unacked} applied puts were never acknowledged`);
  return {
    ok: violations.length === 0,
    records: HOT,
    applied_rows: appliedRows,
    stale_rows: staleRows,
    acknowledged: acks.length,
    applied_unacknowledged: unacked,
    violations: violations.slice(0, 50),
  };
}

// ---- claim churn ------------------------------------------------------------------------------

export async function claimScenario(ctx) {
  const { cfg, say } = ctx;
  const c = cfg.levels[cfg.levels.length - 1];
  const makeCounts = () => ({ claimed: 0, held: 0, renewed: 0, released: 0, other: 0 });
  let counts = makeCounts();
  const perClient = (i) => {
    const headers = JSON_HEADERS(i, cfg.identities);
    const path = (context) => `/v1/records/${CLASS}/task-${context.t}/fields/job/claim`;
    return [
      {
        method: 'PUT',
        headers,
        setupRequest(req, context) {
          context.t = randInt(cfg.sizes.tasks);
          return { ...req, path: path(context), body: '{"lease_seconds":30}' };
        },
        onResponse(status, _b, context) {
          context.ok = status === 200 || status === 201;
          if (context.ok) counts.claimed++;
          else if (status === 409) counts.held++;
          else counts.other++;
        },
      },
      {
        method: 'PUT',
        headers,
        setupRequest(req, context) {
          if (!context.ok) return null;
          return { ...req, path: path(context), body: '{"lease_seconds":30,"renew":true}' };
        },
        onResponse(status, _b, context) {
          context.ok = status === 200;
          if (context.ok) counts.renewed++;
          else counts.other++;
        },
      },
      {
        method: 'PUT',
        headers,
        setupRequest(req, context) {
          if (!context.ok) return null;
          return { ...req, path: path(context), body: '{"lease_seconds":0}' };
        },
        onResponse(status) {
          if (status === 200) counts.released++;
          else counts.other++;
        },
      },
    ];
  };
  await checkpoint(ctx.dbUrl);
  if (cfg.warmup > 0) await cannon({ url: ctx.url, connections: c, duration: cfg.warmup, perClient });
  counts = makeCounts();
  const probe = new Probe(ctx.probeEnv);
  probe.start();
  const run = await cannon({ url: ctx.url, connections: c, duration: cfg.duration, perClient });
  const p = probe.stop();
  const r = row('claim', 'http', c, run, p, { unit: 'claim/renew/release ops/s (HELD included)', ...counts }, true);
  say(`  claim@${c}: ${r.rps} ops/s, claimed ${counts.claimed}, HELD ${counts.held}, renewed ${counts.renewed}, released ${counts.released}`);
  return [r];
}

// ---- query and history: latency at 1 client, throughput at more -------------------------------

/** Where two answers first differ: a top-level key, or the first differing element of a list. */
function firstDifference(a, b) {
  for (const k of new Set([...Object.keys(a ?? {}), ...Object.keys(b ?? {})])) {
    if (isDeepStrictEqual(a?.[k], b?.[k])) continue;
    if (Array.isArray(a?.[k]) && Array.isArray(b?.[k])) {
      const i = a[k].findIndex((x, j) => !isDeepStrictEqual(x, b[k][j]));
      return `${k}[${i}]: gateway ${JSON.stringify(a[k][i])}, reference ${JSON.stringify(b[k][i])}`;
    }
    return `${k}: gateway ${JSON.stringify(a?.[k])?.slice(0, 200)}, reference ${JSON.stringify(b?.[k])?.slice(0, 200)}`;
  }
  return 'none';
}

/**
 * `refs`: reference gateway variants run at each level after kslate's, as [transport label,
 * path function]; each row gets the kslate row's ratio to it.
 */
async function readScenario(ctx, name, pathOf, check, refs = []) {
  const { cfg, say } = ctx;
  const res = await fetch(ctx.url + pathOf(), { headers: { authorization: authOf(0) } });
  const sanity = check(res.status, await res.json());
  const rows = [];
  const perClient = (p) => (i) => [
    { method: 'GET', headers: { authorization: authOf(i % cfg.identities) }, setupRequest: (req) => ({ ...req, path: p() }) },
  ];
  // The reference must answer the same job: the same rows, parsed (key order aside). The
  // gateway's page also carries a signed cursor to the next page (`next_before`) when more
  // rows remain, which the reference does not sign; it is left out of the comparison.
  const same = {};
  if (ctx.ref) {
    for (const [label, refPath] of refs) {
      const [mine, theirs] = await Promise.all(
        [ctx.url + pathOf(), ctx.ref.url + refPath()].map((u) => fetch(u, { headers: { authorization: authOf(0) } }).then((x) => x.json())),
      );
      delete mine.next_before;
      same[label] = isDeepStrictEqual(mine, theirs);
      say(`  ${label} answers the same ${name} page as the gateway: ${same[label] ? 'yes' : `NO (${firstDifference(mine, theirs)})`}`);
    }
  }
  for (const c of cfg.readLevels) {
    const h = await cannonMeasured(ctx, { connections: c, perClient: perClient(pathOf), warmup: cfg.warmup, duration: cfg.readDuration });
    const r = row(name, 'http', c, h.run, h.probe, { check: sanity });
    rows.push(r);
    say(`  ${name}@${c}: ${r.rps} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms (${sanity})`);
    if (!ctx.ref) continue;
    for (const [label, refPath] of refs) {
      const rr = await referenceRun(ctx, name, c, perClient(refPath), cfg.readDuration);
      rr.transport = label;
      rr.same_page = same[label];
      rows.push(rr);
      if (label === 'reference') addRefRatio(r, rr, `reference gateway ${name}`);
      say(`    ${label}@${c}: ${rr.rps} req/s, p50 ${rr.p50} ms, p99 ${rr.p99} ms`);
    }
  }
  return rows;
}

export function queryScenario(ctx) {
  return readScenario(
    ctx,
    'query',
    () => `/v1/records/${QCLASS}?team=team-${randInt(TEAMS)}&limit=100`,
    (status, b) => `HTTP ${status}, ${b.records?.length ?? 0} records per page of ${ctx.cfg.sizes.query}`,
  );
}

export function historyScenario(ctx) {
  return readScenario(
    ctx,
    'history',
    () => `/v1/records/${CLASS}/${HIST_RID}/history?limit=1000`,
    (status, b) => `HTTP ${status}, ${b.history?.length ?? 0} rows per page of ${ctx.cfg.sizes.history}`,
    [
      ['reference', () => `/v1/records/${CLASS}/${HIST_RID}/history?limit=1000`],
      ['reference pre-rendered', () => `/v1/records/${CLASS}/${HIST_RID}/history?limit=1000&rendered=1`],
    ],
  );
}
