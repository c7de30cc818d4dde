/**
 * OIDC on Workers, in workerd: a token from a (loopback) issuer authenticates as `oidc:<sub>`
 * with the strength the issuer declares; a forged or foreign token is UNAUTHENTICATED; and
 * the issuer's key set is fetched once per isolate (cached at module scope), not per request.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { AUD, fakeIssuer, key, token, type Key } from '../identity/fake-issuer.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { startTestGateway, type ClassInput } from '../setup/gateway.js';
import { APIKEYS_YAML, startWorker, type TestWorker } from './miniflare.js';

const board: ClassInput = {
  name: 'oboard',
  namespace: 'workers-oidc',
  spec: {
    fields: { status: { kind: 'versioned', type: 'string' } },
    roles: { agent: { subjects: ['oidc:agent-7', 'apikey:alice'], read: ['*'], write: ['*'] } },
  },
};

let db: TestDb;
let issuer: Awaited<ReturnType<typeof fakeIssuer>>;
let signing: Key;
let worker: TestWorker;

beforeAll(async () => {
  db = await freshDatabase();
  const gw = await startTestGateway([board], { db });
  await gw.close();
  issuer = await fakeIssuer();
  signing = await key('k1');
  issuer.jwks.push(signing.jwk);
  worker = await startWorker({
    DATABASE_URL: db.url,
    KSLATE_IDENTITY: 'apikey,oidc',
    KSLATE_APIKEYS: APIKEYS_YAML,
    KSLATE_OIDC_ISSUER: issuer.url,
    KSLATE_OIDC_AUDIENCE: AUD,
  });
});

afterAll(async () => {
  await worker?.close();
  await issuer?.close();
  await db?.drop();
});

async function callWith(bearer: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${worker.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${bearer}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

test('an issuer token writes as oidc:<sub>; the key set is fetched once for many requests', async () => {
  const jwt = await token(signing, { iss: issuer.url, sub: 'agent-7' });
  const put = await callWith(jwt, 'PUT', '/v1/records/oboard/t1/fields/status', { value: 'open', expected_version: 0 });
  expect(put.status).toBe(201);
  for (let i = 0; i < 5; i++) {
    const got = await callWith(jwt, 'GET', '/v1/records/oboard/t1');
    expect(got.status).toBe(200);
    expect(got.body.fields.status).toMatchObject({ value: 'open', author: 'oidc:agent-7', identity_strength: 'issuer-declared' });
  }
  expect(issuer.fetches()).toBe(1);
  // API keys still work beside OIDC.
  expect((await worker.call('alice', 'GET', '/v1/records/oboard/t1')).status).toBe(200);
});

test('a token signed by another key, or for another audience, is UNAUTHENTICATED', async () => {
  const stranger = await key('k1'); // same kid, different key: the signature does not verify
  const forged = await token(stranger, { iss: issuer.url, sub: 'agent-7' });
  const r = await callWith(forged, 'GET', '/v1/records/oboard/t1');
  expect(r.status).toBe(401);
  expect(r.body).toMatchObject({ error: 'UNAUTHENTICATED' });
  const other = await token(signing, { iss: issuer.url, sub: 'agent-7', aud: 'someone-else' });
  const o = await callWith(other, 'GET', '/v1/records/oboard/t1');
  expect(o.status).toBe(401);
  expect(o.body.message).toMatch(/aud|audience/i);
});
