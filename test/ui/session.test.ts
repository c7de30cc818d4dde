/**
 * The console's sign-in session (docs/console.md "Sessions"; issue 31, item 13) over real
 * sockets and a real PostgreSQL: the cookie holds an opaque secret with a lifetime, never the
 * credential; `__Host-` and `Secure` under TLS, the gateway's own or a trusted proxy's
 * (X-Forwarded-Proto with --trust-proxy); the session ends at sign-out, at its lifetime, when
 * its credential is revoked, and when its identity signs in too often; the sweep deletes
 * expired rows.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { sweep } from '../../worker/sweep.js';
import { incident } from '../fixtures/classes.js';
import { quietLog, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { selfSignedCert } from '../setup/self-signed.js';

const KEYS = { alice: 'alice-session-key', erin: 'erin-session-key' };
const WAIT_MS = 20_000;

let dir: string;
let keysFile: string;
let cert: Buffer;
/** Plain HTTP, no trusted proxy, erin's key revocable. */
let plain: TestGateway;
/** Plain HTTP behind one trusted proxy, sessions of 2 s. */
let proxied: TestGateway;
/** The gateway's own TLS. */
let tls: TestGateway;
let client: pg.Client;

function writeKeys(names: (keyof typeof KEYS)[]): void {
  const keys = names.map((name) => ({ name, sha256: createHash('sha256').update(KEYS[name]).digest('hex') }));
  writeFileSync(keysFile, stringify({ keys }));
}

interface Answer {
  status: number;
  text: string;
  setCookie: string | null;
  location: string | null;
}

/** One request over plain HTTP or the TLS gateway's HTTPS (trusting its certificate). */
function send(base: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  if (base.startsWith('http:')) {
    return fetch(base + path, { method, headers, body, redirect: 'manual' }).then(async (res) => ({
      status: res.status,
      text: await res.text(),
      setCookie: res.headers.get('set-cookie'),
      location: res.headers.get('location'),
    }));
  }
  return new Promise((resolve, reject) => {
    const req = request(base + path, { method, headers, ca: cert }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        const sc = res.headers['set-cookie'];
        resolve({ status: res.statusCode ?? 0, text, setCookie: sc ? sc.join(', ') : null, location: res.headers.location ?? null });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Sign in as a browser form would; returns the answer and the cookie to send back (`name=value`). */
async function signIn(base: string, credential: string, headers: Record<string, string> = {}): Promise<Answer & { cookie: string }> {
  const a = await send(
    base,
    'POST',
    '/ui/sign-in',
    { origin: base, 'content-type': 'application/x-www-form-urlencoded', ...headers },
    `token=${encodeURIComponent(credential)}`,
  );
  expect(a.status, a.text).toBe(303);
  return { ...a, cookie: a.setCookie!.split(';')[0] };
}

const page = (base: string, cookie: string, headers: Record<string, string> = {}, path = '/ui/classes/incident') =>
  send(base, 'GET', path, { cookie, ...headers });

async function rows(author?: string): Promise<{ id: string; author: string; sealed: string; ttl_s: number }[]> {
  const res = await client.query(
    `select id, author, sealed, extract(epoch from expires_at - created_at)::int as ttl_s from console_sessions
     where $1::text is null or author = $1 order by created_at`,
    [author ?? null],
  );
  return res.rows;
}

/** Poll `check` until it holds (the machine may be loaded): no fixed sleeps. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kslate-session-'));
  keysFile = join(dir, 'apikeys.yaml');
  writeKeys(['alice', 'erin']);
  const tlsFiles = selfSignedCert(dir);
  cert = tlsFiles.cert;
  const classes = [{ ...incident, spec: { ...incident.spec, roles: { ...incident.spec.roles, erin: { subjects: ['apikey:erin'], read: ['title'], write: [] } } } }];
  plain = await startTestGateway(classes, { extraArgs: ['--apikeys', keysFile] });
  proxied = await startTestGateway(classes, { db: plain.db, extraArgs: ['--apikeys', keysFile, '--trust-proxy', '1', '--ui-session-ttl', '2s'] });
  tls = await startTestGateway(classes, {
    db: plain.db,
    extraArgs: ['--apikeys', keysFile, '--tls-cert', tlsFiles.certFile, '--tls-key', tlsFiles.keyFile],
  });
  client = new pg.Client({ connectionString: plain.db.url });
  await client.connect();
}, 60_000);

afterAll(async () => {
  await client?.end();
  await tls?.close();
  await proxied?.close();
  await plain?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the cookie', () => {
  test('over plain HTTP: an opaque id with Max-Age on /ui, HttpOnly, SameSite=Strict, not Secure; the database keeps no usable credential', async () => {
    const a = await signIn(plain.url, KEYS.alice);
    expect(a.setCookie).toMatch(/^kslate_console=[A-Za-z0-9_-]{43}; Max-Age=28800; Path=\/ui; HttpOnly; SameSite=Strict$/);
    expect(a.setCookie).not.toContain(KEYS.alice);
    const secret = a.cookie.split('=')[1];
    const mine = (await rows('apikey:alice')).find((r) => r.id === createHash('sha256').update(Buffer.from(secret, 'base64url')).digest('hex'));
    expect(mine, 'the row is named by the hash of the cookie, not the cookie').toBeTruthy();
    expect(mine!.ttl_s).toBe(28800);
    // The credential is sealed: neither the key nor the cookie's secret is in the row.
    expect(JSON.stringify(mine)).not.toContain(KEYS.alice);
    expect(JSON.stringify(mine)).not.toContain(secret);
    const res = await page(plain.url, a.cookie);
    expect(res.status).toBe(200);
    expect(res.text).toContain('apikey:alice');
  });

  test('X-Forwarded-Proto is ignored without --trust-proxy', async () => {
    const a = await signIn(plain.url, KEYS.alice, { 'x-forwarded-proto': 'https' });
    expect(a.setCookie).toMatch(/^kslate_console=/);
    expect(a.setCookie).not.toContain('Secure');
  });

  test('behind a trusted TLS-terminating proxy (X-Forwarded-Proto: https): __Host- prefix, Secure, Path=/', async () => {
    const https = { 'x-forwarded-proto': 'https' };
    const a = await signIn(proxied.url, KEYS.alice, https);
    expect(a.setCookie).toMatch(/^__Host-kslate_console=[A-Za-z0-9_-]{43}; Max-Age=2; Path=\/; HttpOnly; Secure; SameSite=Strict$/);
    expect(a.cookie.startsWith('__Host-kslate_console=')).toBe(true);
    expect((await page(proxied.url, a.cookie, https)).status).toBe(200);
    // The proxy's word is the scheme: a plain-HTTP request (which a browser would never send
    // a Secure cookie on) does not read the __Host- cookie.
    const overHttp = await page(proxied.url, a.cookie);
    expect(overHttp.status).toBe(303);
    expect(overHttp.location).toBe('/ui/sign-in');
    // Through the proxy without TLS the cookie is the plain one.
    const b = await signIn(proxied.url, KEYS.alice, { 'x-forwarded-proto': 'http' });
    expect(b.setCookie).toMatch(/^kslate_console=[A-Za-z0-9_-]{43}; Max-Age=2; Path=\/ui; HttpOnly; SameSite=Strict$/);
  });

  test("under the gateway's own TLS: __Host- prefix, Secure, Path=/", async () => {
    const a = await signIn(tls.url, KEYS.alice);
    expect(a.setCookie).toMatch(/^__Host-kslate_console=[A-Za-z0-9_-]{43}; Max-Age=28800; Path=\/; HttpOnly; Secure; SameSite=Strict$/);
    const res = await page(tls.url, a.cookie);
    expect(res.status).toBe(200);
    expect(res.text).toContain('apikey:alice');
    const out = await send(tls.url, 'POST', '/ui/sign-out', { origin: tls.url, cookie: a.cookie });
    expect(out.setCookie).toMatch(/^__Host-kslate_console=; Max-Age=0; Path=\/; HttpOnly; Secure; SameSite=Strict$/);
  });
});

describe('the session ends', () => {
  test('at sign-out: the row is deleted, so a copy of the cookie no longer works', async () => {
    const a = await signIn(plain.url, KEYS.alice);
    const before = (await rows()).length;
    const out = await send(plain.url, 'POST', '/ui/sign-out', { origin: plain.url, cookie: a.cookie });
    expect(out.status).toBe(200);
    expect(out.setCookie).toMatch(/^kslate_console=; Max-Age=0; Path=\/ui; HttpOnly; SameSite=Strict$/);
    expect((await rows()).length).toBe(before - 1);
    const replay = await page(plain.url, a.cookie);
    expect(replay.status).toBe(401);
    expect(replay.text).toContain('Your console session has ended');
    expect(replay.setCookie).toMatch(/^kslate_console=; Max-Age=0/);
  });

  test('when its key is removed from the key file: the next page refuses it and deletes the row', async () => {
    const a = await signIn(plain.url, KEYS.erin);
    expect((await page(plain.url, a.cookie)).status).toBe(200);
    expect(await rows('apikey:erin')).toHaveLength(1);
    writeKeys(['alice']);
    try {
      let last: Answer | undefined;
      await until(async () => (last = await page(plain.url, a.cookie)).status === 401, 'the revoked key is refused');
      expect(last!.text).toContain('Your credential is no longer accepted');
      expect(last!.setCookie).toMatch(/^kslate_console=; Max-Age=0/);
      expect(await rows('apikey:erin')).toHaveLength(0);
    } finally {
      writeKeys(['alice', 'erin']);
    }
  });

  test('at its lifetime (--ui-session-ttl), whether or not the sweep has run', async () => {
    const https = { 'x-forwarded-proto': 'https' };
    const a = await signIn(proxied.url, KEYS.alice, https);
    let last: Answer | undefined;
    await until(async () => (last = await page(proxied.url, a.cookie, https)).status === 401, 'the 2 s session expires');
    expect(last!.text).toContain('Your console session has ended');
  });

  test('when its identity signs in more than 32 times: the oldest sessions end', async () => {
    await client.query(`delete from console_sessions where author = 'apikey:erin'`);
    const first = await signIn(plain.url, KEYS.erin);
    for (let i = 0; i < 32; i++) await signIn(plain.url, KEYS.erin);
    expect(await rows('apikey:erin')).toHaveLength(32);
    expect((await page(plain.url, first.cookie)).status).toBe(401);
  });
});

describe('bounds', () => {
  test('the sweep deletes expired sessions and keeps live ones', async () => {
    const live = await signIn(plain.url, KEYS.alice);
    await client.query(`insert into console_sessions (id, author, sealed, expires_at)
                        select md5(g::text), 'apikey:gone', 'x', now() - interval '1 minute' from generate_series(1, 50) g`);
    const db = new PgDb(createPool({ connectionString: plain.db.url, max: 2 }));
    try {
      const report = await sweep({ db, log: quietLog, holder: 'test/sessions' }, { steps: ['sessions'] });
      expect(report.sessions?.purged).toBeGreaterThanOrEqual(50);
      expect(await rows('apikey:gone')).toHaveLength(0);
      expect((await page(plain.url, live.cookie)).status).toBe(200);
    } finally {
      await db.kysely.destroy();
    }
  });

  test('a cookie naming no session costs the rejected-credential budget, like a refused credential', async () => {
    const refused = async () => {
      const all = await plain.gw.services.metrics.registry.getMetricsAsJSON();
      const m = all.find((x) => x.name === 'svc_rejections_total') as { values: { labels: Record<string, string>; value: number }[] } | undefined;
      return (m?.values ?? []).filter((v) => v.labels.outcome === 'unauthenticated').reduce((n, v) => n + v.value, 0);
    };
    const bogus = `kslate_console=${randomBytes(32).toString('base64url')}`;
    const before = await refused();
    for (let i = 0; i < 5; i++) expect((await page(plain.url, bogus)).status).toBe(401);
    expect(await refused()).toBe(before + 5);
    // With the address's budget spent, the answer is 429 before any session is looked up.
    for (let i = 0; i < 400; i++) plain.gw.services.budget.spend('127.0.0.1');
    const limited = await page(plain.url, bogus);
    expect(limited.status).toBe(429);
    expect(limited.text).toContain('RATE_LIMITED');
  });
});
