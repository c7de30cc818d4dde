/**
 * One declaration per operation of its wire surface (handlers/index.ts): the HTTP route, the
 * gRPC RPC and the MCP tool come from the operation table, and the transports build their
 * method table and tool list from it (a disagreement stops the start).
 */
import { expect, test } from 'vitest';
import { operations, type Operation } from '../../handlers/index.js';
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
