#!/usr/bin/env node
/**
 * What a service-account identity costs per request (issue 11): the same get, on the same
 * gateway (`--identity k8s-sa,apikey`), with an API key and with a pod-bound service-account
 * token whose TokenReview is cached. The Kubernetes API is a loopback stand-in answering
 * TokenReviews (found through KUBECONFIG, as in a cluster); it counts the reviews sent.
 *
 *   npm run bench:identity [-- --requests 3000 --clients 16]
 */
import { createServer } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startDatabase, migrateDb } from './lib/db.mjs';
import { authOf, startGateway, writeConfig } from './lib/gateway.mjs';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const DIST = join(ROOT, 'dist');
const { values } = parseArgs({ options: { requests: { type: 'string', default: '3000' }, clients: { type: 'string', default: '16' } } });
const REQUESTS = Number(values.requests);
const CLIENTS = Number(values.clients);
const say = (s) => process.stdout.write(`${s}\n`);

/** A TokenReview endpoint that authenticates any token as a pod-bound `bench/agent`. */
async function fakeKube() {
  let reviews = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      reviews++;
      const spec = JSON.parse(body || '{}').spec ?? {};
      res.writeHead(201, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          status: {
            authenticated: true,
            audiences: spec.audiences ?? [],
            user: {
              username: 'system:serviceaccount:bench:agent',
              extra: { 'authentication.kubernetes.io/pod-name': ['agent-0'], 'authentication.kubernetes.io/pod-uid': ['uid-0'] },
            },
          },
        }),
      );
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const dir = mkdtempSync(join(tmpdir(), 'kslate-bench-kube-'));
  const kubeconfig = join(dir, 'config');
  const url = `http://127.0.0.1:${server.address().port}`;
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'fake', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'gateway', user: { token: 'gateway-token' } }],
      contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'gateway' } }],
      'current-context': 'fake',
    }),
  );
  return { kubeconfig, reviews: () => reviews, close: () => (server.close(), rmSync(dir, { recursive: true, force: true })) };
}

/** A JWT-shaped token (the fake does not check signatures; a real API server would). */
const saToken = () => {
  const b = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${b({ alg: 'RS256', kid: 'k' })}.${b({ iss: 'https://kubernetes.default.svc', sub: 'system:serviceaccount:bench:agent', exp: Math.floor(Date.now() / 1000) + 3600 })}.c2ln`;
};

/** `REQUESTS` gets of one record by `CLIENTS` keep-alive clients: per-request latencies in ms. */
async function measure(url, authorization) {
  const lat = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next++ < REQUESTS) {
        const t = performance.now();
        const res = await fetch(`${url}/v1/records/bench/id-1`, { headers: { authorization } });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`get answered ${res.status}`);
        lat.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
  return { rps: lat.length / seconds, p50: q(0.5), p99: q(0.99), mean: lat.reduce((a, b) => a + b, 0) / lat.length };
}

const db = await startDatabase({ dist: DIST, say, pgLog: undefined });
const kube = await fakeKube();
const cfg = writeConfig(1);
let gw;
try {
  await migrateDb(db.url, DIST);
  gw = await startGateway({
    root: ROOT,
    databaseUrl: db.url,
    classesDir: cfg.classesDir,
    keysFile: cfg.keysFile,
    identityArgs: ['--identity', 'k8s-sa,apikey'],
    env: { KUBECONFIG: kube.kubeconfig },
    say,
  });
  const put = await fetch(`${gw.url}/v1/records/bench/id-1/fields/f1`, {
    method: 'PUT',
    headers: { authorization: authOf(0), 'content-type': 'application/json' },
    body: JSON.stringify({ value: { n: 1 }, expected_version: 0 }),
  });
  if (put.status !== 201) throw new Error(`seed put answered ${put.status}`);
  const token = saToken();
  // Warm both paths (and the review cache) before measuring.
  await measure(gw.url, authOf(0));
  await measure(gw.url, `Bearer ${token}`);
  const rounds = [];
  for (let i = 0; i < 3; i++) {
    const reviewsBefore = kube.reviews();
    const key = await measure(gw.url, authOf(0));
    const sa = await measure(gw.url, `Bearer ${token}`);
    rounds.push({ key, sa, reviews: kube.reviews() - reviewsBefore });
  }
  const f = (x) => x.toFixed(3);
  say(`\nget of one record, ${REQUESTS} requests by ${CLIENTS} keep-alive clients, --identity k8s-sa,apikey`);
  say('round | API key: req/s, p50, p99, mean ms | k8s-sa (cached review): req/s, p50, p99, mean ms | added mean ms | reviews sent');
  for (const [i, r] of rounds.entries()) {
    say(
      `${i + 1} | ${r.key.rps.toFixed(0)}, ${f(r.key.p50)}, ${f(r.key.p99)}, ${f(r.key.mean)} | ${r.sa.rps.toFixed(0)}, ${f(r.sa.p50)}, ${f(r.sa.p99)}, ${f(r.sa.mean)} | ${f(r.sa.mean - r.key.mean)} | ${r.reviews}`,
    );
  }
} finally {
  await gw?.stop();
  kube.close();
  cfg.cleanup();
  await db.stop();
}
