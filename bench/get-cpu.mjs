/**
 * Gateway CPU time per get (issue 38 item 3; docs/performance.md "Where a get's CPU goes"):
 * `node bench/get-cpu.mjs <repo root> <label> [gets per round] [clients]` starts `kslate serve`
 * from <root>/dist as the bench does (bench/lib/gateway.mjs) on the machine's PostgreSQL
 * (postgres://postgres@127.0.0.1:5432, database $BENCH_DB or kslate_get_cpu, created if
 * missing), writes 200 records of 8 fields, then runs three rounds of gets over keep-alive
 * HTTP and prints the gateway's CPU (utime + stime from /proc) per get for each. CPU per
 * request moves far less with a loaded machine than throughput does; compare builds by
 * alternating runs. GET_CPU_PROFILE=<dir> runs the gateway under --cpu-prof and prints its
 * hottest frames. GET_CPU_REFERENCE=1 then measures the bench's minimal reference gateway
 * (bench/lib/reference.mjs: node:http, pg, one SELECT that renders the record) on the same
 * records in the same way, so the two CPU figures come from one window. Needs `npm run build` first.
 */
import http from 'node:http';
import pg from 'pg';
const [root, label, nArg, cArg] = process.argv.slice(2);
const N = Number(nArg ?? 20000), C = Number(cArg ?? 16);
const { writeConfig, startGateway, authOf } = await import(`${root}/bench/lib/gateway.mjs`);
const { migrateDb, FIELDS, CLASS } = await import(`${root}/bench/lib/db.mjs`);
const { processCpu } = await import(`${root}/bench/lib/util.mjs`);
const admin = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
await admin.connect();
const dbname = process.env.BENCH_DB ?? 'kslate_get_cpu';
const exists = (await admin.query('select 1 from pg_database where datname=$1', [dbname])).rowCount;
if (!exists) await admin.query(`create database ${dbname}`);
await admin.end();
const url = `postgres://postgres@127.0.0.1:5432/${dbname}`;
await migrateDb(url, `${root}/dist`);
const cfg = writeConfig(1);
const profileDir = process.env.GET_CPU_PROFILE; // a directory: run the gateway under --cpu-prof and summarise
const gw = await startGateway({ root, databaseUrl: url, classesDir: cfg.classesDir, keysFile: cfg.keysFile, say: () => {}, profileDir, env: process.env.GW_ENV ? Object.fromEntries([process.env.GW_ENV.split('=')]) : {} });
const agent = new http.Agent({ keepAlive: true, maxSockets: C });
const req = (method, path, body, base = gw.url) => new Promise((res, rej) => {
  const r = http.request(base + path, { method, agent, headers: { authorization: authOf(0), 'content-type': 'application/json' } }, (m) => {
    let t = ''; m.on('data', (d) => (t += d)); m.on('end', () => res([m.statusCode, t]));
  });
  r.on('error', rej); r.end(body);
});
const R = 200;
for (let i = 0; i < R; i++) {
  for (const [k, f] of FIELDS.entries()) {
    const [s, t] = await req('PUT', `/v1/records/${CLASS}/r${i}/fields/${f}`, JSON.stringify({ value: { n: i, k, s: 'x'.repeat(40), a: [1, 2, 3] }, expected_version: 0 }));
    if (s !== 200 && s !== 201 && s !== 409) throw new Error(`put ${s} ${t}`);
  }
}
async function run(n, base = gw.url) {
  let i = 0;
  await Promise.all(Array.from({ length: C }, async () => { while (i < n) { const k = i++; const [s, t] = await req('GET', `/v1/records/${CLASS}/r${k % R}`, undefined, base); if (s !== 200) throw new Error(`get ${s} ${t}`); } }));
}
async function rounds(pid, base) {
  await run(3000, base); // warm up
  const out = [];
  for (let j = 0; j < 3; j++) {
    const c0 = processCpu(pid); const t0 = performance.now();
    await run(N, base);
    const c1 = processCpu(pid); const t1 = performance.now();
    out.push({ us_per_get: Math.round(((c1 - c0) / N) * 1e6 * 10) / 10, rps: Math.round(N / ((t1 - t0) / 1000)) });
  }
  const [, sample] = await req('GET', `/v1/records/${CLASS}/r1`, undefined, base);
  return { rounds: out, bytes: sample.length };
}
console.log(JSON.stringify({ label, N, C, ...(await rounds(gw.pid, gw.url)) }));
await gw.stop(); cfg.cleanup();
if (process.env.GET_CPU_REFERENCE === '1') {
  const { startReference } = await import(`${root}/bench/lib/reference.mjs`);
  const ref = await startReference({ databaseUrl: url, identities: 1 });
  console.log(JSON.stringify({ label: 'reference', N, C, ...(await rounds(ref.pid, ref.url)) }));
  await ref.stop();
}
agent.destroy();
if (profileDir) {
  const { summarizeLatestProfile } = await import(`${root}/bench/lib/profile.mjs`);
  const summary = summarizeLatestProfile(profileDir, 40);
  if (summary) console.log(summary);
}
