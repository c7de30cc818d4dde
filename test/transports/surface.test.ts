/**
 * One declaration per operation of its wire surface (handlers/index.ts): the HTTP route, the
 * gRPC RPC and the MCP tool come from the operation table, and the transports build their
 * method table and tool list from it (a disagreement stops the start).
 */
import { expect, test } from 'vitest';
import { appendBody } from '../../handlers/append.js';
import { saveBody } from '../../handlers/checkpoint-save.js';
import { claimBody } from '../../handlers/claim.js';
import { operations, type Operation } from '../../handlers/index.js';
import { putBody } from '../../handlers/put.js';
import { loadSvcProto } from '../../runtime/grpc/proto.js';
import { SERVICE_NAME } from '../../runtime/grpc/server.js';
import { TOOL_LIST } from '../../runtime/mcp/tools.js';

const ops = Object.values(operations) as Operation[];

test('every RPC of svc.v1.SvcService is declared by exactly one operation, and only those', () => {
  const rpcs = Object.keys(loadSvcProto()[SERVICE_NAME] as object).sort();
  const declared = ops.flatMap((o) => (o.grpc ? [o.grpc] : []));
  expect([...declared].sort()).toEqual(rpcs);
  expect(new Set(declared).size).toBe(declared.length);
  // What gRPC leaves to HTTP (decisions §7).
  expect(ops.filter((o) => !o.grpc).map((o) => o.name).sort()).toEqual(['class', 'classes', 'history']);
});

test('the MCP tools are exactly those the operations declare; svc_checkpoint carries save and load', () => {
  const tools = TOOL_LIST.map((t) => t.name).sort();
  expect([...new Set(ops.flatMap((o) => (o.mcp ? [o.mcp.tool] : [])))].sort()).toEqual(tools);
  const checkpoint = ops.filter((o) => o.mcp?.tool === 'svc_checkpoint').map((o) => [o.name, o.mcp!.action]);
  expect(checkpoint).toEqual([
    ['checkpointSave', 'save'],
    ['checkpointLoad', 'load'],
  ]);
  const schema = TOOL_LIST.find((t) => t.name === 'svc_checkpoint')!.inputSchema as unknown as { properties: { action: { enum: string[] } } };
  expect(schema.properties.action.enum).toEqual(['save', 'load']);
});

test('every operation has one HTTP route', () => {
  const routes = ops.map((o) => `${o.method} ${o.path}`);
  expect(new Set(routes).size).toBe(ops.length);
});

/**
 * The MCP write tools take exactly the body keys their handler's own schema accepts (plus
 * their address: record, field, action), so a key added to a handler cannot be missing from
 * the tool listing, nor the other way round. `declare_no_premises` is gRPC's spelling of
 * `based_on: []` and is not an MCP argument (decisions §7).
 */
test('the write tools list exactly the keys of their handler body schemas', () => {
  const props = (tool: string) => Object.keys((TOOL_LIST.find((t) => t.name === tool)!.inputSchema as { properties: object }).properties).sort();
  const keys = (schema: { entries: object }, ...address: string[]) =>
    [...address, ...Object.keys(schema.entries).filter((k) => k !== 'declare_no_premises')].sort();
  expect(props('svc_put')).toEqual(keys(putBody, 'record', 'field'));
  expect(props('svc_append')).toEqual(keys(appendBody, 'record', 'field'));
  expect(props('svc_claim')).toEqual(keys(claimBody, 'record', 'field'));
  // svc_checkpoint carries save (its body) and load (`role`, a query parameter on HTTP).
  expect(props('svc_checkpoint')).toEqual(keys(saveBody, 'record', 'action', 'role'));
});
