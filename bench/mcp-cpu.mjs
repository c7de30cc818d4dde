/**
 * Gateway CPU time per MCP put and per gRPC put against per HTTP put (issue 38 item 3;
 * docs/performance.md "MCP direct path"): `node bench/mcp-cpu.mjs <repo root> <label> [puts per
 * round] [clients]`
 * starts `kslate serve` from <root>/dist as bench/get-cpu.mjs does (the machine's PostgreSQL,
 * database $BENCH_DB or kslate_mcp_cpu, created if missing), then runs three pairs of rounds
 * over keep-alive HTTP: versioned puts as HTTP `PUT .../fields/f1` and as MCP `tools/call
 * svc_put` with the headers the SDK's client sends (the bench's MCP wire client), and as gRPC
 * `Put` over one HTTP/2 session per client (the bench's gRPC wire client), each client on
 * records of its own so that every put is applied. It prints the gateway's CPU (utime + stime
 * from /proc) per put for each round and the MCP/HTTP and gRPC/HTTP ratios of the medians.
 * MCP_CPU_PROFILE=<dir> runs the gateway under --cpu-prof and prints its hottest frames. CPU per
 * request moves far less with a loaded machine than throughput does; compare builds by
 * alternating runs. Needs `npm run build` first.
 */
import http from 'node:http';
import http2 from 'node:http2';
import pg from 'pg';
const [root, label, nArg, cArg] = process.argv.slice(2);
const N = Number(nArg ?? 6000), C = Number(cArg ?? 16);
const { writeConfig, startGateway, authOf } = await import(`${root}/bench/lib/gateway.mjs`);
const { migrateDb, CLASS } = await import(`${root}/bench/lib/db.mjs`);
const { processCpu } = await import(`${root}/bench/lib/util.mjs`);
const { LATEST_PROTOCOL_VERSION } = await import('@modelcontextprotocol/sdk/types.js');
const admin = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
await admin.connect();
const dbname = process.env.BENCH_DB ?? 'kslate_mcp_cpu';
const exists = (await admin.query('select 1 from pg_database where datname=$1', [dbname])).rowCount;
if (!exists) await admin.query(`create database ${dbname}`);
await admin.end();
const url = `postgres://postgres@127.0.0.1:5432/${dbname}`;
await migrateDb(url, `${root}/dist`);
const cfg = writeConfig(1);
const profileDir = process.env.MCP_CPU_PROFILE;
const gw = await startGateway({ root, databaseUrl: url, classesDir: cfg.classesDir, keysFile: cfg.keysFile, say: () => {}, grpc: true, profileDir });
// gRPC as the bench's wire client sends it: one HTTP/2 session per client (bench/lib/transports.mjs).
const { loadSvcProto, toValue, wireCall } = await import(`${root}/bench/lib/transports.mjs`);
const svc = (await loadSvcProto(root))['svc.v1.SvcService'];
const sessions = Array.from({ length: C }, () => {
  const s = http2.connect(`http://127.0.0.1:${gw.grpcPort}`);
  s.on('error', () => undefined);
  return s;
});
const agent = new http.Agent({ keepAlive: true, maxSockets: C });
const MCP = { authorization: authOf(0), 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': LATEST_PROTOCOL_VERSION };
const HTTP = { authorization: authOf(0), 'content-type': 'application/json' };
const req = (method, path, headers, body) => new Promise((res, rej) => {
  const r = http.request(gw.url + path, { method, agent, headers }, (m) => {
    let t = ''; m.on('data', (d) => (t += d)); m.on('end', () => res([m.statusCode, t]));
  });
  r.on('error', rej); r.end(body);
});
// Each client writes records of its own (fresh ones per run: the database is kept), round robin.
const K = 8;
const run0 = Date.now().toString(36);
const versions = new Map();
let rpcId = 0;
async function put(transport, client, n) {
  const id = `cpu-${run0}-${client}-${n % K}`;
  const expected = versions.get(id) ?? 0;
  const value = { n, c: client, s: 'x'.repeat(40) };
  let version;
  if (transport === 'http') {
    const [s, t] = await req('PUT', `/v1/records/${CLASS}/${id}/fields/f1`, HTTP, JSON.stringify({ value, expected_version: expected }));
    if (s !== 200 && s !== 201) throw new Error(`http put ${s} ${t}`);
    version = JSON.parse(t).version;
  } else if (transport === 'grpc') {
    const r = await wireCall(svc, sessions[client], 'Put', { record: `${CLASS}/${id}`, field: 'f1', value: toValue(value), expected_version: expected }, authOf(0));
    if (r.status !== 0) throw new Error(`grpc put ${r.status} ${r.message}`);
    version = Number(r.msg.version);
  } else {
    const args = { record: `${CLASS}/${id}`, field: 'f1', value, expected_version: expected };
    const [s, t] = await req('POST', '/mcp', MCP, JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method: 'tools/call', params: { name: 'svc_put', arguments: args } }));
    const result = s === 200 ? JSON.parse(t).result : undefined;
    if (!result || result.isError) throw new Error(`mcp put ${s} ${t}`);
    version = result.structuredContent.version;
  }
  versions.set(id, version);
}
async function run(transport, n) {
  let i = 0;
  await Promise.all(Array.from({ length: C }, async (_, client) => { let k = 0; while (i++ < n) await put(transport, client, k++); }));
}
await run('http', 2000); // warm up both
await run('mcp', 2000);
await run('grpc', 2000);
const rounds = { http: [], mcp: [], grpc: [] };
// MCP_CPU_ONLY=grpc (say) measures only those transports' rounds (for a profile of one); the ratios then need http.
const only = process.env.MCP_CPU_ONLY?.split(',') ?? ['http', 'mcp', 'grpc'];
for (let j = 0; j < 3; j++) {
  for (const transport of only) {
    const c0 = processCpu(gw.pid); const t0 = performance.now();
    await run(transport, N);
    const c1 = processCpu(gw.pid); const t1 = performance.now();
    rounds[transport].push({ us_per_put: Math.round(((c1 - c0) / N) * 1e6 * 10) / 10, rps: Math.round(N / ((t1 - t0) / 1000)) });
  }
}
const median = (xs) => (xs.length === 0 ? NaN : [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]);
const mh = median(rounds.http.map((r) => r.us_per_put)), mm = median(rounds.mcp.map((r) => r.us_per_put)), mg = median(rounds.grpc.map((r) => r.us_per_put));
const ratio = (x) => Math.round((x / mh) * 100) / 100;
console.log(JSON.stringify({ label, N, C, ...rounds, median_us: { http: mh, mcp: mm, grpc: mg }, mcp_over_http_cpu: ratio(mm), grpc_over_http_cpu: ratio(mg) }));
for (const s of sessions) s.close();
await gw.stop(); cfg.cleanup(); agent.destroy();
if (profileDir) {
  const { summarizeLatestProfile } = await import(`${root}/bench/lib/profile.mjs`);
  const summary = summarizeLatestProfile(profileDir, 40);
  if (summary) console.log(summary);
}
