/**
 * gRPC errors travel in trailers, which HTTP/2 clients cap (Node's default header list is
 * 64 KiB; many clients allow less): an error body must never outgrow them, or the client's
 * channel breaks and every later call on it hangs. A STALE answer about a large value keeps
 * its keys but leaves the large ones out, saying so; HTTP and MCP still carry them whole.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { grpcAdapter, type Adapter } from './clients.js';

let t: TestGateway;
let g: Adapter;
beforeAll(async () => {
  t = await startTestGateway([incident], { extraArgs: ['--grpc-port', String(await freePort())] });
  g = grpcAdapter(`127.0.0.1:${t.gw.grpcPort}`);
});
afterAll(async () => {
  await g?.close();
  await t?.close();
});

it('STALE on a 1 MiB value: the gRPC error arrives (large keys left out, said so) and the channel keeps working', async () => {
  const big = 'v'.repeat(1024 * 1024);
  expect((await t.call('alice', 'PUT', '/v1/records/incident/big1/fields/blob', { value: big, expected_version: 0 })).status).toBe(201);
  const http = await t.call('alice', 'PUT', '/v1/records/incident/big1/fields/blob', { value: 'mine', expected_version: 0 });
  expect(http.body.current_value).toBe(big);

  const stale = await Promise.race([
    g.run('alice', 'put', { record: 'incident/big1', field: 'blob', value: 'mine', expected_version: 0 }),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the gRPC call never answered')), 10_000)),
  ]);
  expect(stale.code).toBe('STALE');
  const body = stale.body as Record<string, unknown>;
  expect(body).toMatchObject({ error: 'STALE', field: 'blob', your_version: 0, current_version: 1, current_author: 'apikey:alice' });
  expect(body.current_value).toBeNull();
  expect(body.omitted).toEqual(expect.arrayContaining(['current_value']));
  expect(String(body.message)).toMatch(/left out/);
  // The same channel still answers.
  expect((await g.run('alice', 'get', { record: 'incident/big1', fields: ['title'] })).code).toBe('OK');
}, 30_000);
