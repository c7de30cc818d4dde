/**
 * Watch streams on the Workers adapter (issue 16): a request there has no process outliving
 * it to poll the change log, so both watch routes answer a documented 404 NOT_FOUND naming the
 * Node gateway, after the same credential and class checks as on Node.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { startTestGateway } from '../setup/gateway.js';
import { APIKEYS_YAML, startWorker, type TestWorker } from './miniflare.js';

let db: TestDb;
let worker: TestWorker;

beforeAll(async () => {
  db = await freshDatabase();
  // The Node gateway reconciles the class into the database the Worker reads.
  const gw = await startTestGateway([incident], { db });
  await gw.call('alice', 'PUT', '/v1/records/incident/w1/fields/title', { value: 'a', expected_version: 0 });
  await gw.close();
  worker = await startWorker({ DATABASE_URL: db.url, KSLATE_APIKEYS: APIKEYS_YAML });
});

afterAll(async () => {
  await worker?.close();
  await db?.drop();
});

test('both watch routes answer 404 NOT_FOUND naming the Node gateway; credentials are still checked first', async () => {
  for (const path of ['/v1/records/incident/w1/watch', '/v1/classes/incident/watch']) {
    const r = await worker.call('alice', 'GET', path);
    expect(r.status, path).toBe(404);
    expect(r.body).toMatchObject({ error: 'NOT_FOUND' });
    expect(r.body.message).toContain('Cloudflare Workers');
    expect(r.body.message).toContain('kslate serve');
    expect((await worker.call(null, 'GET', path)).status).toBe(401);
  }
  // The rest of the API is unchanged there.
  expect((await worker.call('alice', 'GET', '/v1/records/incident/w1')).status).toBe(200);
});

test('MCP sessions (/mcp/session, resource subscriptions) answer 404 NOT_FOUND there too; /mcp is unchanged', async () => {
  for (const method of ['POST', 'GET', 'DELETE']) {
    const r = await worker.call('alice', method, '/mcp/session', method === 'POST' ? { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} } : undefined);
    expect(r.status, method).toBe(404);
    expect(r.body).toMatchObject({ error: 'NOT_FOUND' });
    expect(r.body.message).toContain('kslate serve');
    expect((await worker.call(null, method, '/mcp/session')).status).toBe(401);
  }
});
