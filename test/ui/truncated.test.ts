/**
 * The console's timeline shows where class history retention purged rows (issue 37): in a
 * real headless Chromium (playwright-core with the Chromium that @sparticuz/chromium ships,
 * as test/ui/console.test.ts), against a real gateway and PostgreSQL whose sweep really
 * purged the rows. A record whose history was never purged has no note.
 */
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import chromium from '@sparticuz/chromium';
import pg from 'pg';
import { chromium as playwright, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { sweep } from '../../worker/sweep.js';
import { updateRows } from '../setup/db.js';
import { KEYS, quietLog, startTestGateway, type TestGateway } from '../setup/gateway.js';

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
const ACTION_MS = 20_000;
const roles = { crew: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } };

let t: TestGateway;
let browser: Browser;
let sql: pg.Client;
let db: PgDb;

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  t = await startTestGateway([{ name: 'notes', namespace: 'team-a', spec: { history: { maxAge: '1h' }, fields: { title: { kind: 'versioned' } }, roles } }]);
  sql = new pg.Client({ connectionString: t.db.url });
  await sql.connect();
  db = new PgDb(createPool({ connectionString: t.db.url, max: 2, timeoutMs: 60_000 }));
  // n-1: four versions of title, the first three two hours old; n-2: fresh, nothing to purge.
  for (let v = 0; v < 4; v++) {
    const r = await t.call('alice', 'PUT', '/v1/records/notes/n-1/fields/title', { value: `draft ${v + 1}`, expected_version: v });
    expect(r.status).toBeLessThan(300);
  }
  await updateRows(sql, 'history', `created_at = created_at - interval '2 hours'`, `class = 'notes' and rid = 'n-1' and version <= 3`);
  expect((await t.call('alice', 'PUT', '/v1/records/notes/n-2/fields/title', { value: 'fresh', expected_version: 0 })).status).toBe(201);
  const report = await sweep({ db, log: quietLog, holder: 'test/ui/truncated' }, { steps: ['retention'] });
  expect(report.retention!.purged.get('notes')).toBe(3);
  browser = await playwright.launch({
    executablePath: await chromium.executablePath(),
    args: chromium.args.filter((a) => a !== '--single-process'),
    headless: true,
    timeout: 60_000,
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await sql?.end();
  await db?.kysely.destroy();
  await t?.close();
});

async function signedIn(): Promise<Page> {
  const ctx = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  ctx.setDefaultTimeout(ACTION_MS);
  const page = await ctx.newPage();
  await page.goto(`${t.url}/ui`);
  await page.getByLabel('Credential').fill(KEYS.alice);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${t.url}/ui`);
  return page;
}

test('a timeline that reaches purged rows shows the retention note with its time; one that does not, none', async () => {
  const page = await signedIn();
  await page.goto(`${t.url}/ui/records/notes/n-1/history`);
  const note = page.getByRole('note').filter({ hasText: 'purged' });
  await note.waitFor({ state: 'visible' });
  const text = (await note.textContent())!.replace(/\s+/g, ' ');
  expect(text).toMatch(/Older attempts were purged by the class's history retention \(up to .+\)/);
  // The time shown is the newest purged row's, as HTTP's truncated_before says it.
  const api = await t.call('alice', 'GET', '/v1/records/notes/n-1/history');
  expect(api.body.truncated_before).toBeDefined();
  const shown = text.match(/\(up to ([^)]+)\)/)![1];
  expect(Date.parse(shown)).toBe(Date.parse(api.body.truncated_before));
  // The note sits above the timeline, which starts with what is left: the current value.
  const items = page.locator('ol.timeline > li');
  expect(await items.count()).toBe(1);
  expect(await items.first().textContent()).toContain('draft 4');
  expect(await page.evaluate(() => {
    const n = document.querySelector('p.truncated');
    const ol = document.querySelector('ol.timeline');
    return !!n && !!ol && (n.compareDocumentPosition(ol) & Node.DOCUMENT_POSITION_FOLLOWING) !== 0;
  })).toBe(true);
  await page.screenshot({ path: `${ARTIFACTS}history-truncated.png`, fullPage: true });

  await page.goto(`${t.url}/ui/records/notes/n-2/history`);
  await page.locator('ol.timeline > li').first().waitFor({ state: 'visible' });
  expect(await page.locator('p.truncated').count()).toBe(0);
  await page.context().close();
}, 90_000);
