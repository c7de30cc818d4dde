/**
 * Database unreachable (interface "Errors": UNAVAILABLE 503 "database unreachable"): with its
 * PostgreSQL stopped the gateway stays up and answers 503 UNAVAILABLE (never 500), /readyz
 * is 503; when the same PostgreSQL comes back, the gateway reconnects by itself.
 *
 * This file runs a PRIVATE embedded PostgreSQL that it can stop; the shared test server is
 * never touched.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedDb } from '../../runtime/dev.js';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, quietLog, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';

let dir: string;
let port: number;
let pgServer: EmbeddedDb | undefined;
let t: TestGateway | undefined;

async function getJson(url: string): Promise<{ status: number; body: any }> {
  const res = await fetch(url);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* keep text */
  }
  return { status: res.status, body };
}

async function until<T>(what: string, fn: () => Promise<T>, ok: (v: T) => boolean, ms: number): Promise<T> {
  const end = Date.now() + ms;
  let last: T | undefined;
  while (Date.now() < end) {
    last = await fn();
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} did not happen within ${ms} ms; last: ${JSON.stringify(last)}`);
}

function expectUnavailable(r: { status: number; body: any }) {
  expect(r.status).toBe(503);
  expect(r.body).toMatchObject({ error: 'UNAVAILABLE' });
  expect(typeof r.body.message).toBe('string');
  expect(r.body.message.length).toBeGreaterThan(0);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kslate-dbdown-'));
  port = await freePort();
  // persistent: true so that stop() keeps the data directory for the restart.
  pgServer = await startEmbeddedPostgres(dir, port, quietLog, true);
  const url = pgServer.url;
  // The 'kslate' database starts empty: the gateway applies the schema at start.
  t = await startTestGateway([incident], { db: { url, name: 'kslate', drop: async () => undefined } });
}, 90_000);

afterAll(async () => {
  await t?.close().catch(() => undefined);
  await pgServer?.stop().catch(() => undefined);
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

it('answers 503 UNAVAILABLE while PostgreSQL is down and recovers by itself when it is back', async () => {
  const gw = t!;
  const put1 = await gw.call('alice', 'PUT', '/v1/records/incident/kept/fields/title', { value: 'survives', expected_version: 0 });
  expect(put1).toEqual({ status: 201, body: { record: 'incident/kept', field: 'title', version: 1, record_version: 1 } });
  expect((await getJson(gw.url + '/readyz')).status).toBe(200);

  // Stop the database under the gateway (idle pool clients lose their server: the pool's
  // 'error' events must not crash this process).
  await pgServer!.stop();
  pgServer = undefined;

  // Let the class cache (one second) expire too, so reads cannot be answered from memory.
  await new Promise((r) => setTimeout(r, 1_200));

  expectUnavailable(await gw.call('alice', 'GET', '/v1/records/incident/kept'));
  expectUnavailable(await gw.call('alice', 'PUT', '/v1/records/incident/kept/fields/title', { value: 'no', expected_version: 1 }));
  expectUnavailable(await gw.call('alice', 'PUT', '/v1/records/incident/new/fields/title', { value: 'no', expected_version: 0 }));
  expectUnavailable(await gw.call('alice', 'GET', '/v1/classes'));
  expectUnavailable(await getJson(gw.url + '/readyz'));
  expectUnavailable(await getJson(gw.gw.metricsUrl + '/readyz'));
  // Still up and still answering (a second round, no crash in between).
  expectUnavailable(await gw.call('alice', 'GET', '/v1/records/incident/kept'));
  // Authentication does not need the database: a bad credential is still 401.
  expect((await gw.call('nobody-key', 'GET', '/v1/records/incident/kept')).status).toBe(401);

  // The same PostgreSQL again: same data directory, same port.
  pgServer = await startEmbeddedPostgres(dir, port, quietLog, true);

  const got = await until(
    'GET after the database came back',
    () => gw.call('alice', 'GET', '/v1/records/incident/kept'),
    (r) => r.status !== 503,
    15_000,
  );
  expect(got.status).toBe(200);
  expect(got.body.fields.title.value).toBe('survives');
  expect(got.body.fields.title.version).toBe(1);

  const put2 = await gw.call('alice', 'PUT', '/v1/records/incident/kept/fields/title', { value: 'again', expected_version: 1 });
  expect(put2).toEqual({ status: 200, body: { record: 'incident/kept', field: 'title', version: 2, record_version: 2 } });
  // Nothing was written while the database was down.
  expect((await gw.call('alice', 'GET', '/v1/records/incident/new')).status).toBe(404);
  expect((await getJson(gw.url + '/readyz')).status).toBe(200);
  expect((await getJson(gw.gw.metricsUrl + '/readyz')).status).toBe(200);
}, 60_000);
