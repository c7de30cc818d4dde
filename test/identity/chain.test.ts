/**
 * The provider chain (issue 11, part 4): `--identity` lists providers in order and the first
 * that accepts a token decides; each passes on tokens that are not its own. Here all three
 * run in one gateway, against a fake Kubernetes API server and a fake OIDC issuer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClassInput, TestGateway } from '../setup/gateway.js';
import { startTestGateway } from '../setup/gateway.js';
import { AUD, fakeIssuer, key, token, type Key } from './fake-issuer.js';
import { jwt, startFakeKube, type FakeKube } from './fake-kube.js';

const open: ClassInput = {
  name: 'board',
  spec: {
    fields: { note: { kind: 'versioned' } },
    roles: { all: { subjects: ['k8s-sa:agents/*', 'oidc:agent-1', 'apikey:alice'], read: ['*'], write: ['*'] } },
  },
};

let kube: FakeKube;
let issuer: Awaited<ReturnType<typeof fakeIssuer>>;
let k: Key;
const saved = process.env.KUBECONFIG;

beforeAll(async () => {
  kube = await startFakeKube();
  process.env.KUBECONFIG = kube.kubeconfig;
  issuer = await fakeIssuer();
  k = await key('k1', 'ES256');
  issuer.jwks.push(k.jwk);
});
afterAll(async () => {
  if (saved === undefined) delete process.env.KUBECONFIG;
  else process.env.KUBECONFIG = saved;
  await kube?.close();
  await issuer?.close();
});

async function gateway(order: string): Promise<TestGateway> {
  return startTestGateway([open], { extraArgs: ['--identity', order, '--oidc-issuer', issuer.url, '--oidc-audience', AUD] });
}

const author = async (t: TestGateway, tok: string, id: string) => {
  const w = await t.call(tok, 'PUT', `/v1/records/board/${id}/fields/note`, { value: 1, expected_version: 0 });
  expect(w.status, JSON.stringify(w.body)).toBe(201);
  return (await t.call(tok, 'GET', `/v1/records/board/${id}`)).body.fields.note;
};

describe.each(['k8s-sa,oidc,apikey', 'oidc,apikey,k8s-sa', 'apikey,k8s-sa,oidc'])('--identity %s', (order) => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await gateway(order);
  });
  afterAll(() => t?.close());

  it('each kind of token reaches the provider it belongs to, whatever the order', async () => {
    const reviews = kube.reviews;
    const pod = jwt({ fake: 'pod', ns: 'agents', sa: 'planner' });
    expect(await author(t, pod, `p-${order}`)).toMatchObject({ author: 'k8s-sa:agents/planner', identity_strength: 'pod-bound' });
    // An OIDC token (one a cluster would not authenticate: its review would fail) reaches the oidc provider.
    const oidc = await token(k, { iss: issuer.url, sub: 'agent-1', extra: { fake: 'no' } });
    expect(await author(t, oidc, `o-${order}`)).toMatchObject({ author: 'oidc:agent-1', identity_strength: 'issuer-declared' });
    expect(await author(t, 'alice', `a-${order}`)).toMatchObject({ author: 'apikey:alice', identity_strength: 'shared-secret' });
    // The pod token is reviewed once (then cached) for its two requests; an API key is never
    // sent for review, nor is a token of the OIDC issuer, even when k8s-sa comes before oidc.
    expect(kube.reviews - reviews).toBe(1);
  });

  it('a token nobody accepts is 401 naming the providers tried', async () => {
    const r = await t.call('not-a-key-and-not-a-jwt', 'GET', '/v1/classes');
    expect(r.status).toBe(401);
    expect(r.body.message).toContain(`(tried: ${order.split(',').join(', ')})`);
  });
});
