/**
 * Issue 11's "done when": `kslate serve --database-url … --classes …` with the DEFAULT
 * identity (k8s-sa) and a reachable cluster accepts service-account tokens and records
 * `k8s-sa:<ns>/<sa>` with the right strength in history. A real child process finds the
 * (fake) cluster through KUBECONFIG, as kubectl does.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { children, cleanEnv, ensureBuilt, kslate, start, stop } from '../setup/cli.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { manifestsYaml } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { jwt, startFakeKube, type FakeKube } from './fake-kube.js';

let kube: FakeKube;
let db: TestDb;
let work: string;

beforeAll(async () => {
  await ensureBuilt();
  kube = await startFakeKube();
  db = await freshDatabase();
  work = mkdtempSync(join(tmpdir(), 'kslate-k8s-serve-'));
  mkdirSync(join(work, 'classes'));
  writeFileSync(
    join(work, 'classes', 'ops.yaml'),
    manifestsYaml([
      {
        name: 'ops',
        spec: {
          fields: { plan: { kind: 'versioned' } },
          roles: { agents: { subjects: ['k8s-sa:agents/*'], read: ['*'], write: ['*'] } },
        },
      },
    ]),
  );
}, 150_000);

afterAll(async () => {
  await Promise.all([...children].map((c) => stop(c).catch(() => undefined)));
  await kube?.close();
  await db?.drop();
  if (work) rmSync(work, { recursive: true, force: true });
});

it('with no --identity, service-account tokens are accepted and recorded with their strength', async () => {
  const port = await freePort();
  await start(
    ['serve', '--database-url', db.url, '--classes', join(work, 'classes'), '--listen', `127.0.0.1:${port}`, '--metrics-port', String(await freePort())],
    cleanEnv({ KUBECONFIG: kube.kubeconfig }),
  );
  const base = `http://127.0.0.1:${port}`;
  const put = (tok: string, id: string) =>
    fetch(`${base}/v1/records/ops/${id}/fields/plan`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${tok}`, 'content-type': 'application/json' },
      body: JSON.stringify({ value: 'go', expected_version: 0 }),
    });
  expect((await put(jwt({ fake: 'pod', ns: 'agents', sa: 'planner' }), 'r1')).status).toBe(201);
  expect((await put(jwt({ fake: 'sa', ns: 'agents', sa: 'batch' }), 'r2')).status).toBe(201);
  for (const [id, author, strength] of [
    ['r1', 'k8s-sa:agents/planner', 'pod-bound'],
    ['r2', 'k8s-sa:agents/batch', 'sa-bound'],
  ]) {
    const res = await fetch(`${base}/v1/records/ops/${id}/history`, { headers: { authorization: `Bearer ${jwt({ fake: 'pod', ns: 'agents', sa: 'reader' })}` } });
    const body = await res.json();
    expect(body.history[0]).toMatchObject({ author, identity_strength: strength, outcome: 'applied' });
  }
  // An API key is not accepted: the default chain is k8s-sa alone.
  expect((await put('alice-dev-key', 'r3')).status).toBe(401);
}, 60_000);

it('with no --identity and no cluster (not in a pod, no KUBECONFIG, no ~/.kube/config) it refuses to start, in one line saying what to pass', async () => {
  // Before, it started "ready" and sent every TokenReview to http://localhost:8080: its own port.
  const home = join(work, 'empty-home');
  mkdirSync(home, { recursive: true });
  const env = cleanEnv({ HOME: home });
  delete env.KUBECONFIG;
  const r = await kslate(['serve', '--database-url', 'postgres://nobody@127.0.0.1:1/none', '--listen', '127.0.0.1:0', '--metrics-port', '0'], env);
  expect(r.code, r.stdout + r.stderr).toBe(2);
  expect(r.stdout).not.toMatch(/listening/);
  const lines = r.stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^kslate: --identity k8s-sa needs a Kubernetes cluster for k8s-sa and none was found .*: outside a cluster pass --identity apikey --apikeys FILE \(or oidc\), or set KUBECONFIG to a kubeconfig\.$/);
}, 60_000);
