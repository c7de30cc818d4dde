/**
 * A unary gRPC answer's initial metadata (x-request-id) leaves in the same write as its
 * message. Sent at the start of the call, the headers went out alone, a syscall and a wake-up
 * of the client more per call (issue 15: gRPC at 0.9 of HTTP). The trailers follow in a write
 * of their own: grpc-js sends them when Node's HTTP/2 session asks (`wantTrailers`), after the
 * message has gone. A TCP relay between client and gateway counts the chunks the gateway sends.
 */
import http2 from 'node:http2';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { grpcAdapter, tokenOf, type Adapter } from './clients.js';

let t: TestGateway;
let g: Adapter;
let relay: net.Server;
let chunksFromGateway = 0;

beforeAll(async () => {
  t = await startTestGateway([incident], { extraArgs: ['--grpc-port', String(await freePort())] });
  relay = net.createServer((client) => {
    const upstream = net.connect(t.gw.grpcPort!, '127.0.0.1');
    client.on('data', (d) => upstream.write(d));
    upstream.on('data', (d) => {
      chunksFromGateway++;
      client.write(d);
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  g = grpcAdapter(`127.0.0.1:${(relay.address() as net.AddressInfo).port}`);
});
afterAll(async () => {
  await g?.close();
  relay?.close();
  await t?.close();
});

it('each answered unary call reaches the client in two chunks (headers with message, then trailers), not three', async () => {
  expect((await t.call('alice', 'PUT', '/v1/records/incident/w1/fields/title', { value: 'x', expected_version: 0 })).status).toBe(201);
  // The connection's own frames (SETTINGS and their acks) come with the first call.
  expect((await g.run('alice', 'get', { record: 'incident/w1', fields: ['title'] })).code).toBe('OK');
  await new Promise((r) => setTimeout(r, 100));
  chunksFromGateway = 0;
  const calls = 20;
  for (let i = 0; i < calls; i++) {
    const ok = await g.run('alice', 'get', { record: 'incident/w1', fields: ['title'] });
    expect(ok.code).toBe('OK');
  }
  // Headers sent at the start of the call made it three per call (60 here); a few more frames
  // (a PING ack, a WINDOW_UPDATE) are allowed.
  expect(chunksFromGateway).toBeGreaterThanOrEqual(2 * calls);
  expect(chunksFromGateway).toBeLessThan(2 * calls + 6);
}, 30_000);

it('initial metadata still carries the request id, on an answer and on a refusal', async () => {
  const def = protoLoader.loadSync('svc/v1/svc.proto', { includeDirs: [fileURLToPath(new URL('../../proto/', import.meta.url))], keepCase: true });
  const svc = def['svc.v1.SvcService'] as unknown as Record<string, { path: string; requestSerialize(m: object): Buffer }>;
  const session = http2.connect(`http://127.0.0.1:${t.gw.grpcPort}`);
  const call = (method: string, msg: object, requestId: string) =>
    new Promise<{ headers: http2.IncomingHttpHeaders; status: string | undefined }>((resolve, reject) => {
      const body = svc[method]!.requestSerialize(msg);
      const frame = Buffer.alloc(5 + body.length);
      frame.writeUInt32BE(body.length, 1);
      body.copy(frame, 5);
      const st = session.request({
        ':method': 'POST',
        ':path': svc[method]!.path,
        'content-type': 'application/grpc',
        te: 'trailers',
        authorization: `Bearer ${tokenOf('alice')}`,
        'x-request-id': requestId,
      });
      let headers: http2.IncomingHttpHeaders = {};
      let status: string | undefined;
      st.on('response', (h) => (headers = h));
      st.on('trailers', (tr) => (status = String(tr['grpc-status'])));
      st.on('data', () => undefined);
      st.on('error', reject);
      st.on('end', () => resolve({ headers, status }));
      st.end(frame);
    });
  try {
    const ok = await call('Get', { record: 'incident/w1', fields: ['title'] }, 'req-ok-1');
    expect(ok.status).toBe('0');
    expect(ok.headers['x-request-id']).toBe('req-ok-1');
    const stale = await call('Put', { record: 'incident/w1', field: 'title', value: { string_value: 'y' }, expected_version: 0 }, 'req-stale-1');
    expect(stale.status).not.toBe('0');
    expect(stale.headers['x-request-id']).toBe('req-stale-1');
  } finally {
    session.close();
  }
});
