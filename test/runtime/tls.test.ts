/** --tls-cert/--tls-key: the gateway serves HTTPS (and refuses plain HTTP on that port). */
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { connect } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { selfSignedCert } from '../setup/self-signed.js';
import type { ProtoGrpcType } from '../../runtime/grpc/generated/svc.js';
import { loadSvcProto } from '../../runtime/grpc/proto.js';

let t: TestGateway;
let dir: string;
let cert: Buffer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kslate-tls-'));
  cert = selfSignedCert(dir).cert;
  t = await startTestGateway([incident], {
    extraArgs: [
      '--tls-cert', join(dir, 'cert.pem'), '--tls-key', join(dir, 'key.pem'),
      '--grpc-port', String(await freePort()), '--header-timeout', '1s',
    ],
  });
});
afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

function httpsGet(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', headers, ca: cert }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('the API is served over TLS with the configured certificate', async () => {
  expect(t.url.startsWith('https://')).toBe(true);
  const res = await httpsGet(`${t.url}/v1/classes`, { authorization: `Bearer ${KEYS.alice}` });
  expect(res.status).toBe(200);
  expect(JSON.parse(res.body)).toEqual({ classes: [{ name: 'incident' }] });
});

test('plain HTTP on the TLS port gets no API answer', async () => {
  const plain = t.url.replace('https://', 'http://');
  const outcome = await fetch(`${plain}/v1/classes`, { headers: { authorization: `Bearer ${KEYS.alice}` } }).then(
    (r) => r.status,
    () => 'refused',
  );
  expect(outcome).not.toBe(200);
});

test('a TCP connection that never starts the TLS handshake is closed after the header timeout', async () => {
  const { hostname, port } = new URL(t.url);
  const outcome = await new Promise<number | 'open'>((resolve) => {
    const t0 = Date.now();
    const socket = connect({ host: hostname, port: Number(port) });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(Date.now() - t0));
    setTimeout(() => {
      resolve('open');
      socket.destroy();
    }, 3500);
  });
  // Node's default TLS handshake timeout is 120 s; it is the header timeout (1 s) here, and
  // the socket is closed at once then (no HTTP answer can be written before a handshake).
  expect(outcome).not.toBe('open');
  expect(outcome).toBeLessThan(2500);
});

test('gRPC is served over TLS with the same certificate', async () => {
  const proto = grpc.loadPackageDefinition(loadSvcProto()) as unknown as ProtoGrpcType;
  const client = new proto.svc.v1.SvcService(`127.0.0.1:${t.gw.grpcPort}`, grpc.credentials.createSsl(cert));
  try {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${KEYS.alice}`);
    const res = await new Promise<any>((resolve, reject) =>
      client.Put({ record: 'incident/tls-1', field: 'title', value: { stringValue: 'over TLS' }, expected_version: 0 }, md, (e, r) =>
        e ? reject(e) : resolve(r),
      ),
    );
    expect(res).toMatchObject({ record: 'incident/tls-1', version: 1, created: true });
  } finally {
    client.close();
  }
});
