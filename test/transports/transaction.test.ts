/**
 * Transactions (issue 33 item 2) on every transport: HTTP (fetch), MCP (the SDK's client,
 * tool svc_transaction) and gRPC (grpc-js, RPC Transact). The same transaction gets the same
 * answer: applied with one record_version, or the failing write's own error body plus `index`
 * with nothing written; a malformed one is MALFORMED with the same message.
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { tasks } from '../fixtures/task-classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { grpcErrorBody } from './clients.js';

type Answer = { code: string; body: any };
type Transact = (record: string, body: Record<string, any>) => Promise<Answer>;

let t: TestGateway;
let mcp: Client;
let grpcClient: grpc.Client & Record<string, Function>;

beforeAll(async () => {
  t = await startTestGateway([tasks], { extraArgs: ['--grpc-port', String(await freePort())] });
  mcp = new Client({ name: 'kslate-txn-test', version: '0.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${KEYS.alice}` } } }));
  const def = protoLoader.loadSync(['svc/v1/svc.proto', 'google/rpc/status.proto'], {
    includeDirs: [fileURLToPath(new URL('../../proto/', import.meta.url))],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const Svc = (grpc.loadPackageDefinition(def) as any).svc.v1.SvcService;
  grpcClient = new Svc(`127.0.0.1:${t.gw.grpcPort}`, grpc.credentials.createInsecure());
});
afterAll(async () => {
  await mcp?.close();
  grpcClient?.close();
  await t?.close();
});

/** A JSON value as google.protobuf.Value (the well-known types keep their camelCase names). */
function pbValue(x: unknown): unknown {
  if (x === null) return { nullValue: 'NULL_VALUE' };
  if (typeof x === 'string') return { stringValue: x };
  if (typeof x === 'number') return { numberValue: x };
  if (typeof x === 'boolean') return { boolValue: x };
  if (Array.isArray(x)) return { listValue: { values: x.map(pbValue) } };
  return { structValue: { fields: Object.fromEntries(Object.entries(x as object).map(([k, v]) => [k, pbValue(v)])) } };
}

const http: Transact = async (record, body) => {
  const r = await t.call('alice', 'POST', `/v1/records/${record}/transactions`, body);
  return { code: r.body.error ?? 'OK', body: r.body };
};
const viaMcp: Transact = async (record, body) => {
  const res: any = await mcp.callTool({ name: 'svc_transaction', arguments: { record, ...body } });
  return { code: res.isError ? res.structuredContent.error : 'OK', body: res.structuredContent };
};
const viaGrpc: Transact = async (record, body) => {
  const req = {
    record,
    writes: body.writes.map((w: any) => ({
      ...w,
      ...('value' in w ? { value: pbValue(w.value) } : {}),
      ...('entry' in w ? { entry: pbValue(w.entry) } : {}),
    })),
    ...(body.evidence !== undefined ? { evidence: body.evidence } : {}),
  };
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${KEYS.alice}`);
  return new Promise((resolve) =>
    grpcClient.Transact(req, md, (err: grpc.ServiceError | null, res: any) => {
      if (err) {
        const b = grpcErrorBody(err);
        resolve({ code: String(b.error), body: b });
        return;
      }
      // Back into the HTTP shape: unset optional fields are absent.
      const writes = res.writes.map((w: any) => Object.fromEntries(Object.entries(w).filter(([, v]) => v !== null && v !== undefined)));
      resolve({ code: 'OK', body: { record: res.record, record_version: res.record_version, transaction: res.transaction, writes } });
    }),
  );
};

const TRANSPORTS: [string, Transact][] = [
  ['http', http],
  ['mcp', viaMcp],
  ['grpc', viaGrpc],
];

let n = 0;

describe.each(TRANSPORTS)('%s', (name, transact) => {
  test('applied with one record_version', async () => {
    const id = `${name}-ok-${++n}`;
    const r = await transact(`tasks/${id}`, {
      evidence: 'why',
      writes: [
        { op: 'put', field: 'title', value: 'a', expected_version: 0 },
        { op: 'append', field: 'notes', entry: { k: 1 } },
        { op: 'claim', field: 'job', lease_seconds: 30 },
      ],
    });
    expect(r.code, JSON.stringify(r.body)).toBe('OK');
    expect(r.body).toMatchObject({
      record: `tasks/${id}`,
      record_version: 1,
      writes: [
        { op: 'put', field: 'title', version: 1 },
        { op: 'append', field: 'notes', seq: 1 },
        { op: 'claim', field: 'job', owner: 'apikey:alice', version: 1 },
      ],
    });
    const got = await t.call('alice', 'GET', `/v1/records/tasks/${id}`);
    expect(got.body.record_version).toBe(1);
  });

  test('the 5th write STALE: the STALE body with index 4, nothing written', async () => {
    const id = `${name}-stale-${++n}`;
    await t.call('alice', 'PUT', `/v1/records/tasks/${id}/fields/title`, { value: 'base', expected_version: 0 });
    await t.call('alice', 'POST', `/v1/records/tasks/${id}/fields/log/entries`, { entry: 1, evidence: 'e' });
    const before = (await t.call('alice', 'GET', `/v1/records/tasks/${id}`)).body;
    const r = await transact(`tasks/${id}`, {
      evidence: 'e',
      writes: [
        { op: 'put', field: 'memo', value: 'm' },
        { op: 'append', field: 'log', entry: 2 },
        { op: 'claim', field: 'job', lease_seconds: 30 },
        { op: 'append', field: 'log', entry: 3 },
        { op: 'put', field: 'title', value: 'mine', expected_version: 0 },
      ],
    });
    expect(r.code).toBe('STALE');
    expect(r.body).toMatchObject({ index: 4, field: 'title', your_version: 0, current_version: 1, current_value: 'base' });
    expect(r.body.diff).toContain('-"base"');
    expect((await t.call('alice', 'GET', `/v1/records/tasks/${id}`)).body).toEqual(before);
  });

  test('no writes: MALFORMED with the bounds in the message', async () => {
    const r = await transact(`tasks/${name}-empty-${++n}`, { writes: [] });
    expect(r.code).toBe('MALFORMED');
    expect(r.body.message).toMatch(/1 to 64 writes; it holds 0/);
  });
});

test('svc_transaction is listed beside the six tools', async () => {
  const { tools } = await mcp.listTools();
  expect(tools.map((x) => x.name).sort()).toEqual(
    ['svc_append', 'svc_checkpoint', 'svc_claim', 'svc_get', 'svc_put', 'svc_query', 'svc_transaction'].sort(),
  );
});
