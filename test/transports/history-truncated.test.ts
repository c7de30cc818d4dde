/**
 * Readers see where retention cut a history (issue 37): a page that reaches purged rows says
 * `truncated_before` on HTTP, MCP (the history resource) and gRPC, with real clients; a page
 * entirely newer than every purged row does not.
 */
import * as grpc from '@grpc/grpc-js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { loadSvcProto } from '../../runtime/grpc/proto.js';
import type { ProtoGrpcType } from '../../runtime/grpc/generated/svc.js';
import type { HistoryResult__Output } from '../../runtime/grpc/generated/svc/v1/HistoryResult.js';
import type { SvcServiceClient } from '../../runtime/grpc/generated/svc/v1/SvcService.js';
import { sweep } from '../../worker/sweep.js';
import { KEYS, quietLog, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';

const proto = grpc.loadPackageDefinition(loadSvcProto()) as unknown as ProtoGrpcType;
let t: TestGateway;
let sql: pg.Client;
let db: PgDb;
let grpcClient: SvcServiceClient;
let mcp: Client;

beforeAll(async () => {
  t = await startTestGateway(
    [
      {
        name: 'notes',
        namespace: 'team-a',
        spec: {
          // maxAge and rejectedMaxAge purge nothing written by these tests; keepLast does.
          history: { keepLast: 2, maxAge: '30d', rejectedMaxAge: '7d' },
          maxTtl: '1d',
          fields: { a: { kind: 'versioned' } },
          roles: { crew: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
        },
      },
    ],
    { extraArgs: ['--grpc-port', String(await freePort())] },
  );
  sql = new pg.Client({ connectionString: t.db.url });
  await sql.connect();
  db = new PgDb(createPool({ connectionString: t.db.url, max: 2, timeoutMs: 60_000 }));
  grpcClient = new proto.svc.v1.SvcService(`127.0.0.1:${t.gw.grpcPort}`, grpc.credentials.createInsecure());
  mcp = new Client({ name: 'kslate-test', version: '0.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${KEYS.alice}` } } }));
}, 120_000);
afterAll(async () => {
  await mcp?.close();
  grpcClient?.close();
  await sql?.end();
  await db?.kysely.destroy();
  await t?.close();
});

function grpcHistory(req: { record: string; limit?: number }): Promise<HistoryResult__Output> {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${KEYS.alice}`);
  return new Promise((resolve, reject) => grpcClient.History(req, md, (err, res) => (err ? reject(err) : resolve(res!))));
}

test('the class definition shows its retention and maxTtl as written, on HTTP and as the MCP class resource', async () => {
  const http = await t.call('alice', 'GET', '/v1/classes/notes');
  expect(http.status).toBe(200);
  expect(http.body).toMatchObject({ history: { keepLast: 2, maxAge: '30d', rejectedMaxAge: '7d' }, maxTtl: '1d' });
  const res: any = await mcp.readResource({ uri: 'kslate://classes/notes' });
  expect(JSON.parse(res.contents[0].text)).toEqual(http.body);
});

test('a history page reaching purged rows says truncated_before on HTTP, MCP and gRPC', async () => {
  for (let i = 0; i < 5; i++) {
    expect((await t.call('alice', 'PUT', '/v1/records/notes/n1/fields/a', { value: i, expected_version: i })).status).toBeLessThan(300);
  }
  // Before any purge: no marker anywhere.
  const before = await t.call('alice', 'GET', '/v1/records/notes/n1/history');
  expect(before.body.history).toHaveLength(5);
  expect(before.body).not.toHaveProperty('truncated_before');

  const report = await sweep({ db, log: quietLog, holder: 'test/truncated' });
  expect(report.retention!.purged.get('notes')).toBe(3);
  const newestPurged = (await sql.query(`select before from history_purged where class = 'notes' and rid = 'n1'`)).rows[0].before as Date;

  const http = await t.call('alice', 'GET', '/v1/records/notes/n1/history');
  expect(http.status).toBe(200);
  expect(http.body.history.map((r: any) => r.version)).toEqual([5, 4]);
  expect(Math.abs(Date.parse(http.body.truncated_before) - newestPurged.getTime())).toBeLessThanOrEqual(1);
  // A first page that stops above every purged row has no marker; the next one does.
  const first = await t.call('alice', 'GET', '/v1/records/notes/n1/history?limit=1');
  expect(first.body).not.toHaveProperty('truncated_before');
  const second = await t.call('alice', 'GET', `/v1/records/notes/n1/history?limit=1&before=${encodeURIComponent(first.body.next_before)}`);
  expect(second.body.truncated_before).toBe(http.body.truncated_before);

  const res: any = await mcp.readResource({ uri: 'kslate://records/notes/n1/history' });
  const viaMcp = JSON.parse(res.contents[0].text);
  expect(viaMcp.truncated_before).toBe(http.body.truncated_before);

  const viaGrpc = await grpcHistory({ record: 'notes/n1' });
  expect(viaGrpc.history.map((e) => Number(e.version))).toEqual([5, 4]);
  expect(viaGrpc.truncated_before).toBe(http.body.truncated_before);
  const grpcFirst = await grpcHistory({ record: 'notes/n1', limit: 1 });
  expect(grpcFirst.truncated_before).toBeUndefined();
});
