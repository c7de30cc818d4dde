import { afterAll, beforeAll, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([incident]);
});
afterAll(() => t?.close());

test('put then get', async () => {
  const r1 = await t.call('alice', 'PUT', '/v1/records/incident/a1/fields/title', { value: 'hello', expected_version: 0 });
  expect(r1).toEqual({ status: 201, body: { record: 'incident/a1', field: 'title', version: 1, record_version: 1 } });
  const g = await t.call('alice', 'GET', '/v1/records/incident/a1');
  expect(g.status).toBe(200);
  expect(g.body.fields.title.value).toBe('hello');
});
