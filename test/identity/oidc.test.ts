/**
 * The oidc provider (issue 11, part 3): JWTs of one issuer verified against its JWKS. The
 * issuer is faked at the network edge only: a loopback HTTP server with a discovery document
 * and a key set made with jose's generateKeyPair; the gateway is real, on a real PostgreSQL.
 */
import { SignJWT } from 'jose';
import { AUD, fakeIssuer, key, token, type Key } from './fake-issuer.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../runtime/config.js';
import { OidcProvider } from '../../runtime/identity/oidc.js';
import { SvcError } from '../../handlers/errors.js';
import { createProviders, StartupError } from '../../runtime/services.js';
import type { ClassInput } from '../setup/gateway.js';
import { quietLog, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { eventLog } from '../setup/wait.js';
import { grpcAdapter, mcpAdapter } from '../transports/clients.js';


const agents: ClassInput = {
  name: 'jobs',
  spec: {
    fields: { title: { kind: 'versioned', type: 'string' } },
    roles: { agent: { subjects: ['oidc:agent-1', 'apikey:alice'], read: ['*'], write: ['*'] } },
  },
};
const guarded: ClassInput = {
  name: 'vault',
  spec: {
    minIdentityStrength: 'sa-bound',
    fields: { door: { kind: 'versioned' } },
    roles: { keeper: { subjects: ['oidc:agent-1'], read: ['*'], write: ['*'] } },
  },
};

let issuer: Awaited<ReturnType<typeof fakeIssuer>>;
let k1: Key;
let t: TestGateway;

beforeAll(async () => {
  issuer = await fakeIssuer();
  k1 = await key('k1');
  issuer.jwks.push(k1.jwk);
  t = await startTestGateway([agents, guarded], {
    extraArgs: ['--identity', 'oidc,apikey', '--oidc-issuer', issuer.url, '--oidc-audience', AUD, '--grpc-port', String(await freePort())],
  });
});
afterAll(async () => {
  await t?.close();
  await issuer?.close();
});

const call = (tok: string, method: string, path: string, body?: unknown) => t.call(tok, method, path, body);

describe('a token of the issuer', () => {
  it('is accepted: author oidc:<sub>, strength issuer-declared, in the field and its history', async () => {
    const tok = await token(k1, { iss: issuer.url, sub: 'agent-1' });
    const w = await call(tok, 'PUT', '/v1/records/jobs/j1/fields/title', { value: 'x', expected_version: 0 });
    expect(w.status).toBe(201);
    const r = await call(tok, 'GET', '/v1/records/jobs/j1');
    expect(r.body.fields.title).toMatchObject({ author: 'oidc:agent-1', identity_strength: 'issuer-declared' });
    const h = await call(tok, 'GET', '/v1/records/jobs/j1/history');
    expect(h.body.history[0]).toMatchObject({ author: 'oidc:agent-1', identity_strength: 'issuer-declared', outcome: 'applied' });
  });

  it('is the same identity over MCP and gRPC', async () => {
    const tok = await token(k1, { iss: issuer.url, sub: 'agent-1' });
    for (const a of [mcpAdapter(t.url), grpcAdapter(`127.0.0.1:${t.gw.grpcPort}`)]) {
      try {
        const r = await a.run(tok, 'get', { record: 'jobs/j1' });
        expect(r.code, a.name).toBe('OK');
        expect((r.body as any).fields.title.author).toBe('oidc:agent-1');
      } finally {
        await a.close();
      }
    }
  });

  it('below a class floor is WEAK_IDENTITY with a history row', async () => {
    const tok = await token(k1, { iss: issuer.url, sub: 'agent-1' });
    const w = await call(tok, 'PUT', '/v1/records/vault/v1/fields/door', { value: 'open', expected_version: 0 });
    expect(w.status).toBe(403);
    expect(w.body).toMatchObject({ error: 'WEAK_IDENTITY', required: 'sa-bound', presented: 'issuer-declared' });
    const h = await call(tok, 'GET', '/v1/records/vault/v1/history');
    expect(h.body.history[0]).toMatchObject({ outcome: 'weak_identity', author: 'oidc:agent-1' });
  });
});

describe('refused with 401 saying which check failed', () => {
  it.each([
    ['wrong audience', async () => token(k1, { iss: issuer.url, sub: 'agent-1', aud: 'someone-else' }), /audience/],
    ['expired (past the 30 s tolerance)', async () => token(k1, { iss: issuer.url, sub: 'agent-1', exp: Math.floor(Date.now() / 1000) - 120 }), /expired/],
    ['signed by another key under the same kid', async () => token({ ...(await key('k1')) }, { iss: issuer.url, sub: 'agent-1' }), /signature/],
    ['a kid the issuer does not publish', async () => token(await key('made-up'), { iss: issuer.url, sub: 'agent-1' }), /no key/],
    ['no subject claim', async () => token(k1, { iss: issuer.url }), /"sub"/],
  ])('%s', async (_what, make, re) => {
    const r = await call(await make(), 'GET', '/v1/classes');
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('UNAUTHENTICATED');
    expect(r.body.message).toMatch(re);
  });

  it('an HS256 token (shared secret) is refused whatever its key', async () => {
    const secret = new TextEncoder().encode('a-shared-secret-that-anyone-could-hold');
    const hs = await new SignJWT({}).setProtectedHeader({ alg: 'HS256', kid: 'k1' }).setIssuer(issuer.url).setAudience(AUD).setSubject('agent-1').setExpirationTime('5m').sign(secret);
    const r = await call(hs, 'GET', '/v1/classes');
    expect(r.status).toBe(401);
    expect(r.body.message).toMatch(/algorithm|key|signature/);
  });
});

describe('the provider chain', () => {
  it("another issuer's JWT is not ours: the next provider is tried, and none accepts it", async () => {
    const foreign = await token(k1, { iss: 'https://elsewhere.example', sub: 'agent-1' });
    const r = await call(foreign, 'GET', '/v1/classes');
    expect(r.status).toBe(401);
    expect(r.body.message).toMatch(/not accepted by any identity provider \(tried: oidc, apikey\)/);
  });

  it('an API key still works after oidc in the chain', async () => {
    expect((await call('alice', 'GET', '/v1/classes')).status).toBe(200);
  });
});

describe('key rotation and outages', () => {
  it('a new key is fetched once when a token names it; made-up kids cost at most one fetch per cooldown', async () => {
    // The provider on its own, with a short cooldown: jose refetches for an unknown kid only
    // when the last fetch is older than the cooldown (30 s in the gateway).
    const own = await fakeIssuer();
    const first = await key('first');
    own.jwks.push(first.jwk);
    const p = await OidcProvider.open({ issuer: own.url, audience: AUD, usernameClaim: 'sub', jwksCooldownMs: 300 }, quietLog);
    try {
      expect(await p.authenticate(await token(first, { iss: own.url, sub: 'agent-1' }))).toMatchObject({ author: 'oidc:agent-1' });
      const before = own.fetches();
      const k2 = await key('k2', 'ES256');
      own.jwks.push(k2.jwk);
      const bogus = await Promise.all([0, 1, 2, 3, 4].map(async (i) => token(await key(`bogus-${i}`, 'ES256'), { iss: own.url, sub: 'agent-1' })));
      await new Promise((r) => setTimeout(r, 350));
      expect(await p.authenticate(await token(k2, { iss: own.url, sub: 'agent-2' }))).toMatchObject({ author: 'oidc:agent-2' });
      expect(own.fetches()).toBe(before + 1);
      for (const b of bogus) await expect(p.authenticate(b)).rejects.toThrow(/no key/);
      // All five fell inside the cooldown that the k2 fetch started.
      expect(own.fetches()).toBe(before + 1);
    } finally {
      p.close();
      await own.close();
    }
  });

  it('while the issuer fails, forged key ids cost one fetch per backoff (1 s, 2 s, ...) and one warning per fetch; known keys keep working', async () => {
    const own = await fakeIssuer();
    const k = await key('known');
    own.jwks.push(k.jwk);
    let now = 1_000_000_000_000;
    const warned: string[] = [];
    const log = { ...quietLog, warn: (msg: string) => void warned.push(msg) };
    const p = await OidcProvider.open({ issuer: own.url, audience: AUD, usernameClaim: 'sub', now: () => now }, log);
    const jwksFetches = () => own.requests.filter((r) => r === 'GET /jwks').length;
    const refusal = (tok: string) => p.authenticate(tok).then(() => 'accepted', (e) => `${e.code}: ${e.message}`);
    try {
      const good = await token(k, { iss: own.url, sub: 'agent-1' });
      expect(await p.authenticate(good)).toMatchObject({ author: 'oidc:agent-1' });
      expect(jwksFetches()).toBe(1);
      own.setUp(false);
      now += 30_001; // past the cooldown of the fetch that worked
      const forged = await Promise.all(Array.from({ length: 50 }, async (_, i) => token(await key(`forged-${i}`, 'ES256'), { iss: own.url, sub: 'x' })));
      const first = await refusal(forged[0]!);
      expect(first).toMatch(/^UNAVAILABLE: The OIDC issuer's keys cannot be fetched/);
      const rest = await Promise.all(forged.slice(1).map(refusal));
      // Inside the backoff no fetch is tried: an unknown key id is no key (401), as inside the cooldown.
      expect(new Set(rest)).toEqual(new Set([`UNAUTHENTICATED: OIDC token refused: no key of the issuer's JWKS matches its key id.`]));
      expect(jwksFetches()).toBe(2);
      expect(warned.filter((w) => w === 'OIDC JWKS cannot be fetched')).toHaveLength(1);
      // The known key still verifies while the issuer is down.
      expect(await p.authenticate(good)).toMatchObject({ author: 'oidc:agent-1' });
      // The backoff doubles: a try after 1 s, then none 1 s later (2 s now), then one.
      now += 1_000;
      await refusal(forged[1]!);
      expect(jwksFetches()).toBe(3);
      now += 1_000;
      await refusal(forged[2]!);
      expect(jwksFetches()).toBe(3);
      now += 1_000;
      await refusal(forged[3]!);
      expect(jwksFetches()).toBe(4);
      expect(warned.filter((w) => w === 'OIDC JWKS cannot be fetched')).toHaveLength(3);
      // Ten minutes on, the keys are old and the issuer still down: the known key still works.
      now += 10 * 60_000;
      expect(await p.authenticate(good)).toMatchObject({ author: 'oidc:agent-1' });
      // The issuer is back with a new key: the next try fetches it.
      own.setUp(true);
      const k2 = await key('rotated', 'ES256');
      own.jwks.push(k2.jwk);
      now += 30_000;
      expect(await p.authenticate(await token(k2, { iss: own.url, sub: 'agent-2' }))).toMatchObject({ author: 'oidc:agent-2' });
    } finally {
      p.close();
      await own.close();
    }
  });

  it('an issuer that cannot be reached at start: /readyz 503 and its tokens 503, then ready once it answers', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const events = eventLog();
    const g = await startTestGateway([agents], { extraArgs: ['--identity', 'oidc,apikey', '--oidc-issuer', url, '--oidc-audience', AUD], log: events.log });
    let late: Awaited<ReturnType<typeof fakeIssuer>> | undefined;
    try {
      const ready = await fetch(`${g.url}/readyz`);
      expect(ready.status).toBe(503);
      expect((await ready.json()).message).toMatch(/OIDC issuer/);
      const kLate = await key('late');
      const tok = await token(kLate, { iss: url, sub: 'agent-1' });
      const early = await g.call(tok, 'GET', '/v1/classes');
      expect(early.status).toBe(503);
      expect(early.body.error).toBe('UNAVAILABLE');
      // API keys still work meanwhile.
      expect((await g.call('alice', 'GET', '/v1/classes')).status).toBe(200);

      // The gateway retries discovery on its backoff (1 s, 2 s, ...): wait for its log line
      // that the issuer answered, then /readyz is 200.
      const discovered = events.next(/^OIDC issuer discovered$/);
      late = await fakeIssuer(port);
      late.jwks.push(kLate.jwk);
      await discovered;
      expect((await fetch(`${g.url}/readyz`)).status).toBe(200);
      expect((await g.call(tok, 'GET', '/v1/classes')).status).toBe(200);
    } finally {
      await g.close();
      await late?.close();
    }
  }, 30_000);

  it('a key set that cannot be fetched is 503, not 401', async () => {
    // Its own issuer and clock: past the cooldown of the fetch that worked, an unknown key id
    // must try the issuer, and a failed fetch is 503 UNAVAILABLE, never a 401.
    const own = await fakeIssuer();
    const k = await key('known');
    own.jwks.push(k.jwk);
    let now = 1_000_000_000_000;
    const p = await OidcProvider.open({ issuer: own.url, audience: AUD, usernameClaim: 'sub', now: () => now }, quietLog);
    try {
      expect(await p.authenticate(await token(k, { iss: own.url, sub: 'agent-1' }))).toMatchObject({ author: 'oidc:agent-1' });
      own.setUp(false);
      now += 30_001;
      const refused = await p.authenticate(await token(await key('fresh-kid-while-down'), { iss: own.url, sub: 'agent-1' })).then(
        () => null,
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(SvcError);
      expect((refused as SvcError).code).toBe('UNAVAILABLE');
      expect((refused as SvcError).status).toBe(503);
    } finally {
      p.close();
      await own.close();
    }
  });
});

describe('configuration', () => {
  it('oidc without --oidc-issuer or --oidc-audience is a start-up error naming the flag', async () => {
    await expect(createProviders(parseConfig(['--identity', 'oidc', '--oidc-audience', AUD], {}), quietLog)).rejects.toThrow(
      StartupError,
    );
    await expect(createProviders(parseConfig(['--identity', 'oidc', '--oidc-audience', AUD], {}), quietLog)).rejects.toThrow(/--oidc-issuer/);
    await expect(createProviders(parseConfig(['--identity', 'oidc', '--oidc-issuer', issuer.url], {}), quietLog)).rejects.toThrow(
      /--oidc-audience/,
    );
  });
});
