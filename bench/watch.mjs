#!/usr/bin/env node
/**
 * Watch fan-out (issue 16 item 7): `npm run bench:watch` (about two minutes) or
 * `node bench/watch.mjs --subscribers 1000 --writers 64 --rate 5 --seconds 60` (the defaults).
 *
 * Starts PostgreSQL (embedded, or KSLATE_BENCH_DATABASE_URL) and `kslate serve` as the main
 * bench does, opens `--subscribers` Server-Sent Events streams on ONE class
 * (`GET /v1/classes/bench/watch`, a per-class watch: every subscriber receives every
 * change, the widest fan-out), each on its own TCP connection, waits until every stream has
 * sent its `open` event, then lets `--writers` clients put (each on its own record, with
 * compare-and-set) at `--rate` writes per second in total for `--seconds`.
 *
 * For every (subscriber, change) it records the time from the write's acknowledgement (the
 * PUT's response received by its writer) to the change's SSE event received by that
 * subscriber, all in this process on one clock (performance.now()). An event that arrives
 * before its write's response does counts as 0 ms (the gateway's poller can read a change
 * before the writer reads its answer). Prints p50/p90/p99/max, the events received against
 * those expected, and the gateway's RSS: before the streams, with every stream open, and
 * its peak during the writes. Writes the result as JSON under bench/results/.
 *
 * The driver (1,000 parsers and 64 writers) shares the machine with the gateway and
 * PostgreSQL, so on a small machine the figures include its own queueing; `--rate` keeps
 * the event volume (rate x subscribers events per second) within what one process parses.
 *
 * `--profile DIR`: the gateway writes a V8 CPU profile there (summarise it with
 * bench/lib/profile.mjs).
 *
 * `--smoke`: 20 subscribers, 4 writers, 3 seconds: the harness still runs (test/bench/).
 */
import http from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CLASS, migrateDb, startDatabase } from './lib/db.mjs';
import { authOf, startGateway, writeConfig } from './lib/gateway.mjs';
import { Latencies, machineCpu, processCpu, round, sleep } from './lib/util.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const say = (m) => process.stdout.write(m + '\n');

async function main() {
  const { values } = parseArgs({
    options: {
      subscribers: { type: 'string' },
      writers: { type: 'string' },
      rate: { type: 'string' },
      seconds: { type: 'string' },
      'poll-interval': { type: 'string' },
      smoke: { type: 'boolean' },
      profile: { type: 'string' },
      out: { type: 'string' },
    },
    strict: true,
  });
  const smoke = values.smoke === true;
  const subscribers = Number(values.subscribers ?? (smoke ? 20 : 1000));
  const writers = Number(values.writers ?? (smoke ? 4 : 64));
  const rate = Number(values.rate ?? (smoke ? 20 : 5));
  const seconds = Number(values.seconds ?? (smoke ? 3 : 60));
  const pollInterval = values['poll-interval'] ?? '100ms';
  const cleanups = [];
  try {
    const db = await startDatabase({ dist: DIST, say, pgLog: () => undefined });
    cleanups.push(db.stop);
    await migrateDb(db.url, DIST);
    const conf = writeConfig(writers);
    cleanups.push(async () => conf.cleanup());
    const gw = await startGateway({
      root: ROOT,
      databaseUrl: db.url,
      classesDir: conf.classesDir,
      keysFile: conf.keysFile,
      grpc: false,
      ...(values.profile ? { profileDir: values.profile } : {}),
      extraArgs: ['--watch-max-streams', String(subscribers + 16), '--watch-max-streams-per-identity', String(subscribers + 16), '--watch-poll-interval', pollInterval],
    });
    cleanups.push(() => gw.stop());
    const { hostname, port } = new URL(gw.url);
    gw.sampler.sample();
    const rssBefore = gw.sampler.last;
    say(`gateway pid ${gw.pid}; ${subscribers} SSE subscribers on class ${CLASS}, ${writers} writers at ${rate} writes/s for ${seconds} s (poll ${pollInterval})`);

    // Write acknowledgements, by `record:record_version`; events that came first wait here.
    const acks = new Map();
    const early = [];
    const lat = new Latencies();
    let received = 0;
    let ended = 0;
    let stopping = false;

    // ---- subscribers ------------------------------------------------------------------
    const subs = [];
    const openOne = (i) =>
      new Promise((resolveOpen, rejectOpen) => {
        const req = http.get(
          { host: hostname, port, path: `/v1/classes/${CLASS}/watch`, agent: false, headers: { authorization: authOf(i % writers), accept: 'text/event-stream' } },
          (res) => {
            if (res.statusCode !== 200) {
              rejectOpen(new Error(`subscriber ${i}: HTTP ${res.statusCode}`));
              res.resume();
              return;
            }
            res.setEncoding('utf8');
            let buf = '';
            res.on('data', (chunk) => {
              buf += chunk;
              let at;
              while ((at = buf.indexOf('\n\n')) >= 0) {
                const block = buf.slice(0, at);
                buf = buf.slice(at + 2);
                if (block.startsWith('event: open')) resolveOpen();
                else if (block.startsWith('event: change')) {
                  const now = performance.now();
                  // The record and its record_version name the write; no full JSON parse per event.
                  const m = /"record":"([^"]+)".*?"record_version":(\d+)/.exec(block);
                  if (!m) continue;
                  received++;
                  const key = `${m[1]}:${m[2]}`;
                  const ack = acks.get(key);
                  if (ack === undefined) early.push(key, now);
                  else lat.push(Math.max(0, now - ack));
                } else if (block.startsWith('event: end') && !stopping) {
                  ended++;
                  if (ended <= 5) say(`subscriber ${i} ended by the gateway: ${block.replace(/\n/g, ' ')}`);
                }
              }
            });
            res.on('error', () => undefined);
          },
        );
        req.on('error', rejectOpen);
        subs.push(req);
      });
    const t0 = performance.now();
    // Open in batches, so connection setup does not look like a slow client.
    for (let i = 0; i < subscribers; i += 100) {
      await Promise.all(Array.from({ length: Math.min(100, subscribers - i) }, (_, k) => openOne(i + k)));
    }
    const openMs = performance.now() - t0;
    await sleep(500);
    gw.sampler.sample();
    const rssOpen = gw.sampler.last;
    say(`  ${subscribers} streams open in ${Math.round(openMs)} ms; gateway RSS ${Math.round(rssBefore)} MB before, ${Math.round(rssOpen)} MB with every stream open`);

    // ---- writers ----------------------------------------------------------------------
    // A connection per write: at this rate it costs nothing, and no keep-alive race with
    // the gateway's idle limit can fail a write.
    const agent = false;
    const put = (i, version) =>
      new Promise((resolvePut, rejectPut) => {
        const body = JSON.stringify({ value: { n: version, w: i }, expected_version: version });
        const req = http.request(
          {
            host: hostname,
            port,
            method: 'PUT',
            path: `/v1/records/${CLASS}/w-${i}/fields/f1`,
            agent,
            headers: { authorization: authOf(i), 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          },
          (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (d) => (text += d));
            res.on('end', () => {
              const at = performance.now();
              if (res.statusCode !== 200 && res.statusCode !== 201) return rejectPut(new Error(`writer ${i}: HTTP ${res.statusCode} ${text}`));
              const b = JSON.parse(text);
              acks.set(`${b.record}:${b.record_version}`, at);
              resolvePut();
            });
          },
        );
        req.on('error', rejectPut);
        req.end(body);
      });
    let writes = 0;
    const deadline = performance.now() + seconds * 1000;
    const every = (writers / rate) * 1000; // each writer's period
    gw.sampler.beginWindow();
    const cpu0 = { gw: processCpu(gw.pid) ?? 0, driver: process.cpuUsage(), machine: machineCpu()?.busy ?? 0, at: performance.now() };
    await Promise.all(
      Array.from({ length: writers }, async (_, i) => {
        // Spread the writers over one period so the rate is even.
        await sleep((every * i) / writers);
        for (let v = 0; performance.now() < deadline; v++) {
          const started = performance.now();
          await put(i, v);
          writes++;
          const left = every - (performance.now() - started);
          if (left > 0) await sleep(left);
        }
      }),
    );
    // Let the last changes reach every subscriber.
    const expected = writes * subscribers;
    const settle = performance.now() + 10_000;
    while (received < expected && performance.now() < settle) await sleep(50);
    const rssPeak = gw.sampler.endWindow();
    const wall = (performance.now() - cpu0.at) / 1000;
    const d = process.cpuUsage(cpu0.driver);
    const cpu = {
      gateway: round(((processCpu(gw.pid) ?? 0) - cpu0.gw) / wall, 2),
      driver: round((d.user + d.system) / 1e6 / wall, 2),
      machine: round(((machineCpu()?.busy ?? 0) - cpu0.machine) / wall, 2),
    };
    for (let k = 0; k < early.length; k += 2) {
      const ack = acks.get(early[k]);
      if (ack !== undefined) lat.push(Math.max(0, early[k + 1] - ack));
    }
    // Whether the peak is held or was garbage: the RSS a few seconds later, streams still open.
    await sleep(5_000);
    gw.sampler.sample();
    const rssAfter = gw.sampler.last;
    stopping = true;
    for (const r of subs) r.destroy();

    const s = lat.summary();
    const result = {
      subscribers,
      writers,
      rate,
      seconds,
      poll_interval: pollInterval,
      writes,
      writes_per_s: round(writes / seconds, 1),
      events_expected: expected,
      events_received: received,
      latency_ms: { p50: round(s.p50, 1), p90: round(s.p90, 1), p99: round(s.p99, 1), max: round(s.max, 1), mean: round(s.mean, 1) },
      before_ack: early.length / 2,
      streams_ended_by_gateway: ended,
      rss_mb: { before: Math.round(rssBefore), streams_open: Math.round(rssOpen), peak_during_writes: Math.round(rssPeak), five_s_after: Math.round(rssAfter) },
      open_ms: Math.round(openMs),
      /** Cores busy during the writes (CPU seconds per second): the gateway, this driver, the whole machine. */
      cpu_cores: cpu,
    };
    say(`  ${writes} writes (${result.writes_per_s}/s), ${received} of ${expected} events received (${result.before_ack} before their write's response)`);
    say(`  write acknowledged -> event received: p50 ${result.latency_ms.p50} ms, p90 ${result.latency_ms.p90} ms, p99 ${result.latency_ms.p99} ms, max ${result.latency_ms.max} ms`);
    say(`  cores busy during the writes: gateway ${cpu.gateway}, driver ${cpu.driver}, whole machine ${cpu.machine}`);
    say(`  gateway RSS: ${result.rss_mb.before} MB before, ${result.rss_mb.streams_open} MB with ${subscribers} streams, peak ${result.rss_mb.peak_during_writes} MB during the writes, ${result.rss_mb.five_s_after} MB 5 s after`);
    const out = values.out ?? join(ROOT, 'bench', 'results');
    mkdirSync(out, { recursive: true });
    const file = join(out, `watch-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, JSON.stringify(result, null, 2));
    say(`written to ${file}`);
    return received === expected ? 0 : 1;
  } finally {
    while (cleanups.length) await cleanups.pop()().catch(() => undefined);
  }
}

main().then(
  (code) => process.exit(code),
  (e) => {
    say(`watch bench failed: ${e.stack ?? e}`);
    process.exit(1);
  },
);
