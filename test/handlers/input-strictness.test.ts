/**
 * Bad input gets MALFORMED naming what is wrong, on HTTP, MCP and gRPC alike, never a 500
 * and never a silent change (issue 10, defects 6, 8, 9 and 12).
 */
import { request } from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../../handlers/body.js';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { grpcAdapter, httpAdapter, mcpAdapter, type Adapter } from '../transports/clients.js';

let t: TestGateway;
let adapters: Adapter[];
let n = 0;
const fresh = () => `s${++n}-${process.pid}`;

beforeAll(async () => {
  t = await startTestGateway([incident], { extraArgs: ['--grpc-port', String(await freePort())] });
  adapters = [httpAdapter(t.url), mcpAdapter(t.url), grpcAdapter(`127.0.0.1:${t.gw.grpcPort}`)];
});
afterAll(async () => {
  for (const a of adapters ?? []) await a.close();
  await t?.close();
});

async function historyCount(id: string): Promise<number> {
  const h = await t.call('alice', 'GET', `/v1/records/incident/${id}/history`);
  return h.status === 404 ? 0 : h.body.history.length;
}

describe('integers are range-checked (defect 6)', () => {
  it('expected_version of 2^63 is MALFORMED naming expected_version on every transport, and leaves no row', async () => {
    for (const a of adapters) {
      const id = fresh();
      // 2^63 - 1 is what an int64 can carry on gRPC; in JSON it reads as 2^63.
      const r = await a.run('alice', 'put', { record: `incident/${id}`, field: 'title', value: 'x', expected_version: 9223372036854775807 });
      expect(r.code, a.name).toBe('MALFORMED');
      expect((r.body as { message: string }).message, a.name).toMatch(/expected_version/);
      expect(await historyCount(id)).toBe(0);
    }
  });

  it('a raw JSON body with 9223372036854775808 (and a premise version past 2^53) is MALFORMED, not 500', async () => {
    const id = fresh();
    const big = await t.call('alice', 'PUT', `/v1/records/incident/${id}/fields/title`, '{"value":"x","expected_version":9223372036854775808}');
    expect(big.status).toBe(400);
    expect(big.body.message).toMatch(/expected_version/);
    const premise = await t.call('alice', 'PUT', `/v1/records/incident/${id}/fields/title`, {
      value: 'x',
      expected_version: 0,
      based_on: [{ field: 'status', version: 2 ** 60 }],
    });
    expect(premise.status).toBe(400);
    expect(premise.body.message).toMatch(/based_on\.0\.version/);
  });
});

describe('nesting has one limit on every transport (defect 8)', () => {
  const nest = (depth: number) => {
    let v: unknown = 1;
    for (let i = 0; i < depth; i++) v = i % 2 ? { a: v } : [v];
    return v;
  };

  it(`a value nested ${MAX_JSON_DEPTH} levels is stored and reads back through gRPC get and query; one more is MALFORMED everywhere`, async () => {
    for (const a of adapters) {
      const id = fresh();
      const ok = await a.run('alice', 'put', { record: `incident/${id}`, field: 'blob', value: nest(MAX_JSON_DEPTH), expected_version: 0 });
      expect(ok.code, a.name).toBe('OK');
      const tooDeep = await a.run('alice', 'put', { record: `incident/${id}x`, field: 'blob', value: nest(MAX_JSON_DEPTH + 1), expected_version: 0 });
      expect(tooDeep.code, a.name).toBe('MALFORMED');
      expect((tooDeep.body as { message: string }).message).toMatch(/deeper than 32 levels/);
    }
    const grpcA = adapters[2];
    const id = fresh();
    await adapters[0].run('alice', 'put', { record: `incident/${id}`, field: 'blob', value: nest(MAX_JSON_DEPTH), expected_version: 0 });
    await adapters[0].run('alice', 'put', { record: `incident/${id}`, field: 'title', value: id, expected_version: 0 });
    expect((await grpcA.run('alice', 'get', { record: `incident/${id}` })).code).toBe('OK');
    expect((await grpcA.run('alice', 'query', { class: 'incident', filters: { title: id } })).code).toBe('OK');
  });

  it('MCP arguments nested ~10k deep are MALFORMED, never INTERNAL (put value, get fields, query filters)', async () => {
    const deep = '['.repeat(10_000) + '1' + ']'.repeat(10_000);
    const calls = [
      `{"name":"svc_put","arguments":{"record":"incident/${fresh()}","field":"blob","expected_version":0,"value":${deep}}}`,
      `{"name":"svc_get","arguments":{"record":"incident/x1","fields":[${deep}]}}`,
      `{"name":"svc_query","arguments":{"class":"incident","filters":{"title":${deep}}}}`,
      `{"name":"svc_checkpoint","arguments":{"record":"incident/x1","action":"load","role":${deep}}}`,
    ];
    for (const params of calls) {
      const res = await fetch(`${t.url}/mcp`, {
        method: 'POST',
        headers: { authorization: 'Bearer alice-test-key', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":${params}}`,
      });
      expect(res.status).toBe(200);
      const msg = await res.json();
      expect(msg.result.isError, params.slice(0, 40)).toBe(true);
      expect(msg.result.structuredContent.error, params.slice(0, 40)).toBe('MALFORMED');
    }
  });
});

describe('no silent change to a value (defect 9)', () => {
  it('1e400 in an untyped field is MALFORMED on HTTP and MCP (it would be stored as null)', async () => {
    const id = fresh();
    const r = await t.call('alice', 'PUT', `/v1/records/incident/${id}/fields/blob`, '{"value":1e400,"expected_version":0}');
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/out of range/);
    const res = await fetch(`${t.url}/mcp`, {
      method: 'POST',
      headers: { authorization: 'Bearer alice-test-key', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"svc_put","arguments":{"record":"incident/${id}","field":"blob","expected_version":0,"value":[1,-1e400]}}}`,
    });
    expect((await res.json()).result.structuredContent.error).toBe('MALFORMED');
    expect(await historyCount(id)).toBe(0);
  });

  it('a body that is not valid UTF-8 is MALFORMED (it would be stored with U+FFFD)', async () => {
    const id = fresh();
    const body = Buffer.concat([Buffer.from('{"value":"caf'), Buffer.from([0xc3, 0x28]), Buffer.from('","expected_version":0}')]);
    const status = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const u = new URL(`${t.url}/v1/records/incident/${id}/fields/blob`);
      const req = request(
        { host: u.hostname, port: u.port, path: u.pathname, method: 'PUT', headers: { authorization: 'Bearer alice-test-key', 'content-type': 'application/json', 'content-length': body.length } },
        (res) => {
          let text = '';
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode!, text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(status.status).toBe(400);
    expect(JSON.parse(status.text)).toMatchObject({ error: 'MALFORMED' });
    expect(status.text).toMatch(/UTF-8/);
    expect(await historyCount(id)).toBe(0);
  });
});

describe('parameters and keys (defect 12)', () => {
  it.each([
    ['/v1/records/incident/q1/history?limit=0x10', /limit/],
    ['/v1/records/incident/q1/history?limit=1e2', /limit/],
    ['/v1/records/incident/q1/history?limit=%2010', /limit/],
    ['/v1/records/incident?limit=0x10', /limit/],
    ['/v1/records/incident/q1?entries_limit=0x1', /entries_limit/],
  ])('%s → MALFORMED (decimal integers only)', async (path, re) => {
    await t.call('alice', 'PUT', '/v1/records/incident/q1/fields/title', { value: 'q', expected_version: 0 });
    const r = await t.call('alice', 'GET', path);
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(re);
  });

  it.each([
    ['GET', '/v1/records/incident/q1?feilds=title', 'feilds'],
    ['GET', '/v1/records/incident/q1/history?befor=x', 'befor'],
    ['GET', '/v1/records/incident/q1/checkpoint?rol=responder', 'rol'],
    ['GET', '/v1/classes?x=1', 'x'],
    ['GET', '/v1/classes/incident?x=1', 'x'],
    ['PUT', '/v1/records/incident/q1/fields/title?force=true', 'force'],
  ])('%s %s → MALFORMED naming the unknown parameter', async (method, path, name) => {
    const r = await t.call('alice', method, path, method === 'PUT' ? { value: 'z', expected_version: 1 } : undefined);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'MALFORMED' });
    expect(r.body.message).toContain(`"${name}"`);
  });

  it('a parameter sent twice is MALFORMED (the first value is not silently taken)', async () => {
    const r = await t.call('alice', 'GET', '/v1/records/incident/q1/history?limit=1&limit=5');
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/"limit" is given more than once/);
    const q = await t.call('alice', 'GET', '/v1/records/incident?title=a&title=b');
    expect(q.status).toBe(400);
  });

  it('unknown parameters still come after the authorization checks (NO_ROLE first)', async () => {
    const r = await t.call('dave', 'GET', '/v1/records/incident/q1?nope=1');
    expect(r.body.error).toBe('NO_ROLE');
  });

  it('an unknown body key says `unknown key "x"`, on HTTP and as an MCP argument alike', async () => {
    const id = fresh();
    const http = await t.call('alice', 'PUT', `/v1/records/incident/${id}/fields/title`, { value: 'x', expected_version: 0, colour: 'red' });
    const mcp = await adapters[1].run('alice', 'put', { record: `incident/${id}`, field: 'title', value: 'x', expected_version: 0, colour: 'red' });
    expect(http.status).toBe(400);
    expect(http.body.message).toMatch(/unknown key "colour" in the body/);
    expect(http.body.message).not.toMatch(/Expected never/);
    expect(mcp.body).toStrictEqual(http.body);
    const nested = await t.call('alice', 'PUT', `/v1/records/incident/${fresh()}/fields/title`, {
      value: 'x',
      expected_version: 0,
      based_on: [{ field: 'status', version: 0, sure: true }],
    });
    expect(nested.body.message).toMatch(/unknown key "sure" in `based_on.0`/);
  });

  it('an MCP read tool refuses an argument it does not take', async () => {
    const mcp = adapters[1];
    const r = await mcp.run('alice', 'get', { record: 'incident/q1', feilds: ['title'] });
    expect(r.code).toBe('MALFORMED');
    expect((r.body as { message: string }).message).toContain('"feilds"');
    const q = await mcp.run('alice', 'query', { class: 'incident', filters: { title: 'q' }, limt: 5 });
    expect(q.code).toBe('MALFORMED');
  });

  it('gRPC cannot send unknown keys; its requests pass the same checks', async () => {
    const r = await adapters[2].run('alice', 'get', { record: 'incident/q1', entries_limit: -1 });
    expect(r.code).toBe('MALFORMED');
    expect(r.status).toBe(grpc.status.INVALID_ARGUMENT);
  });
});
