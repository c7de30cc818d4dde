/**
 * Load generators: autocannon (closed loop, keep-alive connections = clients) for the HTTP
 * scenarios, an open-loop pacer on node:http keep-alive sockets for the fixed-rate run, and a
 * probe that measures the gateway's peak RSS and every party's CPU over a measured window.
 */
import http from 'node:http';
import autocannon from 'autocannon';
import { Latencies, machineCpu, postgresCpu, processCpu } from './util.mjs';

/**
 * Measures one window: gateway peak RSS (from the sampler), CPU cores used by the gateway,
 * PostgreSQL and this process (the load generator).
 */
export class Probe {
  constructor(env) {
    this.env = env;
  }
  start() {
    const e = this.env;
    e.sampler?.beginWindow();
    this.startedAt = new Date().toISOString();
    this.t0 = performance.now();
    this.gw0 = e.gatewayPid ? processCpu(e.gatewayPid) : null;
    this.pg0 = postgresCpu(e.postmasterPid);
    this.self0 = process.cpuUsage();
    this.m0 = machineCpu();
  }
  stop() {
    const e = this.env;
    const secs = (performance.now() - this.t0) / 1000;
    const gw1 = e.gatewayPid ? processCpu(e.gatewayPid) : null;
    const pg1 = postgresCpu(e.postmasterPid);
    const self = process.cpuUsage(this.self0);
    const m1 = machineCpu();
    const gcs = (e.gcEvents ?? []).filter((g) => g.at >= this.t0);
    const gc = e.gcEvents
      ? {
          collections: gcs.length,
          pause_total_ms: Math.round(gcs.reduce((a, g) => a + g.ms, 0)),
          pause_max_ms: Math.round(Math.max(0, ...gcs.map((g) => g.ms)) * 10) / 10,
          mark_compacts: gcs.filter((g) => g.kind !== 'Scavenge').length,
          // The V8 heap beside the RSS: the most committed after a collection, and the most
          // still used after a full one (what survives; the rest of RSS is garbage, code,
          // buffers outside the heap and the allocator's own).
          heap_committed_max_mb: Math.round(Math.max(0, ...gcs.map((g) => g.committedMb ?? 0))),
          heap_live_after_full_max_mb: Math.round(Math.max(0, ...gcs.filter((g) => g.kind !== 'Scavenge').map((g) => g.heapMb ?? 0))),
        }
      : null;
    const gateway = gw1 !== null && this.gw0 !== null ? (gw1 - this.gw0) / secs : 0;
    const postgres = (pg1 - this.pg0) / secs;
    const loadgen = (self.user + self.system) / 1e6 / secs;
    const machine = (m1.busy - this.m0.busy) / secs;
    const irq = (m1.irq - this.m0.irq) / secs;
    return {
      seconds: secs,
      startedAt: this.startedAt,
      endedAt: new Date().toISOString(),
      gc,
      peakRssMb: e.sampler ? e.sampler.endWindow() : null,
      cpu: {
        gateway: e.gatewayPid ? gateway : null,
        postgres,
        loadgen,
        // Every core busy on the machine; interrupt work (loopback networking is mostly
        // softirq, charged to no process); and the rest that was none of the three: other
        // processes sharing the machine, and steal.
        machine,
        irq,
        other: Math.max(0, machine - gateway - postgres - loadgen - irq),
        steal: (m1.steal - this.m0.steal) / secs,
      },
    };
  }
}

/**
 * Run autocannon for `duration` seconds with `connections` keep-alive connections. Each
 * connection gets its own request sequence from `perClient(i)` (autocannon `requests` with
 * setupRequest/onResponse), so per-connection state lives in that closure.
 * Latencies are taken from the `response` events (float ms, every status).
 */
export function cannon({ url, connections, duration, perClient, timeout = 10 }) {
  return new Promise((resolve, reject) => {
    const lat = new Latencies();
    const codes = {};
    let responses = 0;
    let ok = 0;
    let next = 0;
    const t0 = performance.now();
    const inst = autocannon(
      {
        url,
        connections,
        duration,
        timeout,
        setupClient(client) {
          client.setRequests(perClient(next++));
        },
      },
      (err, res) => {
        if (err) return reject(err);
        const secs = (performance.now() - t0) / 1000;
        resolve({
          seconds: secs,
          responses,
          ok,
          codes,
          errors: res.errors,
          timeouts: res.timeouts,
          resets: res.resets,
          latency: lat.summary(),
        });
      },
    );
    inst.on('response', (_client, status, _bytes, ms) => {
      responses++;
      if (status >= 200 && status < 300) ok++;
      codes[status] = (codes[status] ?? 0) + 1;
      lat.push(ms);
    });
  });
}

/**
 * Open loop: request k is due at start + k/rate whatever happened before, sent on up to
 * `sockets` keep-alive connections, and its latency counts from when it was due (so a
 * stall shows as latency instead of as fewer requests: no coordinated omission).
 * `next()` returns { method, path, headers, body, done(status, text) } or null (skip).
 * `agent` (node:http, keep-alive) is the caller's, so the warm-up's sockets stay open for
 * the measured run: otherwise its first requests would pay for opening connections.
 */
/** Requests over 25 ms grouped into bursts (due less than 250 ms apart): when, how many, worst. */
function clusters(slow) {
  slow.sort((a, b) => a[0] - b[0]);
  const out = [];
  for (const [at, ms] of slow) {
    const last = out[out.length - 1];
    if (last && at - last.last_s < 0.25) {
      last.n++;
      last.max_ms = Math.max(last.max_ms, Math.round(ms));
      last.last_s = at;
    } else out.push({ at_s: Math.round(at * 100) / 100, last_s: at, n: 1, max_ms: Math.round(ms) });
  }
  return out
    .map(({ last_s, ...c }) => ({ ...c, until_s: Math.round(last_s * 100) / 100 }))
    .sort((a, b) => b.n - a.n)
    .slice(0, 8);
}

export const keepAliveAgent = (sockets) => new http.Agent({ keepAlive: true, maxSockets: sockets });

export function openLoop({ host, port, rate, duration, agent, next }) {
  const lat = new Latencies();
  const slow = []; // [due s, latency ms] of requests over 25 ms, to tell one stall from many
  const codes = {};
  const total = Math.max(1, Math.floor(rate * duration));
  const interval = 1000 / rate;
  let sent = 0;
  let done = 0;
  let ok = 0;
  let errors = 0;
  let skipped = 0;
  return new Promise((resolve) => {
    const start = performance.now();
    // The load generator's own stalls (its GC, the scheduler) delay requests as much as the
    // gateway's: turns of its event loop later than 20 ms are kept, to be told apart.
    const lags = [];
    let tickAt = start;
    const lagTimer = setInterval(() => {
      const now = performance.now();
      if (now - tickAt > 20) lags.push({ at: now, ms: Math.round(now - tickAt) });
      tickAt = now;
    }, 5);
    const finish = () => {
      if (sent < total || done < sent) return;
      clearInterval(lagTimer);
      resolve({
        started: start,
        loadgen_lags: lags,
        seconds: (performance.now() - start) / 1000,
        responses: done - errors - skipped,
        ok,
        codes,
        errors,
        skipped,
        target_rate: rate,
        latency: lat.summary(),
        slow_clusters: clusters(slow),
      });
    };
    const fire = (due) => {
      const r = next();
      if (!r) {
        skipped++;
        done++;
        return;
      }
      const req = http.request({ agent, host, port, method: r.method, path: r.path, headers: r.headers }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const ms = performance.now() - due;
          lat.push(ms);
          if (ms > 25) slow.push([(due - start) / 1000, ms]);
          codes[res.statusCode] = (codes[res.statusCode] ?? 0) + 1;
          if (res.statusCode >= 200 && res.statusCode < 300) ok++;
          r.done(res.statusCode, Buffer.concat(chunks).toString());
          done++;
          finish();
        });
      });
      req.on('error', () => {
        errors++;
        done++;
        r.done(0, '');
        finish();
      });
      req.end(r.body);
    };
    const tick = () => {
      const now = performance.now();
      while (sent < total && start + sent * interval <= now) {
        fire(start + sent * interval);
        sent++;
      }
      if (sent < total) setTimeout(tick, Math.max(0, start + sent * interval - performance.now()));
      else finish();
    };
    tick();
  });
}
