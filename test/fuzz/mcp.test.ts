/**
 * Fuzz over MCP (issue 10): the same seeded cases as tools/call messages posted to /mcp.
 * No 5xx, no dropped connection, no INTERNAL or UNAVAILABLE tool result, no JSON-RPC
 * internal error (-32603). Raw POSTs, not the SDK client: its own validation would refuse
 * much of what a hostile client sends.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KEYS, type TestGateway } from '../setup/gateway.js';
import { OPS, SEED, opCases, runAll, show } from './cases.js';
import { fuzzGateway, tally, whoFor } from './setup.js';

let t: TestGateway;
beforeAll(async () => {
  t = await fuzzGateway();
});
afterAll(() => t?.close());

const TOOL = {
  get: ['svc_get'],
  put: ['svc_put'],
  append: ['svc_append'],
  claim: ['svc_claim'],
  checkpointSave: ['svc_checkpoint', 'save'],
  checkpointLoad: ['svc_checkpoint', 'load'],
  query: ['svc_query'],
} as const;

it.each(OPS)('%s: no 5xx, no dropped connection, no INTERNAL', async (op) => {
  const cases = opCases(op);
  const seen = tally();
  const failures = await runAll(cases, 8, async (args, i) => {
    const [name, action] = TOOL[op];
    const message = JSON.stringify({
      jsonrpc: '2.0',
      id: i,
      method: 'tools/call',
      params: { name, arguments: action ? { ...args, action } : args },
    });
    const who = whoFor(i);
    const res = await fetch(`${t.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEYS[who] ?? who}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(i % 11 === 0 ? { 'x-svc-scope': `fz-${i % 3}` } : {}),
      },
      body: message,
      signal: AbortSignal.timeout(20_000),
    });
    const text = await res.text();
    if (res.status >= 500) return `${res.status} ${text.slice(0, 300)} for ${show(message)}`;
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      return `${res.status} answer is not JSON: ${text.slice(0, 200)}`;
    }
    if (res.status !== 200) {
      seen.add(`http${res.status}:${body.error ?? body.error?.code}`);
      return null;
    }
    if (body.error) {
      seen.add(`jsonrpc${body.error.code}`);
      return body.error.code === -32603 ? `JSON-RPC internal error ${text.slice(0, 300)} for ${show(message)}` : null;
    }
    const code = body.result?.isError ? body.result.structuredContent?.error : 'OK';
    seen.add(String(code));
    return code === 'INTERNAL' || code === 'UNAVAILABLE' ? `${code}: ${text.slice(0, 300)} for ${show(message)}` : null;
  });
  console.log(`fuzz mcp ${op}: ${cases.length} tool calls (seed ${SEED}): ${seen}`);
  expect(failures.slice(0, 5), `failures (replay with KSLATE_FUZZ_SEED=${SEED})`).toEqual([]);
}, 300_000);
