#!/usr/bin/env node
/**
 * What the MCP SDK's machinery costs per stateless POST (issue 38 item 3), in CPU, without a
 * gateway or a database: `node bench/mcp-overhead.mjs [--rounds N]`.
 *
 * The SDK path is what runtime/http/mcp/server.ts does per POST: a pooled low-level `Server`
 * connected to a fresh `WebStandardStreamableHTTPServerTransport` (stateless, JSON response),
 * `handleRequest` with the body already parsed, the answer read as text, the server closed on
 * a later turn and put back in the pool. Its tools/call handler answers a fixed put result at
 * once. The direct path does what any transport must: parse the same body, call the same
 * handler, stringify the same JSON-RPC answer. The difference is the SDK's own per-POST work
 * (transport and its maps, connect/close, the JSON-RPC and tools/call schemas, the result's
 * schema, an AbortController, a web `Response`), which an MCP put pays on top of an HTTP put.
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
  const out = await res.text();
  setTimeout(() => void server.close().then(() => idle.push(server)), 0);
  return out;
}

async function direct() {
  const m = JSON.parse(message());
  const result = await answer(m.params);
  return JSON.stringify({ result, jsonrpc: '2.0', id: m.id });
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

const same = JSON.parse(await viaSdk()).result;
if (JSON.stringify(same) !== JSON.stringify(await answer())) throw new Error('the SDK path answered something else than the handler returned');
for (let i = 0; i < 60; i++) {
  await round(viaSdk);
  await round(direct);
}
const sdk = await cpuPerCall(viaSdk, ROUNDS);
const dir = await cpuPerCall(direct, ROUNDS);
process.stdout.write(
  `MCP tools/call, ${AT_ONCE} at a time (${made} servers in the pool): SDK path ${sdk.toFixed(1)} µs CPU per POST, ` +
    `direct ${dir.toFixed(1)} µs; the SDK's machinery ${(sdk - dir).toFixed(1)} µs per POST\n`,
);
