/**
 * The web console (docs/console.md) in a real headless Chromium (playwright-core driving the
 * Chromium that @sparticuz/chromium ships inside its npm package; nothing is downloaded)
 * against a real gateway and PostgreSQL. One browser for the file; each test has its own
 * browser context (its own cookies). Screenshots of the main pages go to test/ui/artifacts/.
 */
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import chromium from '@sparticuz/chromium';
import { chromium as playwright, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { incident as incidentFixture } from '../fixtures/classes.js';
import { AUD, fakeIssuer, key, token } from '../identity/fake-issuer.js';
import { tasks } from '../fixtures/task-classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
/** Generous: the machine may be loaded; a browser action rarely takes long, but may. */
const ACTION_MS = 20_000;
const TEST_MS = 90_000;

/** The incident fixture plus an observer role for an OIDC identity. */
const incident = {
  ...incidentFixture,
  spec: {
    ...incidentFixture.spec,
    roles: { ...incidentFixture.spec.roles, observer: { subjects: ['oidc:ops-1'], read: ['title'], write: [] } },
  },
};

let t: TestGateway;
let issuer: Awaited<ReturnType<typeof fakeIssuer>>;
let oidcKey: Awaited<ReturnType<typeof key>>;
let browser: Browser;
/** Console errors and page errors seen on any page outside the CSP test. */
const consoleErrors: string[] = [];
const contexts: BrowserContext[] = [];

async function put(who: string, path: string, body: unknown): Promise<any> {
  return t.call(who, 'PUT', `/v1/records/${path}`, body);
}

/** A seed write that must apply. */
async function mustPut(who: string, path: string, body: unknown): Promise<void> {
  const r = await put(who, path, body);
  expect([200, 201], JSON.stringify(r.body)).toContain(r.status);
}

async function newPage(watchErrors = true): Promise<Page> {
  const ctx = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  contexts.push(ctx);
  ctx.setDefaultTimeout(ACTION_MS);
  const page = await ctx.newPage();
  if (watchErrors) {
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(`${page.url()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => consoleErrors.push(`${page.url()}: ${e.message}`));
  }
  return page;
}

async function signIn(page: Page, who: string): Promise<void> {
  await page.goto(`${t.url}/ui`);
  await page.getByLabel('Credential').fill(KEYS[who]);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${t.url}/ui`);
  await contains(page.locator('.who'), `apikey:${who}`);
}

/** Playwright's web-first assertions, for vitest: wait (up to ACTION_MS) until they hold. */
const poll = <T>(fn: () => Promise<T>) => expect.poll(fn, { timeout: ACTION_MS, interval: 100 });
async function contains(loc: Locator, text: string): Promise<void> {
  await poll(async () => (await loc.allTextContents()).join(' ')).toContain(text);
}
async function count(loc: Locator, n: number): Promise<void> {
  await poll(() => loc.count()).toBe(n);
}
async function hasText(loc: Locator, text: string): Promise<void> {
  await poll(async () => (await loc.textContent())?.trim()).toBe(text);
}
async function visible(loc: Locator): Promise<void> {
  await loc.first().waitFor({ state: 'visible', timeout: ACTION_MS });
}

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: `${ARTIFACTS}${name}.png`, fullPage: true });
}

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  issuer = await fakeIssuer();
  oidcKey = await key('k1');
  issuer.jwks.push(oidcKey.jwk);
  t = await startTestGateway([incident, tasks], {
    extraArgs: ['--identity', 'apikey,oidc', '--oidc-issuer', issuer.url, '--oidc-audience', AUD],
  });
  browser = await playwright.launch({
    executablePath: await chromium.executablePath(),
    // Without --single-process (one of the package's AWS Lambda flags): in one process, after
    // one context's 401 sign-in, other contexts' same-origin fetch and EventSource requests
    // went out without their SameSite=Strict cookie (navigations still had it).
    args: chromium.args.filter((a) => a !== '--single-process'),
    headless: true,
    timeout: 60_000,
  });

  // incident/db-1: two applied writes of title, then a STALE attempt by carol who read v1.
  await mustPut('alice', 'incident/db-1/fields/title', { value: 'Primary database unreachable', expected_version: 0 });
  await mustPut('alice', 'incident/db-1/fields/status', { value: 'open', expected_version: 0 });
  await mustPut('alice', 'incident/db-1/fields/severity', { value: 2, expected_version: 0, evidence: 'pager' });
  await mustPut('alice', 'incident/db-1/fields/title', {
    value: 'Primary database unreachable from eu-west',
    expected_version: 1,
    evidence: 'dashboards',
    invocation: { run: 'r-7' },
  });
  const stale = await put('carol', 'incident/db-1/fields/title', { value: 'Replica lag only', expected_version: 1 });
  expect(stale.status).toBe(409);
  expect(stale.body.error).toBe('STALE');
  // A STALE_PREMISE: carol's decision rests on severity v1, which alice then moves to v2.
  await mustPut('alice', 'incident/db-1/fields/severity', { value: 3, expected_version: 1 });
  const sp = await put('carol', 'incident/db-1/fields/status', {
    value: 'investigating',
    expected_version: 1,
    based_on: [{ field: 'severity', version: 1 }],
  });
  expect(sp.body.error).toBe('STALE_PREMISE');
  await mustPut('alice', 'incident/db-1/checkpoint', { document: { summary: 'DB down in eu-west', next_steps: 'fail over' } });

  // tasks/t-0: alice's 1 s lease lapses and bob takes it over; chore lapses unclaimed.
  await mustPut('alice', 'tasks/t-0/fields/title', { value: 'rotate keys', expected_version: 0 });
  expect((await t.call('alice', 'PUT', '/v1/records/tasks/t-0/fields/job/claim', { lease_seconds: 1 })).status).toBe(200);
  expect((await t.call('alice', 'PUT', '/v1/records/tasks/t-0/fields/chore/claim', { lease_seconds: 1 })).status).toBe(200);
  await new Promise((r) => setTimeout(r, 1500));
  const took = await t.call('bob', 'PUT', '/v1/records/tasks/t-0/fields/job/claim', { lease_seconds: 600 });
  expect(took.body.took_over_from).toBe('apikey:alice');
  // bob's write fenced on the lease he took over.
  await mustPut('bob', 'tasks/t-0/fields/title', {
    value: 'rotate keys (bob)',
    expected_version: 1,
    based_on: [{ field: 'job', version: 2, kind: 'fence' }],
  });
  // Five more records for paging.
  for (let i = 1; i <= 5; i++) await mustPut('alice', `tasks/t-${i}/fields/title`, { value: `task ${i}`, expected_version: 0 });
}, 120_000);

afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => undefined);
  await browser?.close();
  await t?.close();
  await issuer?.close();
});

describe('sign-in and sign-out', () => {
  test(
    'a wrong credential is refused with a clear message and no cookie',
    async () => {
      const page = await newPage(false); // the 401 is a resource error in the console by design
      await page.goto(`${t.url}/ui`);
      await shot(page, 'sign-in');
      await page.getByLabel('Credential').fill('not-a-key');
      const [res] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/ui/sign-in')), page.getByRole('button', { name: 'Sign in' }).click()]);
      expect(res.status()).toBe(401);
      await contains(page.getByRole('alert'), 'That credential was refused');
      expect(await page.context().cookies()).toEqual([]);
    },
    TEST_MS,
  );

  test(
    'sign in keeps an opaque session id (never the credential) in an HttpOnly SameSite=Strict cookie on /ui with a lifetime; sign out ends it',
    async () => {
      const page = await newPage();
      await signIn(page, 'alice');
      const cookies = await page.context().cookies();
      expect(cookies).toHaveLength(1);
      expect(cookies[0]).toMatchObject({ name: 'kslate_console', httpOnly: true, sameSite: 'Strict', path: '/ui', secure: false });
      expect(cookies[0].value).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(cookies[0].value).not.toContain(KEYS.alice);
      // A persistent cookie that lasts the session's lifetime (--ui-session-ttl, 8h), not a browser session's.
      const hoursLeft = (cookies[0].expires - Date.now() / 1000) / 3600;
      expect(hoursLeft).toBeGreaterThan(7);
      expect(hoursLeft).toBeLessThanOrEqual(8);
      // Not readable by scripts, not in the URL, not in localStorage.
      expect(await page.evaluate(() => document.cookie)).toBe('');
      expect(await page.evaluate(() => JSON.stringify(localStorage))).toBe('{}');
      expect(await page.evaluate(() => document.compatMode)).toBe('CSS1Compat'); // standards mode
      expect(page.url()).not.toContain(KEYS.alice);
      await visible(page.getByRole('link', { name: 'incident' }));
      await shot(page, 'classes');

      await page.getByRole('button', { name: 'Sign out' }).click();
      await visible(page.getByText('You are signed out.'));
      expect(await page.context().cookies()).toEqual([]);
      // Signing out ended the session on the server: a copy of the cookie no longer works.
      const copy = await newPage(false); // the 401 document logs a resource error by design
      await copy.context().addCookies([{ ...cookies[0] }]);
      const res = await copy.goto(`${t.url}/ui/classes/incident`);
      expect(res?.status()).toBe(401);
      await contains(copy.getByRole('alert'), 'Your console session has ended');
      expect(await copy.context().cookies()).toEqual([]);
      // Without the cookie a page sends the person to the sign-in form.
      await page.goto(`${t.url}/ui/classes/incident`);
      expect(page.url()).toBe(`${t.url}/ui/sign-in`);
      await visible(page.getByLabel('Credential'));
    },
    TEST_MS,
  );

  test(
    'a cookie naming no session (or holding a key, as before sessions) is cleared and the person asked to sign in again',
    async () => {
      const page = await newPage(false); // the 401 document logs a resource error by design
      await page.context().addCookies([{ name: 'kslate_console', value: KEYS.alice, domain: '127.0.0.1', path: '/ui', httpOnly: true, sameSite: 'Strict' }]);
      const res = await page.goto(`${t.url}/ui/classes/incident`);
      expect(res?.status()).toBe(401);
      await contains(page.getByRole('alert'), 'Your console session has ended');
      await visible(page.getByLabel('Credential'));
      expect(await page.context().cookies()).toEqual([]);
    },
    TEST_MS,
  );

  test(
    'an OIDC token signs in too, and its identity sees only its role\'s fields',
    async () => {
      const page = await newPage();
      await page.goto(`${t.url}/ui`);
      await page.getByLabel('Credential').fill(await token(oidcKey, { iss: issuer.url, sub: 'ops-1' }));
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${t.url}/ui`);
      await contains(page.locator('.who'), 'oidc:ops-1');
      await page.goto(`${t.url}/ui/records/incident/db-1`);
      await contains(page.locator('tr[data-field="title"]'), 'eu-west');
      await count(page.locator('tbody tr'), 1);
    },
    TEST_MS,
  );

  test('an empty or oversized credential is refused with what to do, before any provider is asked; a long token signs in', async () => {
    const post = (body: string) =>
      fetch(`${t.url}/ui/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { origin: t.url, 'content-type': 'application/x-www-form-urlencoded' },
        body,
      });
    const empty = await post('token=');
    expect(empty.status).toBe(400);
    expect(await empty.text()).toContain('Paste your credential');
    // The credential stays on the server, so a token longer than a browser keeps in a cookie
    // (an OIDC token with many claims) signs in.
    const long = await token(oidcKey, { iss: issuer.url, sub: 'ops-1', extra: { groups: Array.from({ length: 300 }, (_, i) => `group-${i}`) } });
    expect(long.length).toBeGreaterThan(4096);
    const signed = await post(`token=${encodeURIComponent(long)}`);
    expect(signed.status).toBe(303);
    expect(signed.headers.get('set-cookie')).toMatch(/^kslate_console=[A-Za-z0-9_-]{43};/);
    const huge = await post(`token=${'a'.repeat(20_000)}`);
    expect(huge.status).toBe(400);
    expect(await huge.text()).toContain('larger than 16 KiB');
    expect((await fetch(`${t.url}/ui/`, { redirect: 'manual' })).headers.get('location')).toBe('/ui');
  });

  test('a sign-in or sign-out POST from another origin is refused (403)', async () => {
    const cross: Record<string, string>[] = [
      { origin: 'https://evil.example' },
      { origin: 'null', 'sec-fetch-site': 'cross-site' },
      {}, // neither header: not a browser form of this origin
    ];
    for (const path of ['/ui/sign-in', '/ui/sign-out']) {
      for (const h of cross) {
        const res = await fetch(`${t.url}${path}`, {
          method: 'POST',
          headers: { ...h, 'content-type': 'application/x-www-form-urlencoded' },
          body: `token=${KEYS.alice}`,
        });
        expect(res.status, JSON.stringify(h)).toBe(403);
        expect(res.headers.get('set-cookie')).toBeNull();
      }
    }
    // The same POST from this origin signs in.
    const ok = await fetch(`${t.url}/ui/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { origin: t.url, 'content-type': 'application/x-www-form-urlencoded' },
      body: `token=${KEYS.alice}`,
    });
    expect(ok.status).toBe(303);
    expect(ok.headers.get('set-cookie')).toMatch(/^kslate_console=[A-Za-z0-9_-]{43}; Max-Age=28800; Path=\/ui; HttpOnly; SameSite=Strict$/);
  });
});

describe('pages', () => {
  test(
    'the class page shows kinds, types, enums, floors and what the role may read and write',
    async () => {
      const page = await newPage();
      await signIn(page, 'bob');
      await page.getByRole('link', { name: 'incident' }).first().click();
      const row = (f: string) => page.locator(`tr[data-field="${f}"]`);
      await contains(row('status'), '"open", "investigating", "resolved"');
      await contains(row('triage'), 'minIdentityStrength: sa-bound');
      await contains(row('notes'), 'requireEvidence');
      await contains(row('title'), 'read');
      await contains(row('severity'), 'no read');
      await contains(row('title'), 'no write');
    },
    TEST_MS,
  );

  test(
    'a reviewer does not see fields outside its read scope, on the record page nor in the timeline',
    async () => {
      const page = await newPage();
      await signIn(page, 'bob');
      await page.goto(`${t.url}/ui/records/incident/db-1`);
      await contains(page.locator('tr[data-field="title"]'), 'Primary database unreachable from eu-west');
      await count(page.locator('tr[data-field="severity"]'), 0);
      expect(await page.content()).not.toContain('pager'); // severity's evidence
      await page.goto(`${t.url}/ui/records/incident/db-1/history`);
      await visible(page.locator('ol.timeline > li').first());
      expect(await page.locator('ol.timeline > li', { hasText: 'severity' }).count()).toBe(0);
      // Asking for it directly: SCOPE_DENIED from the same handler as the API (a 403 document
      // logs a resource error in the console by design, so these pages are not watched).
      const denied = await newPage(false);
      await signIn(denied, 'bob');
      const res = await denied.goto(`${t.url}/ui/records/incident/db-1/history?field=severity`);
      expect(res?.status()).toBe(403);
      await contains(denied.getByRole('alert'), 'SCOPE_DENIED');
      // dave holds no role: NO_ROLE, as on every transport.
      const other = await newPage(false);
      await signIn(other, 'dave');
      const r2 = await other.goto(`${t.url}/ui/records/incident/db-1`);
      expect(r2?.status()).toBe(403);
      await contains(other.getByRole('alert'), 'NO_ROLE');
    },
    TEST_MS,
  );

  test(
    'the record page: fields with version, author, strength, evidence, invocation; checkpoints with changed_fields',
    async () => {
      const page = await newPage();
      await signIn(page, 'alice');
      await page.goto(`${t.url}/ui/records/incident/db-1`);
      const title = page.locator('tr[data-field="title"]');
      await hasText(title.locator('[data-k="version"]'), '2');
      await hasText(title.locator('[data-k="author"]'), 'apikey:alice');
      await hasText(title.locator('[data-k="identity_strength"]'), 'shared-secret');
      await contains(title, 'dashboards');
      await contains(title, '"run": "r-7"');
      await contains(page.getByRole('region', { name: 'Checkpoint of role responder' }), 'DB down in eu-west');
      await shot(page, 'record');
    },
    TEST_MS,
  );

  test(
    "live: another client's write shows on an open record page without a reload, as that identity may see it",
    async () => {
      await mustPut('alice', 'incident/live-1/fields/title', { value: 'Before', expected_version: 0 });
      await mustPut('alice', 'incident/live-1/fields/severity', { value: 2, expected_version: 0 });
      const page = await newPage();
      await signIn(page, 'bob'); // a reviewer: reads title, not severity
      await page.goto(`${t.url}/ui/records/incident/live-1`);
      const title = page.locator('tr[data-field="title"]');
      await contains(title.locator('[data-k="value"]'), 'Before');
      const loadedAt = await page.evaluate(() => performance.timeOrigin);
      // Another agent writes: a field bob may read, then one he may not.
      await mustPut('alice', 'incident/live-1/fields/title', { value: 'After, live', expected_version: 1 });
      await contains(title.locator('[data-k="value"]'), 'After, live');
      await hasText(title.locator('[data-k="version"]'), '2');
      await visible(page.locator('#live-note'));
      await contains(page.locator('#live-note'), 'title changed (put by apikey:alice)');
      await mustPut('alice', 'incident/live-1/fields/severity', { value: 3, expected_version: 1 });
      await mustPut('alice', 'incident/live-1/fields/title', { value: 'Third', expected_version: 2 });
      await contains(title.locator('[data-k="value"]'), 'Third');
      // The severity change never reached the page: its last note is about title.
      await contains(page.locator('#live-note'), 'title changed');
      expect(await page.locator('tr[data-field="severity"]').count()).toBe(0);
      expect(await page.evaluate(() => performance.timeOrigin)).toBe(loadedAt); // no reload
    },
    TEST_MS,
  );

  test(
    'live: a change re-renders the field, the record version and the checkpoint exactly as a reload would',
    async () => {
      await mustPut('alice', 'incident/live-2/fields/severity', { value: 2, expected_version: 0 });
      await mustPut('alice', 'incident/live-2/fields/blob', { value: { step: 1 }, expected_version: 0, evidence: 'first look' });
      await mustPut('alice', 'incident/live-2/checkpoint', { document: { summary: 'looking', next_steps: 'wait' } });
      const page = await newPage();
      await signIn(page, 'alice');
      await page.goto(`${t.url}/ui/records/incident/live-2`);
      const blob = page.locator('tr[data-field="blob"]');
      await hasText(blob.locator('[data-k="version"]'), '1');
      let loadedAt = await page.evaluate(() => performance.timeOrigin);
      const snapshot = () =>
        page.evaluate(() => ({
          rows: Array.from(document.querySelectorAll('main tbody tr')).map((r) => r.outerHTML),
          version: Array.from(document.querySelectorAll('main p')).find((p) => p.textContent?.startsWith('Record version'))?.outerHTML,
          checkpoint: document.querySelector('section[aria-label="Checkpoint of role responder"]')?.outerHTML,
        }));
      /** What the page shows after `write`, once `row` shows `version`, against the reloaded page. */
      const liveThenReload = async (write: () => Promise<void>, row: string, version: string) => {
        await write();
        await hasText(page.locator(`tr[data-field="${row}"] [data-k="version"]`), version);
        expect(await page.evaluate(() => performance.timeOrigin)).toBe(loadedAt); // no reload
        const live = await snapshot();
        await page.reload();
        loadedAt = await page.evaluate(() => performance.timeOrigin);
        return { live, reloaded: await snapshot() };
      };
      // carol writes blob with new evidence, premises and invocation.
      const one = await liveThenReload(
        () =>
          mustPut('carol', 'incident/live-2/fields/blob', {
            value: { step: 2, hosts: ['db-1', 'db-2'] },
            expected_version: 1,
            evidence: 'replica logs',
            based_on: [{ field: 'severity', version: 1 }],
            invocation: { run: 'r-9' },
          }),
        'blob',
        '2',
      );
      expect(one.reloaded.rows.find((r) => r.includes('data-field="blob"'))).toContain('replica logs');
      expect(one.reloaded.checkpoint).toContain('blob v2 by apikey:carol');
      expect(one.reloaded.version).toContain('<strong>3</strong>');
      expect(one.live).toEqual(one.reloaded);
      // A field the page had no row for yet appears, as on a reload.
      const two = await liveThenReload(() => mustPut('carol', 'incident/live-2/fields/status', { value: 'investigating', expected_version: 0 }), 'status', '1');
      expect(two.reloaded.version).toContain('<strong>4</strong>');
      expect(two.live).toEqual(two.reloaded);
    },
    TEST_MS,
  );

  test(
    'a task field shows its owner and a ticking countdown; a lapsed lease is flagged',
    async () => {
      const page = await newPage();
      await signIn(page, 'alice');
      await page.goto(`${t.url}/ui/records/tasks/t-0`);
      const job = page.locator('tr[data-field="job"]');
      await contains(job, 'held by apikey:bob');
      const left = job.locator('.left');
      const first = await left.textContent();
      expect(first).toMatch(/^(9|10)m \d+s$/);
      await expect.poll(() => left.textContent(), { timeout: ACTION_MS }).not.toBe(first);
      await contains(page.locator('tr[data-field="chore"]'), 'lease lapsed');
    },
    TEST_MS,
  );

  test(
    'the timeline shows a STALE attempt with its diff, the STALE_PREMISE premises that moved, and filters by outcome',
    async () => {
      const page = await newPage();
      await signIn(page, 'alice');
      await page.goto(`${t.url}/ui/records/incident/db-1`);
      await page.getByRole('link', { name: 'History timeline' }).click();
      const stale = page.locator('li[data-outcome="stale"]');
      await count(stale, 1);
      await contains(stale, 'rejected: STALE');
      await contains(stale, 'title had moved to v2 (by apikey:alice)');
      await contains(stale.locator('del'), '"Primary database unreachable from eu-west"');
      await contains(stale.locator('ins'), '"Replica lag only"');
      const sp = page.locator('li[data-outcome="stale_premise"]');
      await contains(sp, 'severity: cited v1, then v2 by apikey:alice');
      await contains(sp.locator('del'), '2');
      await contains(sp.locator('ins'), '3');
      // Applied rows come first in time and are labelled as such.
      await contains(page.locator('ol.timeline > li').first(), 'applied');
      await shot(page, 'history');

      await page.getByLabel('Outcome').selectOption('rejected');
      await page.getByRole('button', { name: 'Filter' }).click();
      await count(page.locator('ol.timeline > li'), 2);
      expect(page.url()).toContain('outcome=rejected');
      await page.getByLabel('Author').selectOption('apikey:alice');
      await page.getByRole('button', { name: 'Filter' }).click();
      await count(page.locator('ol.timeline > li'), 0);
    },
    TEST_MS,
  );

  test(
    'a takeover of a task field is marked in the timeline',
    async () => {
      const page = await newPage();
      await signIn(page, 'alice');
      await page.goto(`${t.url}/ui/records/tasks/t-0/history?field=job`);
      const take = page.locator('ol.timeline > li', { hasText: 'takeover from apikey:alice' });
      await count(take, 1);
      await contains(take, 'by apikey:bob');
      // Without the field filter the fenced write is marked too.
      await page.goto(`${t.url}/ui/records/tasks/t-0/history`);
      await contains(page.locator('ol.timeline > li', { hasText: 'put title' }), 'fenced on job v2');
    },
    TEST_MS,
  );

  test(
    'records of a class: query by field value and paging with the cursor',
    async () => {
      const page = await newPage();
      await signIn(page, 'alice');
      await page.goto(`${t.url}/ui/classes/tasks/records`);
      await page.getByLabel('per page').fill('2');
      await page.getByRole('button', { name: 'Query' }).click();
      const ids = () => page.locator('tbody th[scope="row"] a').allTextContents();
      expect(await ids()).toEqual(['t-0', 't-1']);
      await shot(page, 'records');
      await page.getByRole('link', { name: 'Next page' }).click();
      expect(await ids()).toEqual(['t-2', 't-3']);
      await page.getByRole('link', { name: 'Next page' }).click();
      expect(await ids()).toEqual(['t-4', 't-5']);
      await count(page.getByRole('link', { name: 'Next page' }), 0);
      await page.getByRole('link', { name: 'First page' }).click();
      expect(await ids()).toEqual(['t-0', 't-1']);
      // Empty boxes (as a form sends them) are no filter and no cursor.
      await page.goto(`${t.url}/ui/classes/tasks/records?title=&job=&limit=2&after=`);
      expect(await ids()).toEqual(['t-0', 't-1']);
      // A cursor that is not one: the query's own MALFORMED, shown on the page (a 400 document
      // logs a resource error by design, so this page is not watched).
      const unwatched = await newPage(false);
      await signIn(unwatched, 'alice');
      const bad = await unwatched.goto(`${t.url}/ui/classes/tasks/records?after=nonsense`);
      expect(bad?.status()).toBe(400);
      await contains(unwatched.getByRole('alert'), 'MALFORMED');

      await page.goto(`${t.url}/ui/classes/tasks/records`);
      await page.getByLabel('title').fill('task 3');
      await page.getByRole('button', { name: 'Query' }).click();
      expect(await ids()).toEqual(['t-3']);
      await page.goto(`${t.url}/ui/classes/tasks/records`);
      await page.getByLabel('job').fill('apikey:bob');
      await page.getByRole('button', { name: 'Query' }).click();
      expect(await ids()).toEqual(['t-0']);
    },
    TEST_MS,
  );

  test(
    'keyboard: Tab reaches the skip link, the main links and sign-out, with a visible focus ring',
    async () => {
      const page = await newPage();
      await signIn(page, 'alice');
      const reached: string[] = [];
      for (let i = 0; i < 8; i++) {
        await page.keyboard.press('Tab');
        reached.push(await page.evaluate(() => (document.activeElement as HTMLElement | null)?.textContent?.trim() ?? ''));
      }
      expect(reached.slice(0, 4)).toEqual(['Skip to content', 'kslate console', 'Classes', 'Sign out']);
      expect(reached).toContain('incident');
      expect(reached).toContain('tasks');
      const outline = await page.evaluate(() => getComputedStyle(document.activeElement as Element).outlineStyle);
      expect(outline).toBe('solid');
      // Enter follows the focused link.
      await page.getByRole('link', { name: 'incident' }).first().focus();
      await page.keyboard.press('Enter');
      await page.waitForURL(`${t.url}/ui/classes/incident`);
    },
    TEST_MS,
  );

  test(
    'readable at 200% zoom: no horizontal scrolling of the page at half the width',
    async () => {
      const page = await newPage();
      await page.setViewportSize({ width: 640, height: 800 });
      await signIn(page, 'alice');
      for (const path of ['/ui/records/incident/db-1/history', '/ui/classes/incident']) {
        await page.goto(`${t.url}${path}`);
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
        expect(overflow, path).toBeLessThanOrEqual(0);
      }
    },
    TEST_MS,
  );
});

describe('without JavaScript', () => {
  test(
    'sign-in, the pages, the countdown text and the timeline filters all work with scripts off',
    async () => {
      const ctx = await browser.newContext({ javaScriptEnabled: false });
      contexts.push(ctx);
      ctx.setDefaultTimeout(ACTION_MS);
      const page = await ctx.newPage();
      await signIn(page, 'alice');
      await page.goto(`${t.url}/ui/records/tasks/t-0`);
      await contains(page.locator('tr[data-field="job"] .countdown'), 'expires in');
      await page.goto(`${t.url}/ui/records/incident/db-1/history`);
      await page.getByLabel('Outcome').selectOption('stale');
      await page.getByRole('button', { name: 'Filter' }).click();
      await count(page.locator('ol.timeline > li'), 1);
      await contains(page.locator('ol.timeline > li ins'), 'Replica lag only');
    },
    TEST_MS,
  );
});

describe('security headers and CSP', () => {
  test(
    'the CSP blocks an injected inline script',
    async () => {
      const page = await newPage(false); // the violation is reported to the console by design
      await signIn(page, 'alice');
      const outcome = await page.evaluate(async () => {
        const violations: string[] = [];
        document.addEventListener('securitypolicyviolation', (e) => violations.push(e.violatedDirective));
        const s = document.createElement('script');
        s.textContent = 'window.__injected = true;';
        document.body.appendChild(s);
        await new Promise((r) => setTimeout(r, 200));
        return { ran: (window as any).__injected === true, violations };
      });
      expect(outcome.ran).toBe(false);
      expect(outcome.violations.some((d) => d.startsWith('script-src'))).toBe(true);
    },
    TEST_MS,
  );

  test('pages carry the CSP and companions; assets are content-hashed and immutable', async () => {
    const res = await fetch(`${t.url}/ui`);
    expect(res.headers.get('content-security-policy')).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('cache-control')).toBe('no-store');
    const html = await res.text();
    expect(html.startsWith('<!DOCTYPE html><html lang="en">')).toBe(true);
    const css = /href="(\/ui\/assets\/console\.[0-9a-f]{8}\.css)"/.exec(html)?.[1];
    const js = /src="(\/ui\/assets\/console\.[0-9a-f]{8}\.js)"/.exec(html)?.[1];
    expect(css).toBeTruthy();
    expect(js).toBeTruthy();
    expect(html).not.toMatch(/<script>|<style|style="/);
    for (const path of [css!, js!]) {
      const a = await fetch(`${t.url}${path}`);
      expect(a.status).toBe(200);
      expect(a.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    }
    expect((await fetch(`${t.url}/ui/assets/console.00000000.css`)).status).toBe(404);
  });

  test('values are escaped: a record id or value with markup renders as text', async () => {
    await mustPut('alice', 'tasks/x-1/fields/title', { value: '<img src=x onerror=alert(1)>', expected_version: 0 });
    const page = await newPage();
    await signIn(page, 'alice');
    await page.goto(`${t.url}/ui/records/tasks/x-1`);
    await hasText(page.locator('tr[data-field="title"] pre'), '"<img src=x onerror=alert(1)>"');
    expect(await page.locator('img').count()).toBe(0);
  }, TEST_MS);
});

describe('no console errors on any page', () => {
  test('every page visited by the tests above logged no error', () => {
    expect(consoleErrors).toEqual([]);
  });
});

describe('--ui=false', () => {
  test('the console is not served; the API is unchanged', async () => {
    const off = await startTestGateway([incident, tasks], { db: t.db, extraArgs: ['--ui=false'] });
    try {
      expect((await fetch(`${off.url}/ui`)).status).toBe(404);
      expect((await off.call('alice', 'GET', '/v1/records/incident/db-1')).status).toBe(200);
    } finally {
      await off.close();
    }
  });
});
