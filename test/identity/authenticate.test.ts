import { describe, expect, it } from 'vitest';
import { authenticate } from '../../runtime/identity/index.js';
import { SvcError } from '../../handlers/errors.js';
import type { Identity, IdentityProvider, Strength } from '../../handlers/types.js';

const TOKEN = 'tok-very-secret-7f3a';

/** Accepts only `accepts`; records every token it was asked about. */
function fake(kind: string, accepts: string, strength: Strength = 'shared-secret') {
  const seen: string[] = [];
  const provider: IdentityProvider & { seen: string[] } = {
    kind,
    seen,
    async authenticate(token: string): Promise<Identity | null> {
      seen.push(token);
      return token === accepts ? { author: `${kind}:x`, provider: kind, name: 'x', strength } : null;
    },
  };
  return provider;
}

async function rejection(p: Promise<unknown>): Promise<SvcError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(SvcError);
  const svc = e as SvcError;
  expect(svc.code).toBe('UNAUTHENTICATED');
  expect(svc.status).toBe(401);
  return svc;
}

describe('authenticate', () => {
  it('rejects a missing or blank header', async () => {
    const p = fake('apikey', TOKEN);
    for (const h of [undefined, '', '   ']) {
      const e = await rejection(authenticate([p], h));
      expect(e.message).toMatch(/missing Authorization header/);
    }
    expect(p.seen).toEqual([]);
  });

  it('rejects a scheme other than Bearer without echoing the header', async () => {
    const p = fake('apikey', TOKEN);
    for (const h of [`Basic ${TOKEN}`, TOKEN, `Token ${TOKEN}`, `Bearer: ${TOKEN}`]) {
      const e = await rejection(authenticate([p], h));
      expect(e.message).toMatch(/not a Bearer credential/);
      expect(e.message).not.toContain(TOKEN);
      expect(JSON.stringify(e.body())).not.toContain(TOKEN);
    }
    expect(p.seen).toEqual([]);
  });

  it('rejects an empty Bearer token', async () => {
    const p = fake('apikey', TOKEN);
    for (const h of ['Bearer', 'Bearer    ']) {
      const e = await rejection(authenticate([p], h));
      expect(e.message).toMatch(/empty Bearer token/);
    }
    expect(p.seen).toEqual([]);
  });

  it('treats the scheme case-insensitively and trims the token', async () => {
    const p = fake('apikey', TOKEN);
    for (const h of [`Bearer ${TOKEN}`, `bearer ${TOKEN}`, `BEARER\t${TOKEN}  `]) {
      await expect(authenticate([p], h)).resolves.toMatchObject({ provider: 'apikey' });
    }
    expect(p.seen).toEqual([TOKEN, TOKEN, TOKEN]);
  });

  it('rejects an unknown token naming the providers tried, never the token', async () => {
    const a = fake('k8s-sa', 'other-1');
    const b = fake('apikey', 'other-2');
    const e = await rejection(authenticate([a, b], `Bearer ${TOKEN}`));
    expect(e.message).toBe('credential not accepted by any identity provider (tried: k8s-sa, apikey)');
    expect(JSON.stringify(e.body())).not.toContain(TOKEN);
    expect(a.seen).toEqual([TOKEN]);
    expect(b.seen).toEqual([TOKEN]);
  });

  it('says so when no provider is configured', async () => {
    const e = await rejection(authenticate([], `Bearer ${TOKEN}`));
    expect(e.message).toMatch(/tried: none configured/);
  });

  it('lets the first accepting provider decide and asks no later one', async () => {
    const first = fake('k8s-sa', 'nope');
    const second = fake('oidc', TOKEN, 'issuer-declared');
    const third = fake('apikey', TOKEN, 'shared-secret');
    const id = await authenticate([first, second, third], `Bearer ${TOKEN}`);
    expect(id).toEqual({ author: 'oidc:x', provider: 'oidc', name: 'x', strength: 'issuer-declared' });
    expect(first.seen).toEqual([TOKEN]);
    expect(third.seen).toEqual([]);

    const reversed = await authenticate([third, second], `Bearer ${TOKEN}`);
    expect(reversed.provider).toBe('apikey');
  });

  it('lets a provider failure through instead of calling it a bad credential', async () => {
    const broken: IdentityProvider = {
      kind: 'k8s-sa',
      async authenticate() {
        throw new Error('TokenReview: connection refused');
      },
    };
    await expect(authenticate([broken, fake('apikey', TOKEN)], `Bearer ${TOKEN}`)).rejects.toThrow(
      'TokenReview: connection refused',
    );
  });
});
