/**
 * The k8s-sa provider's cache and review bounds, with a clock and a review function under the
 * test's control (the end-to-end behaviour over a real API server stand-in is k8s-sa.test.ts).
 */
import type { V1TokenReview } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import { SvcError } from '../../handlers/errors.js';
import { identityFromReview, K8sSaProvider, peekClaims, type ReviewFn } from '../../runtime/identity/k8s-sa.js';
import { quietLog } from '../setup/gateway.js';
import { jwt } from './fake-kube.js';

const accepted = (sa: string, extra?: Record<string, string[]>): V1TokenReview => ({
  spec: {},
  status: { authenticated: true, audiences: ['kslate'], user: { username: `system:serviceaccount:ns:${sa}`, extra } },
});

function provider(opts: { now?: () => number; cacheMax?: number; timeoutMs?: number; review?: ReviewFn } = {}) {
  const seen: string[] = [];
  const review: ReviewFn =
    opts.review ??
    (async (token) => {
      seen.push(token);
      return accepted(String(JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).sa));
    });
  const p = new K8sSaProvider({ audience: 'kslate', log: quietLog, ...opts, review });
  return { p, seen };
}

describe('k8s-sa cache', () => {
  test('a successful review is reused for 30 s at most, even when the token lives longer', async () => {
    let now = 1_000_000_000_000;
    const { p, seen } = provider({ now: () => now });
    const token = jwt({ fake: 'pod', sa: 'a', exp: now / 1000 + 3600 });
    await p.authenticate(token);
    now += 29_999;
    await p.authenticate(token);
    expect(seen).toHaveLength(1);
    now += 1;
    await p.authenticate(token);
    expect(seen).toHaveLength(2);
  });

  test("never past the token's exp; a token without exp gets 30 s", async () => {
    let now = 1_000_000_000_000;
    const { p, seen } = provider({ now: () => now });
    const short = jwt({ fake: 'pod', sa: 'a', exp: now / 1000 + 5 });
    await p.authenticate(short);
    now += 4_999;
    await p.authenticate(short);
    expect(seen).toHaveLength(1);
    now += 1;
    await p.authenticate(short);
    expect(seen).toHaveLength(2);
    const noExp = jwt({ fake: 'pod', sa: 'b' });
    await p.authenticate(noExp);
    now += 29_999;
    await p.authenticate(noExp);
    expect(seen).toHaveLength(3);
  });

  test('is a bounded LRU keyed by SHA-256 of the token, never the token', async () => {
    const { p, seen } = provider({ cacheMax: 3 });
    const tokens = ['a', 'b', 'c', 'd'].map((sa) => jwt({ fake: 'pod', sa }));
    for (const tk of tokens.slice(0, 3)) await p.authenticate(tk);
    await p.authenticate(tokens[0]!); // a is now the most recently used
    await p.authenticate(tokens[3]!); // evicts b
    expect(p.cached).toBe(3);
    expect(seen).toHaveLength(4);
    await p.authenticate(tokens[0]!);
    expect(seen).toHaveLength(4);
    await p.authenticate(tokens[1]!);
    expect(seen).toHaveLength(5);
    const keys = [...((p as unknown as { cache: Map<string, unknown> }).cache.keys())];
    for (const k of keys) expect(k).toMatch(/^[0-9a-f]{64}$/);
    for (const tk of tokens) expect(keys).not.toContain(tk);
  });

  test('the default bound is 10,000 entries', async () => {
    const { p } = provider();
    for (let i = 0; i < 10_050; i++) await p.authenticate(jwt({ fake: 'pod', sa: `s${i}` }));
    expect(p.cached).toBe(10_000);
  });

  test('a review that does not answer in time is UNAVAILABLE, and its slot is given back', async () => {
    const { p } = provider({ timeoutMs: 50, review: () => new Promise(() => undefined) });
    const e = await p.authenticate(jwt({ fake: 'pod', sa: 'slow' })).catch((x) => x);
    expect(e).toBeInstanceOf(SvcError);
    expect(e.code).toBe('UNAVAILABLE');
    expect(e.message).toMatch(/no answer within 50 ms/);
    expect(p.inFlight).toBe(0);
  });
});

describe('k8s-sa review parsing', () => {
  test('pod-bound needs exactly one pod name and exactly one pod uid', () => {
    const pod = { 'authentication.kubernetes.io/pod-name': ['p'], 'authentication.kubernetes.io/pod-uid': ['u'] };
    expect(identityFromReview(accepted('x', pod), 'kslate')).toEqual({
      author: 'k8s-sa:ns/x',
      provider: 'k8s-sa',
      name: 'ns/x',
      strength: 'pod-bound',
    });
    expect(identityFromReview(accepted('x', { ...pod, 'authentication.kubernetes.io/pod-uid': ['u', 'v'] }), 'kslate')?.strength).toBe('sa-bound');
    expect(identityFromReview(accepted('x', { 'authentication.kubernetes.io/pod-name': ['p'] }), 'kslate')?.strength).toBe('sa-bound');
    expect(identityFromReview(accepted('x'), 'kslate')?.strength).toBe('sa-bound');
  });

  test('refuses unauthenticated, other audiences and users that are not service accounts', () => {
    expect(identityFromReview({ status: { authenticated: false, audiences: ['kslate'] } }, 'kslate')).toBeNull();
    expect(identityFromReview(accepted('x'), 'other')).toBeNull();
    expect(identityFromReview({ status: { authenticated: true, audiences: ['kslate'], user: { username: 'alice' } } }, 'kslate')).toBeNull();
    expect(identityFromReview({ status: { authenticated: true, user: { username: 'system:serviceaccount:a:b' } } }, 'kslate')).toBeNull();
  });

  test('only three base64url parts with a JSON payload count as a JWT', () => {
    expect(peekClaims(jwt({ fake: 'pod', exp: 5, jti: 'j' }))).toEqual({ exp: 5, jti: 'j' });
    for (const t of ['', 'abc', 'a.b', 'a.b.c.d', 'a.b.c=', 'a+b.c.d', 'x.bm90IGpzb24.y']) expect(peekClaims(t), t).toBeNull();
  });
});
