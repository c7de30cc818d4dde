#!/usr/bin/env node
/**
 * What the MCP SDK's machinery costs per stateless POST (issue 38 item 3), in CPU, without a
 * gateway or a database: `node bench/mcp-overhead.mjs [--rounds N]`.
 *
 * The SDK path is what runtime/http/mcp/server.ts does per POST: a pooled low-level `Server`
 * connected to a fresh `WebStandardStreamableHTTPServerTransport` (stateless, JSON response),
 * `handleRequest` with the body already parsed, its `Response` taken, the server closed on a
 * later turn and put back in the pool. Its tools/call handler answers a fixed put result at
 * once. The bare direct path does what any transport must: parse the same body, call the same
 * handler, stringify the same JSON-RPC answer (no schema, no Response). The difference is the
 * SDK's own per-POST work (transport and its maps, connect/close, the JSON-RPC and tools/call
 * schemas, the result's schema, an AbortController, a web `Response`), which an MCP put paid
 * on top of an HTTP put before the product's direct path.
 *
 * The product's direct path (runtime/http/mcp/server.ts `commonToolCall` + `directToolCall`,
 * from dist/ when built) is measured beside them: the same body, a caller whose `run` answers
 * the same put result at once, so what is counted is the path's own work (the JSON-RPC and
 * tools/call schemas, callTool's argument handling, the result's schema, the answer's JSON
 * and its `Response`).
 *
 * Calls run 64 at a time (the bench's top concurrency, so the pool holds 64 servers, as in
 * the gateway), timers get a turn between rounds (the closes), and the CPU of the process
 * (process.cpuUsage) is divided by the calls: the best of 7 runs, which a busy machine
 * changes far less than throughput.
 */
import { parseArgs } from 'node:util';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { existsSync } from 'node:fs';
import { getRequestListener } from '@hono/node-server';

// The gateway answers with @hono/node-server's lightweight Response (installed as the global one
// when its listener is made), whose string body is written to the socket as it is; an undici
// Response costs ~26 µs more to build here. Both paths' answers are taken as the gateway takes
// them: the Response, its body not read again (except once, to check them).
getRequestListener(() => new Response(null));

const { values } = parseArgs({ options: { rounds: { type: 'string' } }, strict: true });
const ROUNDS = Number(values.rounds ?? 100);
const AT_ONCE = 64;

const body = { record: 'bench/r-123', field: 'f1', version: 8, record_version: 12, author: 'apikey:bench-3', updated_at: '2026-11-27T05:00:00.000Z' };
const answer = async () => ({ content: [{ type: 'text', text: JSON.stringify(body) }], structuredContent: body });
const headers = new Headers({
  accept: 'application/json, text/event-stream',
  'content-type': 'application/json',
  'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
  host: '127.0.0.1',
});
let id = 0;
const message = () =>
  JSON.stringify({
    jsonrpc: '2.0',
    id: ++id,
    method: 'tools/call',
    params: { name: 'svc_put', arguments: { record: 'bench/r-1', field: 'f1', value: { n: id, c: 1 }, expected_version: 3 } },
  });

const idle = [];
let made = 0;
const newServer = () => {
  made++;
  const s = new Server({ name: 'kslate-bench', version: '1' }, { capabilities: { tools: {} } });
  s.setRequestHandler(CallToolRequestSchema, answer);
  return s;
};

async function viaSdk() {
  const parsedBody = JSON.parse(message());
  const server = idle.pop() ?? newServer();
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  const res = await transport.handleRequest({ method: 'POST', url: 'http://127.0.0.1/mcp', headers }, { parsedBody });
  setTimeout(() => void server.close().then(() => idle.push(server)), 0);
  return res;
}

async function direct() {
  const m = JSON.parse(message());
  const result = await answer(m.params);
  return JSON.stringify({ result, jsonrpc: '2.0', id: m.id });
}

const built = new URL('../dist/runtime/http/mcp/server.js', import.meta.url);
const product = existsSync(built) ? await import(built.href) : null;
/** A caller whose every operation answers the put result at once (runtime/request.ts Caller). */
const caller = {
  identity: { author: 'apikey:bench-3', strength: 'shared-secret' },
  scope: undefined,
  requestId: 'bench',
  errorOf: (e) => e,
  async run(_op, decode, opts = {}) {
    await decode();
    opts.onLsn?.(null);
    return { body };
  },
};
const request = { method: 'POST', url: 'http://127.0.0.1/mcp', headers };

async function productDirect() {
  const m = product.commonToolCall(request, JSON.parse(message()));
  if (!m) throw new Error('the product did not take the common POST');
  return product.directToolCall(m, caller);
}

const turn = () => new Promise((resolve) => setTimeout(resolve, 1));
async function round(f) {
  await Promise.all(Array.from({ length: AT_ONCE }, f));
  await turn();
}

/** CPU microseconds per call, the best of 7 runs of `rounds` rounds. */
async function cpuPerCall(f, rounds) {
  let best = Infinity;
  for (let r = 0; r < 7; r++) {
    const t = process.cpuUsage();
    for (let i = 0; i < rounds; i++) await round(f);
    const u = process.cpuUsage(t);
    best = Math.min(best, (u.user + u.system) / (rounds * AT_ONCE));
  }
  return best;
}

const same = JSON.parse(await (await viaSdk()).text()).result;
if (JSON.stringify(same) !== JSON.stringify(await answer())) throw new Error('the SDK path answered something else than the handler returned');
for (let i = 0; i < 60; i++) {
  await round(viaSdk);
  await round(direct);
}
if (product) {
  const got = JSON.parse(await (await productDirect()).text()).result;
  if (JSON.stringify(got) !== JSON.stringify(same)) throw new Error('the product direct path answered something else than the SDK path');
  for (let i = 0; i < 60; i++) await round(productDirect);
}
const sdk = await cpuPerCall(viaSdk, ROUNDS);
const dir = await cpuPerCall(direct, ROUNDS);
const prod = product ? await cpuPerCall(productDirect, ROUNDS) : null;
process.stdout.write(
  `MCP tools/call, ${AT_ONCE} at a time (${made} servers in the pool): SDK path ${sdk.toFixed(1)} µs CPU per POST, ` +
    `direct ${dir.toFixed(1)} µs; the SDK's machinery ${(sdk - dir).toFixed(1)} µs per POST\n` +
    (prod === null
      ? '(the product direct path is not built: npm run build)\n'
      : `the product direct path (commonToolCall + directToolCall, dist/) ${prod.toFixed(1)} µs CPU per POST: ${(sdk - prod).toFixed(1)} µs less than the SDK path\n`),
);
