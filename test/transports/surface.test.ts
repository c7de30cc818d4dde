/**
 * One declaration per operation of its wire surface (handlers/index.ts): the HTTP route, the
 * gRPC RPC and the MCP tool come from the operation table, and the transports build their
 * method table and tool list from it (a disagreement stops the start).
 */
import * as v from 'valibot';
import { toJsonSchema } from '@valibot/to-json-schema';
import { expect, test } from 'vitest';
import { appendBody } from '../../handlers/append.js';
import { MAX_PREMISES } from '../../handlers/body.js';
import { saveBody } from '../../handlers/checkpoint-save.js';
import { loadParams } from '../../handlers/checkpoint-load.js';
import { claimBody, MAX_LEASE_SECONDS } from '../../handlers/claim.js';
import { getParams, MAX_ENTRIES_LIMIT } from '../../handlers/get.js';
import { operations, type Operation } from '../../handlers/index.js';
import { putBody } from '../../handlers/put.js';
import { transactionBody } from '../../handlers/transaction.js';
import { queryParams, QUERY_LIMIT_MAX } from '../../handlers/query.js';
import { loadSvcProto } from '../../runtime/grpc/proto.js';
import { SERVICE_NAME } from '../../runtime/grpc/server.js';
import { watchOperations } from '../../handlers/watch.js';
import { TOOL_LIST } from '../../runtime/http/mcp/tools.js';

const ops = Object.values(operations) as Operation[];

test('every RPC of svc.v1.SvcService is declared by exactly one operation, and only those', () => {
  const rpcs = Object.keys(loadSvcProto()[SERVICE_NAME] as object).sort();
  const declared = ops.flatMap((o) => (o.grpc ? [o.grpc] : []));
  // The watch operations (streams, mounted beside the table) share the one streaming RPC
  // Watch; its request's `target` picks which runs.
  const watches = (Object.values(watchOperations) as Operation[]).map((o) => o.grpc);
  expect(watches).toEqual(['Watch', 'Watch']);
  expect([...declared, 'Watch'].sort()).toEqual(rpcs);
  expect(new Set(declared).size).toBe(declared.length);
  // What gRPC leaves to HTTP (decisions §7; History is an addition beyond it, issue 16).
  expect(ops.filter((o) => !o.grpc).map((o) => o.name).sort()).toEqual(['class', 'classes']);
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
  // What every write tool adds (issue 33): the idempotency key and the dry-run flag.
  const write = ['dry_run', 'idempotency_key'];
  expect(props('svc_put')).toEqual(keys(putBody, 'record', 'field', ...write));
  expect(props('svc_append')).toEqual(keys(appendBody, 'record', 'field', ...write));
  expect(props('svc_claim')).toEqual(keys(claimBody, 'record', 'field', ...write));
  expect(props('svc_transaction')).toEqual(keys(transactionBody, 'record', ...write));
  // svc_checkpoint carries save (its body) and load (`role`, a query parameter on HTTP).
  // The tools that read also take `min_lsn`, HTTP's X-Kslate-Min-Lsn header (docs/ha.md).
  expect(props('svc_checkpoint')).toEqual([...keys(saveBody, 'record', 'action', 'min_lsn', ...write), ...Object.keys(loadParams.entries)].sort());
  // The reads: their handlers' parameter schemas, whose keys are also the names they accept.
  expect(props('svc_get')).toEqual(keys(getParams, 'record', 'min_lsn'));
  expect(props('svc_query')).toEqual(keys(queryParams, 'class', 'min_lsn'));
});

/**
 * Every argument's JSON Schema is the conversion of the handler's own schema entry (its
 * description, bounds and types), so the listing cannot say one thing and the handler
 * accept another: change a bound in a handler and this listing follows.
 */
test('each tool argument is converted from the schema entry its operation declares', () => {
  const convert = (s: v.GenericSchema) => {
    const { $schema: _, ...json } = toJsonSchema(s, { errorMode: 'ignore' }) as Record<string, unknown>;
    return json;
  };
  let checked = 0;
  for (const o of ops) {
    if (!o.mcp) continue;
    const tool = TOOL_LIST.find((t) => t.name === o.mcp!.tool)!;
    const properties = (tool.inputSchema as { properties: Record<string, unknown> }).properties;
    for (const [k, entry] of Object.entries(o.mcp.args)) {
      const inner = entry.type === 'optional' ? (entry as unknown as { wrapped: v.GenericSchema }).wrapped : entry;
      expect(properties[k], `${tool.name}.${k}`).toEqual(convert(inner as v.GenericSchema));
      checked++;
    }
  }
  expect(checked).toBe(27); // 20, the transaction tool's 4 (issue 33), ttl_seconds on put, append and transaction (issue 37)
  // A few that matter to a model: bounds from the handlers' constants.
  const props = (tool: string) => (TOOL_LIST.find((t) => t.name === tool)!.inputSchema as any).properties;
  expect(props('svc_get').entries_limit.maximum).toBe(MAX_ENTRIES_LIMIT);
  expect(props('svc_query').limit.maximum).toBe(QUERY_LIMIT_MAX);
  expect(props('svc_claim').lease_seconds.maximum).toBe(MAX_LEASE_SECONDS);
  expect(props('svc_put').based_on.maxItems).toBe(MAX_PREMISES);
  expect(props('svc_put').expected_version).toMatchObject({ type: 'integer', minimum: 0 });
  expect(props('svc_put').invocation.type).toBe('object');
});

test('a tool carrying several actions: arguments optional, sentences joined, read-only only if every action is', () => {
  const cp = TOOL_LIST.find((t) => t.name === 'svc_checkpoint')!;
  expect(cp.inputSchema.required).toEqual(['record', 'action']);
  const sentences = ops.filter((o) => o.mcp?.tool === 'svc_checkpoint').flatMap((o) => o.mcp!.description);
  expect(cp.description).toBe(sentences.join(' '));
  expect(cp.annotations?.readOnlyHint).toBeUndefined();
  expect(TOOL_LIST.find((t) => t.name === 'svc_get')!.annotations?.readOnlyHint).toBe(true);
  // append declares evidence required for a successful call though its handler parses it optional.
  expect(TOOL_LIST.find((t) => t.name === 'svc_append')!.inputSchema.required).toContain('evidence');
  expect(v.safeParse(appendBody, { entry: 1 }).success).toBe(true);
});
