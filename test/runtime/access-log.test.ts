/**
 * The access log (issue 10, item 15): one line at info per request with method, path,
 * status, duration, author and request id; the id is returned as X-Request-Id and carried
 * into an error's log line; no credential, body or query string ever reaches the log.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { settled } from '../setup/wait.js';
import * as grpc from '@grpc/grpc-js';
import { loadSvcProto } from '../../runtime/grpc/proto.js';

type Line = { level: string; msg: string; data: Record<string, unknown> };
const lines: Line[] = [];
const capture = (level: string) => (msg: string, data: Record<string, unknown> = {}) => void lines.push({ level, msg, data });
const log = { debug: capture('debug'), info: capture('info'), warn: capture('warn'), error: capture('error') };

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([incident], { log, extraArgs: ['--grpc-port', String(await freePort())] });
});
afterAll(() => t?.close());

const requestLines = (id: string) => lines.filter((l) => l.msg === 'request' && l.data.request_id === id);

it('one info line per request with method, path, status, duration and author; X-Request-Id returned', async () => {
  const res = await fetch(`${t.url}/v1/records/incident/a1/fields/title`, {
    method: 'PUT',
    headers: { authorization: 'Bearer alice-test-key', 'content-type': 'application/json' },
    body: JSON.stringify({ value: 'secret-value-123', expected_version: 0, evidence: 'secret-evidence' }),
  });
  expect(res.status).toBe(201);
  const id = res.headers.get('x-request-id')!;
  expect(id).toMatch(/^[0-9a-f-]{36}$/);
  const [line, ...more] = requestLines(id);
  expect(more).toHaveLength(0);
  expect(line.level).toBe('info');
  expect(line.data).toMatchObject({ method: 'PUT', path: '/v1/records/incident/a1/fields/title', status: 201, author: 'apikey:alice' });
  expect(typeof line.data.duration_ms).toBe('number');
});

it('a well-formed incoming X-Request-Id is kept; a malformed one is replaced', async () => {
  const kept = await fetch(`${t.url}/v1/classes`, { headers: { authorization: 'Bearer alice-test-key', 'x-request-id': 'proxy-42.a:b' } });
  expect(kept.headers.get('x-request-id')).toBe('proxy-42.a:b');
  expect(requestLines('proxy-42.a:b')).toHaveLength(1);
  const replaced = await fetch(`${t.url}/v1/classes`, { headers: { authorization: 'Bearer alice-test-key', 'x-request-id': 'bad id\twith "quotes"' } });
  expect(replaced.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
});

it('401, 429-bound and MCP requests are logged with their error code, never with the credential', async () => {
  const bad = await fetch(`${t.url}/v1/classes?x=1`, { headers: { authorization: 'Bearer wrong-secret-token-777' } });
  expect(bad.status).toBe(401);
  const line = requestLines(bad.headers.get('x-request-id')!)[0];
  expect(line.data).toMatchObject({ status: 401, error: 'UNAUTHENTICATED' });
  const mcp = await fetch(`${t.url}/mcp`, {
    method: 'POST',
    headers: { authorization: 'Bearer alice-test-key', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
  });
  expect(requestLines(mcp.headers.get('x-request-id')!)[0].data).toMatchObject({ method: 'POST', path: '/mcp', status: 200, author: 'apikey:alice' });
  const all = JSON.stringify(lines);
  for (const secret of ['alice-test-key', 'wrong-secret-token-777', 'secret-value-123', 'secret-evidence', 'x=1']) {
    expect(all).not.toContain(secret);
  }
});

it('an MCP tool refused in-band (JSON-RPC answer 200) is logged with its error code and author, as the same refusal on HTTP', async () => {
  // The lifecycle (runtime/request.ts) fills the line's author and error for every transport.
  const res = await fetch(`${t.url}/mcp`, {
    method: 'POST',
    headers: { authorization: 'Bearer alice-test-key', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'svc_put', arguments: { record: 'incident/mcp-stale', field: 'title', value: 'x', expected_version: 5 } },
    }),
  });
  expect(res.status).toBe(200);
  expect(await res.text()).toMatch(/STALE/);
  expect(requestLines(res.headers.get('x-request-id')!)[0].data).toMatchObject({ path: '/mcp', status: 200, author: 'apikey:alice', error: 'STALE' });
});

it('the id of a request that failed is in its error log line too', async () => {
  const res = await fetch(`${t.url}/v1/records/incident/a1`, { headers: { authorization: 'Bearer alice-test-key', 'x-request-id': 'trace-me' } });
  expect(res.status).toBe(200);
  // An UNAVAILABLE or INTERNAL is logged by asSvcError with request_id; a rejection carries its code.
  const r = await fetch(`${t.url}/v1/records/nope/a1`, { headers: { authorization: 'Bearer alice-test-key', 'x-request-id': 'trace-404' } });
  expect(r.status).toBe(404);
  expect(requestLines('trace-404')[0].data).toMatchObject({ status: 404, error: 'NOT_FOUND' });
});

it('gRPC calls are logged the same way and carry x-request-id back in their metadata', async () => {
  const m = (loadSvcProto()['svc.v1.SvcService'] as unknown as Record<string, { path: string; requestSerialize(v: object): Buffer }>).Get;
  const client = new grpc.Client(`127.0.0.1:${t.gw.grpcPort}`, grpc.credentials.createInsecure());
  try {
    const md = new grpc.Metadata();
    md.set('authorization', 'Bearer alice-test-key');
    md.set('x-request-id', 'grpc-trace-1');
    const echoed = await new Promise<string | undefined>((resolve) => {
      const call = client.makeUnaryRequest(m.path, (b: Buffer) => b, (b: Buffer) => b, m.requestSerialize({ record: 'incident/none' }), md, () => undefined);
      call.on('metadata', (got) => resolve(String(got.get('x-request-id')[0])));
      call.on('status', () => resolve(undefined));
    });
    expect(echoed).toBe('grpc-trace-1');
    // The line is written as the answer goes out: wait for it, not for a fixed time.
    await settled(async () => requestLines('grpc-trace-1').length, (n) => n > 0);
    expect(requestLines('grpc-trace-1')[0].data).toMatchObject({
      method: 'gRPC',
      path: '/svc.v1.SvcService/Get',
      status: 'NOT_FOUND',
      error: 'NOT_FOUND',
      author: 'apikey:alice',
    });
    expect(JSON.stringify(lines)).not.toContain('alice-test-key');
  } finally {
    client.close();
  }
});

it('an upload abandoned mid-body is logged as 499 (client closed) at info, not as an internal fault with a 500', async () => {
  const { connect } = await import('node:net');
  const port = Number(new URL(t.url).port);
  const heads = {
    // A declared length, and a chunked body: the two ways the body is read.
    length: 'Content-Length: 1000\r\n\r\n{"value":',
    chunked: 'Transfer-Encoding: chunked\r\n\r\n9\r\n{"value":\r\n',
  };
  const targets = [
    ['PUT', '/v1/records/incident/gone/fields/title'],
    ['POST', '/mcp'],
  ] as const;
  for (const [kind, rest] of Object.entries(heads)) {
    for (const [method, path] of targets) {
      const id = `abandoned-${kind}-${method}`;
      const socket = connect(port, '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      // Expect: 100-continue: Node answers "100 Continue" once it hands the request to the app,
      // so the client leaves after its request has started, with part of the body sent.
      const continued = new Promise<void>((resolve) => socket.once('data', () => resolve()));
      socket.write(
        `${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice-test-key\r\nX-Request-Id: ${id}\r\n` +
          `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nExpect: 100-continue\r\n${rest}`,
      );
      await continued;
      socket.destroy();
      await expect.poll(() => requestLines(id).length, { timeout: 10_000 }).toBe(1);
      expect(requestLines(id)[0]).toMatchObject({ level: 'info', data: { method, path, status: 499, error: 'CLIENT_CLOSED' } });
      expect(lines.filter((l) => l.data.request_id === id && l.level !== 'info'), `${kind} ${method}`).toEqual([]);
    }
  }
});
