/**
 * The k8s-sa provider's cache and review bounds, with a clock and a review function under the
 * test's control (the end-to-end behaviour over a real API server stand-in is k8s-sa.test.ts).
 */
import type { V1TokenReview } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import { SvcError } from '../../handlers/errors.js';
import { identityFromReview, K8sSaProvider, peekClaims, type K8sSaOptions, type ReviewFn } from '../../runtime/identity/k8s-sa.js';
import { RejectedCredentialBudget } from '../../runtime/rate-limit.js';
import { authenticateRequest, type AppServices } from '../../runtime/request.js';
import { quietLog } from '../setup/gateway.js';
import { jwt } from './fake-kube.js';

const accepted = (sa: string, extra?: Record<string, string[]>): V1TokenReview => ({
  spec: {},
  status: { authenticated: true, audiences: ['kslate'], user: { username: `system:serviceaccount:ns:${sa}`, extra } },
});

function provider(opts: Partial<Omit<K8sSaOptions, 'audience' | 'log'>> = {}) {
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

/** A review function that answers only when the test lets it, counting what was sent. */
function gated(answer: (token: string) => V1TokenReview = (tk) => accepted(String(JSON.parse(Buffer.from(tk.split('.')[1]!, 'base64url').toString()).sa))) {
  const sent: string[] = [];
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const review: ReviewFn = async (token) => {
    sent.push(token);
    await gate;
    return answer(token);
  };
  return { sent, review, open: () => open() };
}

/** What authenticateRequest needs of the services: the providers, the budget and a metrics sink. */
function services(p: K8sSaProvider, budget: RejectedCredentialBudget): AppServices {
  return { providers: [p], budget, metrics: { rejection() {} } } as unknown as AppServices;
}

const settled = () => new Promise((r) => setImmediate(r));
const code = (e: unknown) => (e instanceof SvcError ? e.code : `not a SvcError: ${String(e)}`);

describe('k8s-sa under a flood of tokens (issue 31, item 12)', () => {
  test('at most maxQueued reviews wait for a slot; one more answers 503 at once, unsent', async () => {
    const g = gated();
    const { p } = provider({ review: g.review, maxInFlight: 2, maxQueued: 3 });
    const all = Array.from({ length: 8 }, (_, i) => p.authenticate(jwt({ fake: 'pod', sa: `q${i}` })).catch((e) => e));
    await settled();
    expect(p.inFlight).toBe(2);
    expect(p.queued).toBe(3);
    expect(g.sent).toHaveLength(2);
    g.open();
    const out = await Promise.all(all);
    const refused = out.filter((o) => o instanceof SvcError);
    expect(refused).toHaveLength(3);
    for (const e of refused) {
      expect(e.code).toBe('UNAVAILABLE');
      expect(e.message).toMatch(/busy \(3 reviews are already waiting for it\)/);
    }
    expect(out.filter((o) => !(o instanceof SvcError)).map((o) => o.author)).toHaveLength(5);
    expect(g.sent).toHaveLength(5);
    expect([p.inFlight, p.queued]).toEqual([0, 0]);
  });

  test('the deadline runs from arrival: a review whose time ran out in the queue is never sent', async () => {
    let now = 1_000_000;
    const g = gated();
    // The real timer (60 s) never fires here; the provider's clock says the deadline passed.
    const { p } = provider({ review: g.review, maxInFlight: 1, timeoutMs: 60_000, now: () => now });
    const first = p.authenticate(jwt({ fake: 'pod', sa: 'first' }));
    const queued = p.authenticate(jwt({ fake: 'pod', sa: 'queued' })).catch((e) => e);
    await settled();
    expect(p.queued).toBe(1);
    now += 60_001;
    g.open();
    expect((await first)?.author).toBe('k8s-sa:ns/first');
    const e = await queued;
    expect(code(e)).toBe('UNAVAILABLE');
    expect(e.message).toMatch(/busy \(no answer within 60000 ms/);
    expect(g.sent).toHaveLength(1);
    expect([p.inFlight, p.queued]).toEqual([0, 0]);
  });

  test("every review is charged to the address before it is sent: 400 made-up tokens at once send 200 reviews, the rest 429", async () => {
    const g = gated(() => ({ spec: {}, status: { authenticated: false } }));
    const { p } = provider({ review: g.review, maxInFlight: 1_000, maxQueued: 1_000 });
    const budget = new RejectedCredentialBudget({ now: () => 0 });
    const s = services(p, budget);
    const all = Array.from({ length: 400 }, (_, i) => authenticateRequest(s, '10.0.0.1', `Bearer ${jwt({ fake: 'no', sa: `junk${i}` })}`).catch(code));
    await settled();
    // Before any review came back: the budget (200) was spent by the reviews it let through.
    expect(g.sent).toHaveLength(200);
    g.open();
    const codes = await Promise.all(all);
    expect(codes.filter((c) => c === 'UNAUTHENTICATED')).toHaveLength(200);
    expect(codes.filter((c) => c === 'RATE_LIMITED')).toHaveLength(200);
    expect(g.sent).toHaveLength(200);
    // Another address is not affected.
    const other = gated();
    other.open();
    const q = provider({ review: other.review });
    expect((await authenticateRequest(services(q.p, budget), '10.0.0.2', `Bearer ${jwt({ fake: 'pod', sa: 'fine' })}`)).author).toBe('k8s-sa:ns/fine');
  });

  test('an accepted token gives its charge back; cached and shared reviews charge nothing', async () => {
    const { p, seen } = provider();
    const budget = new RejectedCredentialBudget({ now: () => 0, burst: 5 });
    const s = services(p, budget);
    for (let i = 0; i < 50; i++) await authenticateRequest(s, '10.0.0.3', `Bearer ${jwt({ fake: 'pod', sa: `ok${i}` })}`);
    const same = `Bearer ${jwt({ fake: 'pod', sa: 'shared' })}`;
    await Promise.all(Array.from({ length: 50 }, () => authenticateRequest(s, '10.0.0.3', same)));
    expect(seen).toHaveLength(51);
    expect(budget.isExhausted('10.0.0.3')).toBe(false);
    expect(budget.size).toBe(0);
  });

  test("a token of another provider's issuer (--identity k8s-sa,oidc) is passed on, never reviewed", async () => {
    const { p, seen } = provider({ foreignIssuers: ['https://login.example.com'] });
    expect(await p.authenticate(jwt({ fake: 'pod', sa: 'x', iss: 'https://login.example.com' }))).toBeNull();
    expect(seen).toHaveLength(0);
    expect((await p.authenticate(jwt({ fake: 'pod', sa: 'x' })))?.author).toBe('k8s-sa:ns/x');
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
    expect(peekClaims(jwt({ fake: 'pod', exp: 5, jti: 'j' }))).toEqual({ exp: 5, jti: 'j', iss: 'https://kubernetes.default.svc' });
    for (const t of ['', 'abc', 'a.b', 'a.b.c.d', 'a.b.c=', 'a+b.c.d', 'x.bm90IGpzb24.y']) expect(peekClaims(t), t).toBeNull();
  });
});
