/**
 * One failed request, one log line (issue 32): a request answered 503 UNAVAILABLE because the
 * database is unreachable logs one warning, though its error passes invoke, Caller.run and
 * the transport, each mapping it (handlers/index.ts asSvcError). The gateway reaches the
 * shared test PostgreSQL through a TCP relay this file owns; closing the relay takes the
 * database away from this gateway alone.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { Logger } from '../../handlers/context.js';
import { incident } from '../fixtures/classes.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

interface Line {
  level: string;
  msg: string;
  data?: Record<string, unknown>;
}
const lines: Line[] = [];
const log: Logger = {
  debug: () => undefined,
  info: (msg, data) => lines.push({ level: 'info', msg, data }),
  warn: (msg, data) => lines.push({ level: 'warn', msg, data }),
  error: (msg, data) => lines.push({ level: 'error', msg, data }),
};

let db: TestDb;
let relay: Server;
const sockets = new Set<Socket>();
let t: TestGateway;

beforeAll(async () => {
  db = await freshDatabase();
  const target = new URL(db.url);
  relay = createServer((client) => {
    const server = connect(Number(target.port || 5432), target.hostname);
    for (const s of [client, server]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(server).pipe(client);
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  const port = (relay.address() as { port: number }).port;
  const url = new URL(db.url);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  t = await startTestGateway([incident], { db: { ...db, url: url.toString(), drop: async () => undefined }, log });
}, 60_000);

afterAll(async () => {
  await t?.close().catch(() => undefined);
  relay?.close();
  for (const s of sockets) s.destroy();
  await db?.drop();
});

test('a request answered UNAVAILABLE logs one warning', async () => {
  const put = await t.call('alice', 'PUT', '/v1/records/incident/u1/fields/title', { value: 'up', expected_version: 0 });
  expect(put.status).toBe(201);
  // The database goes away: no new connection, every open one cut.
  await new Promise<void>((r) => {
    relay.close(() => r());
    for (const s of sockets) s.destroy();
  });
  const id = 'unavailable-once';
  const res = await t.call('alice', 'PUT', '/v1/records/incident/u1/fields/title', { value: 'down', expected_version: 1 }, { 'x-request-id': id });
  expect(res.status).toBe(503);
  expect(res.body.error).toBe('UNAVAILABLE');
  const mine = lines.filter((l) => l.data?.request_id === id && l.level !== 'info');
  expect(mine, JSON.stringify(mine)).toHaveLength(1);
  expect(mine[0]).toMatchObject({ level: 'warn', msg: res.body.message });
}, 60_000);
