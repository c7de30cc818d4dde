import http from 'node:http';
import { seed, withClient } from './lib/db.mjs';
import { startGateway, writeConfig, authOf } from './lib/gateway.mjs';
import { cannon } from './lib/load.mjs';
import { randInt, ownedIndex, sleep } from './lib/util.mjs';
const url = 'postgres://postgres:postgres@127.0.0.1:54391/kslate';
const N = 20000;
await seed(url, { put: N, query: 0, history: 10, tasks: 10 }, () => {});
const conf = writeConfig(64);
const gw = await startGateway({ root: '/work/main', databaseUrl: url, classesDir: conf.classesDir, keysFile: conf.keysFile, traceGc: true });
const versions = new Int32Array(N).fill(1);
const perClient = (i) => { const st = { idx: 0 }; return [{ method: 'PUT', headers: { authorization: authOf(i), 'content-type': 'application/json' },
  setupRequest(req) { const idx = ownedIndex(i, 64, N); st.idx = idx; return { ...req, path: `/v1/records/bench/r-${idx}/fields/f1`, body: JSON.stringify({ value: { n: 1 }, expected_version: versions[idx] }) }; },
  onResponse(s, b) { if (s < 300) versions[st.idx]++; else if (s === 409) versions[st.idx] = JSON.parse(b).current_version; } }]; };
await cannon({ url: gw.url, connections: 64, duration: 5, perClient });
const agent = new http.Agent({ keepAlive: true, maxSockets: Number(process.argv[2] ?? 64) });
const rate = 320, dur = 15, total = rate * dur, interval = 1000 / rate;
const recs = []; const busy = new Set(); let sent = 0, done = 0; const start = performance.now();
const gcStart = gw.gcEvents.length;
await new Promise((resolve) => {
  const fire = (due) => { let idx; do { idx = randInt(N); } while (busy.has(idx)); busy.add(idx);
    const body = JSON.stringify({ value: { n: 2 }, expected_version: versions[idx] });
    const t0 = performance.now();
    const req = http.request({ agent, host: '127.0.0.1', port: gw.port, method: 'PUT', path: `/v1/records/bench/r-${idx}/fields/f1`, headers: { authorization: authOf(0), 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.resume(); res.on('end', () => { const now = performance.now(); recs.push({ due: due - start, lat: now - due, svc: now - t0, reused: req.reusedSocket }); busy.delete(idx); if (res.statusCode < 300) versions[idx]++; if (++done === total) resolve(); }); });
    req.end(body); };
  const tick = () => { const now = performance.now(); while (sent < total && start + sent * interval <= now) { fire(start + sent * interval); sent++; } if (sent < total) setTimeout(tick, Math.max(0, start + sent * interval - performance.now())); };
  tick();
});
recs.sort((a, b) => b.lat - a.lat);
console.log('p99', recs[Math.floor(total / 100)].lat.toFixed(1), 'sockets', Object.values(agent.sockets).flat().length + Object.values(agent.freeSockets).flat().length);
console.log('slowest 1% (due s, latency, service time from send, reused socket):');
for (const r of recs.slice(0, 48)) console.log((r.due / 1000).toFixed(3), r.lat.toFixed(1), r.svc.toFixed(1), r.reused);
console.log('new (not reused) sockets:', recs.filter((r) => !r.reused).length);
const gcs = gw.gcEvents.slice(gcStart).filter((g) => g.ms > 5);
console.log('gc > 5ms at', gcs.map((g) => ((g.at - start) / 1000).toFixed(2) + 's:' + g.ms).join(' '));
await gw.stop(); conf.cleanup();
