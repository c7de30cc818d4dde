/** --tls-cert/--tls-key: the gateway serves HTTPS (and refuses plain HTTP on that port). */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
let dir: string;
let cert: Buffer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kslate-tls-'));
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1',
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
  ], { stdio: 'ignore' });
  cert = readFileSync(join(dir, 'cert.pem'));
  t = await startTestGateway([incident], {
    extraArgs: ['--tls-cert', join(dir, 'cert.pem'), '--tls-key', join(dir, 'key.pem')],
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
