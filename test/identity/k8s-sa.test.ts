/**
 * The k8s-sa provider end to end: a real gateway and PostgreSQL, `--identity k8s-sa,apikey`,
 * and the Kubernetes API faked at the network edge (./fake-kube.ts) and found through
 * KUBECONFIG, as kubectl finds a cluster.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { parseConfig } from '../../runtime/config.js';
import { clientReview, K8sSaProvider } from '../../runtime/identity/k8s-sa.js';
import { createProviders } from '../../runtime/services.js';
import type { ClassInput } from '../setup/gateway.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { grpcAdapter, mcpAdapter, type Adapter } from '../transports/clients.js';
import { GATEWAY_SA_TOKEN, jwt, startFakeKube, type FakeKube } from './fake-kube.js';

const CLASSES: ClassInput[] = [
  {
    name: 'board',
    spec: {
      fields: { note: { kind: 'versioned' } },
      roles: {
        agents: { subjects: ['k8s-sa:agents/*', 'apikey:alice'], read: ['*'], write: ['*'] },
      },
    },
  },
  {
    name: 'vault',
    spec: {
      minIdentityStrength: 'pod-bound',
      fields: { secret: { kind: 'versioned' } },
      roles: { agents: { subjects: ['k8s-sa:agents/*'], read: ['*'], write: ['*'] } },
    },
  },
];

interface Line {
  level: string;
  msg: string;
  data?: Record<string, unknown>;
}

let fake: FakeKube;
let t: TestGateway;
let seq = 0;
const lines: Line[] = [];
const log = {
  debug: (msg: string, data?: Record<string, unknown>) => void lines.push({ level: 'debug', msg, data }),
  info: (msg: string, data?: Record<string, unknown>) => void lines.push({ level: 'info', msg, data }),
  warn: (msg: string, data?: Record<string, unknown>) => void lines.push({ level: 'warn', msg, data }),
  error: (msg: string, data?: Record<string, unknown>) => void lines.push({ level: 'error', msg, data }),
};
const savedKubeconfig = process.env.KUBECONFIG;

/** A token no earlier test used, so nothing about it is cached. */
const fresh = (fake: 'pod' | 'sa' | 'aud' | 'user' | 'no' | '500' | '403', extra: Record<string, unknown> = {}) =>
  jwt({ fake, ns: 'agents', sa: `worker-${++seq}`, jti: `jti-${seq}`, exp: Math.floor(Date.now() / 1000) + 3600, ...extra });
const rid = () => `r${++seq}`;

const put = (token: string, cls: string, id: string, field: string, value: unknown, expected_version = 0) =>
  t.call(token, 'PUT', `/v1/records/${cls}/${id}/fields/${field}`, { value, expected_version });
const listClasses = (token: string) => t.call(token, 'GET', '/v1/classes');

beforeAll(async () => {
  fake = await startFakeKube();
  process.env.KUBECONFIG = fake.kubeconfig;
  t = await startTestGateway(CLASSES, {
    // --trust-proxy 1: a test can speak from another address with X-Forwarded-For.
    extraArgs: ['--identity', 'k8s-sa,apikey', '--grpc-port', String(await freePort()), '--trust-proxy', '1'],
    log,
  });
});

afterAll(async () => {
  await t?.close();
  await fake?.close();
  if (savedKubeconfig === undefined) delete process.env.KUBECONFIG;
  else process.env.KUBECONFIG = savedKubeconfig;
});

afterEach(() => fake.reset());

describe('k8s-sa: who the caller is', () => {
  test('a pod-bound token writes as k8s-sa:<ns>/<sa> with strength pod-bound (get and history)', async () => {
    const token = jwt({ fake: 'pod', ns: 'agents', sa: 'planner', jti: 'p-1', exp: Math.floor(Date.now() / 1000) + 3600 });
    const id = rid();
    expect((await put(token, 'board', id, 'note', 'hello')).status).toBe(201);
    const got = await t.call(token, 'GET', `/v1/records/board/${id}`);
    expect(got.status).toBe(200);
    expect(JSON.stringify(got.body)).toContain('"author":"k8s-sa:agents/planner"');
    expect(JSON.stringify(got.body)).toContain('"identity_strength":"pod-bound"');
    const h = await t.call(token, 'GET', `/v1/records/board/${id}/history`);
    expect(h.status).toBe(200);
    expect(h.body.history).toHaveLength(1);
    expect(h.body.history[0]).toMatchObject({ outcome: 'applied', author: 'k8s-sa:agents/planner', identity_strength: 'pod-bound' });
    // The review asked for the configured audience, with the gateway's own credential.
    expect(fake.audiences).toEqual([['kslate']]);
    expect([...fake.authHeaders]).toEqual([`Bearer ${GATEWAY_SA_TOKEN}`]);
  });

  test('a token without a pod in extra is sa-bound', async () => {
    const token = jwt({ fake: 'sa', ns: 'agents', sa: 'batch', exp: Math.floor(Date.now() / 1000) + 3600 });
    const id = rid();
    expect((await put(token, 'board', id, 'note', 1)).status).toBe(201);
    const h = await t.call(token, 'GET', `/v1/records/board/${id}/history`);
    expect(h.body.history[0]).toMatchObject({ author: 'k8s-sa:agents/batch', identity_strength: 'sa-bound' });
  });

  test('minIdentityStrength pod-bound refuses an sa-bound token with WEAK_IDENTITY and a history row', async () => {
    const weak = fresh('sa');
    const strong = fresh('pod');
    const id = rid();
    const r = await put(weak, 'vault', id, 'secret', 'x');
    expect(r.status).toBe(403);
    expect(r.body).toMatchObject({ error: 'WEAK_IDENTITY', required: 'pod-bound', presented: 'sa-bound' });
    expect((await put(strong, 'vault', id, 'secret', 'x')).status).toBe(201);
    const h = await t.call(strong, 'GET', `/v1/records/vault/${id}/history`);
    expect(h.status).toBe(200);
    expect(h.body.history.map((r: any) => [r.outcome, r.identity_strength, r.author.startsWith('k8s-sa:agents/worker-')])).toEqual([
      // newest first
      ['applied', 'pod-bound', true],
      ['weak_identity', 'sa-bound', true],
    ]);
  });

  test('a review for another audience is 401', async () => {
    const r = await listClasses(fresh('aud'));
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('UNAUTHENTICATED');
    expect(fake.reviews).toBe(1);
  });

  test('authenticated: false is 401, and is not cached', async () => {
    const token = fresh('no');
    expect((await listClasses(token)).status).toBe(401);
    expect((await listClasses(token)).status).toBe(401);
    expect(fake.reviews).toBe(2);
  });

  test('an authenticated user that is not a service account is 401', async () => {
    expect((await listClasses(fresh('user'))).status).toBe(401);
  });

  test('a token that is not a JWT goes to the next provider (apikey) without a review', async () => {
    const r = await put('alice', 'board', rid(), 'note', 'from a key');
    expect(r.status).toBe(201);
    expect((await listClasses('not-a-jwt-and-not-a-key')).status).toBe(401);
    expect((await listClasses('a.b')).status).toBe(401);
    expect((await listClasses('a.b.c$')).status).toBe(401);
    expect(fake.reviews).toBe(0);
  });
});

describe('k8s-sa: the API server', () => {
  test('down: 503 UNAVAILABLE (never 401), logged by jti without the token; back: accepted', async () => {
    const token = fresh('pod', { jti: 'outage-jti' });
    await fake.stop();
    try {
      const r = await listClasses(token);
      expect(r.status).toBe(503);
      expect(r.body.error).toBe('UNAVAILABLE');
      expect(JSON.stringify(r.body)).toMatch(/Kubernetes API server/);
      expect(JSON.stringify(r.body)).not.toContain(token);
      expect(r.body.message).toMatch(/\(unreachable\)/);
      expect(JSON.stringify(r.body)).not.toContain(String(fake.port));
    } finally {
      await fake.start();
    }
    const warned = lines.filter((l) => l.msg.startsWith('k8s-sa: TokenReview failed'));
    expect(warned.at(-1)?.data?.jti).toBe('outage-jti');
    expect(JSON.stringify(lines)).not.toContain(token);
    expect(JSON.stringify(lines)).not.toContain(token.split('.')[1]);
    expect((await listClasses(token)).status).toBe(200);
  });

  test('an API server that does not answer in time: UNAVAILABLE, and the request is aborted', async () => {
    fake.delayMs = 3_000;
    const kc = new KubeConfig();
    kc.loadFromFile(fake.kubeconfig);
    const p = new K8sSaProvider({ audience: 'kslate', log, review: clientReview(kc), timeoutMs: 200 });
    const started = Date.now();
    const e = await p.authenticate(fresh('pod')).catch((x) => x);
    expect(e.code).toBe('UNAVAILABLE');
    expect(e.message).toMatch(/no answer within 200 ms/);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(fake.reviews).toBe(1);
    // The client gave up on its connection rather than leaving it to the slow answer.
    await expect.poll(() => fake.openConnections(), { timeout: 2_000 }).toBe(0);
  });

  test('a 5xx from the API server is 503 UNAVAILABLE', async () => {
    const r = await listClasses(fresh('500'));
    expect(r.status).toBe(503);
    expect(r.body.error).toBe('UNAVAILABLE');
    expect(r.body.message).toMatch(/\(HTTP 500\)/);
  });

  test('a gateway without RBAC for TokenReviews (403) answers 503 naming system:auth-delegator', async () => {
    const r = await listClasses(fresh('403'));
    expect(r.status).toBe(503);
    expect(r.body.error).toBe('UNAVAILABLE');
    expect(r.body.message).toMatch(/system:auth-delegator/);
  });

  test('cache: N requests with one token send one review', async () => {
    const token = fresh('pod');
    for (let i = 0; i < 20; i++) expect((await listClasses(token)).status).toBe(200);
    expect(fake.reviews).toBe(1);
  });

  test("cache: an entry does not outlive the token's exp", async () => {
    const token = fresh('sa', { exp: Math.floor(Date.now() / 1000) + 2 });
    expect((await listClasses(token)).status).toBe(200);
    expect((await listClasses(token)).status).toBe(200);
    expect(fake.reviews).toBe(1);
    await new Promise((r) => setTimeout(r, 2_100));
    // Reviewed again (the API server now says it expired), not served from the cache.
    expect((await listClasses(token)).status).toBe(401);
    expect(fake.reviews).toBe(2);
  });

  test('single flight: 50 concurrent requests with one new token send exactly one review', async () => {
    fake.delayMs = 150;
    const token = fresh('pod');
    const all = await Promise.all(Array.from({ length: 50 }, () => listClasses(token)));
    expect(all.map((r) => r.status)).toEqual(Array(50).fill(200));
    expect(fake.reviews).toBe(1);
  });

  test('at most 16 reviews in flight; the rest wait their turn and succeed', async () => {
    fake.delayMs = 150;
    const all = await Promise.all(Array.from({ length: 40 }, () => listClasses(fresh('pod'))));
    expect(all.map((r) => r.status)).toEqual(Array(40).fill(200));
    expect(fake.reviews).toBe(40);
    expect(fake.maxConcurrent).toBe(16);
  });

  test('1,000 requests with 10 tokens send 10 reviews', async () => {
    const tokens = Array.from({ length: 10 }, () => fresh('pod'));
    for (let batch = 0; batch < 20; batch++) {
      const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => listClasses(tokens[(batch * 50 + i) % 10]!)));
      expect(rs.every((r) => r.status === 200)).toBe(true);
    }
    expect(fake.reviews).toBe(10);
  });
});

describe('k8s-sa: a flood of made-up tokens (issue 31, item 12)', () => {
  test('400 at once from one address: cut at its budget before any review, the queue bounded (503 at once), another address still answered', async () => {
    fake.delayMs = 100;
    const from = (addr: string, token: string) =>
      fetch(`${t.url}/v1/classes`, { headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': addr } });
    const flood = Array.from({ length: 400 }, () =>
      from('198.51.100.7', fresh('no')).then(async (r) => ({ status: r.status, retryAfter: r.headers.get('retry-after'), body: await r.json() })),
    );
    // While the flood's reviews are being answered, a valid token from elsewhere.
    await expect.poll(() => fake.reviews, { timeout: 10_000 }).toBeGreaterThan(0);
    const valid = await from('203.0.113.9', fresh('pod'));
    const validBody = await valid.json();
    // Answered, or refused at once while the queue is full (never queued behind 400 reviews).
    expect([200, 503], JSON.stringify(validBody)).toContain(valid.status);
    if (valid.status === 503) {
      expect(validBody.message).toMatch(/busy/);
      expect(valid.headers.get('retry-after')).toBe('1');
    }
    const answers = await Promise.all(flood);
    const count = (status: number) => answers.filter((a) => a.status === status).length;
    expect(count(429), 'spent before the reviews came back').toBeGreaterThan(0);
    expect(count(503), 'the queue is bounded').toBeGreaterThan(0);
    for (const a of answers.filter((x) => x.status === 503)) {
      expect(a.body.message).toMatch(/busy/);
      expect(a.retryAfter).toBe('1');
    }
    expect(count(200)).toBe(0);
    expect(count(401) + count(429) + count(503)).toBe(400);
    expect(fake.reviews).toBeLessThan(400);
    expect(fake.maxConcurrent).toBeLessThanOrEqual(16);
    // Once the flood is answered, the valid token from the other address is accepted.
    fake.delayMs = 0;
    expect((await from('203.0.113.9', fresh('pod'))).status).toBe(200);
  }, 60_000);
});

describe('k8s-sa: the same identity over MCP and gRPC', () => {
  let adapters: Adapter[] = [];
  afterAll(async () => {
    await Promise.all(adapters.map((a) => a.close()));
  });

  test('MCP and gRPC writes are recorded as the same author and strength', async () => {
    const token = jwt({ fake: 'pod', ns: 'agents', sa: 'multi', exp: Math.floor(Date.now() / 1000) + 3600 });
    adapters = [mcpAdapter(t.url), grpcAdapter(`127.0.0.1:${t.gw.grpcPort}`)];
    const [mcp, grpc] = adapters as [Adapter, Adapter];
    const id = rid();
    const a = await mcp.run(token, 'put', { record: `board/${id}`, field: 'note', value: 'via mcp', expected_version: 0 });
    expect(a.code).toBe('OK');
    const b = await grpc.run(token, 'put', { record: `board/${id}`, field: 'note', value: 'via grpc', expected_version: 1 });
    expect(b.code).toBe('OK');
    const weak = fresh('sa');
    const w = await grpc.run(weak, 'put', { record: `vault/${rid()}`, field: 'secret', value: 1, expected_version: 0 });
    expect(w.code).toBe('WEAK_IDENTITY');
    const h = await t.call(token, 'GET', `/v1/records/board/${id}/history`);
    expect(h.body.history.map((r: any) => [r.author, r.identity_strength])).toEqual([
      ['k8s-sa:agents/multi', 'pod-bound'],
      ['k8s-sa:agents/multi', 'pod-bound'],
    ]);
  });
});

describe('k8s-sa: start', () => {
  test('a KUBECONFIG that cannot be read stops the start naming the file', async () => {
    const missing = `${fake.kubeconfig}.missing`;
    process.env.KUBECONFIG = missing;
    try {
      const e = await createProviders(parseConfig(['--identity', 'k8s-sa'], {}), log).catch((x) => x);
      expect(e).toBeInstanceOf(Error);
      expect(e.message).toContain(`k8s-sa: cannot load the Kubernetes client configuration from KUBECONFIG=${missing}`);
    } finally {
      process.env.KUBECONFIG = fake.kubeconfig;
    }
  });

  test('the API server in use and the audience are logged at start', async () => {
    const [p] = await createProviders(parseConfig(['--identity', 'k8s-sa', '--k8s-audience', 'other'], {}), log);
    expect(p!.kind).toBe('k8s-sa');
    expect(lines.map((l) => l.msg)).toContain(`k8s-sa: TokenReviews go to http://127.0.0.1:${fake.port}, audience "other"`);
  });
});
