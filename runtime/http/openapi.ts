/**
 * The OpenAPI document as the HTTP app serves it: the operations' routes (handlers/openapi.ts)
 * plus the routes this transport mounts itself (probes, /mcp, the document). Adding a route to
 * the app is one entry in `RUNTIME_ROUTES` (or, for an operation, in OPERATION_DOCS);
 * test/transports/openapi.test.ts fails while a route the app serves is missing here.
 */
import * as v from 'valibot';
import type { Context } from 'hono';
import { openApiDocument, operationRoutes, type Json, type RouteDoc } from '../../handlers/openapi.js';
import { WATCH_ROUTES } from '../../handlers/watch-openapi.js';
import { MCP_PATH, MCP_SESSION_PATH } from './mcp/server.js';
import { REQUEST_ID } from './env.js';
import { PRM_PATH, PRM_RESOURCES, protectedResourceBody } from './protected-resource.js';

export const OPENAPI_PATH = '/v1/openapi.json';
/** The API version in the document: the package version (a test keeps them equal). */
export const API_VERSION = '0.9.0';
/**
 * The document changes only with the gateway's version: caches may keep it for an hour and
 * revalidate with its ETag (a rolling upgrade shows the new one within the hour).
 */
export const OPENAPI_CACHE_CONTROL = 'public, max-age=3600';

const d = v.description;

export const healthBody = v.strictObject({ status: v.literal('ok') });
export const readyBody = v.strictObject({
  status: v.literal('ready'),
  warnings: v.optional(
    v.pipe(
      v.array(v.string()),
      d('What an operator should fix while the gateway serves, e.g. a primary without a synchronous standby (docs/ha.md); absent when there is nothing.'),
    ),
  ),
});

/** An MCP message: JSON-RPC 2.0 (docs/mcp.md); the tools are listed by tools/list, not here. */
export const jsonRpcMessage = v.pipe(
  v.looseObject({ jsonrpc: v.literal('2.0') }),
  d('A JSON-RPC 2.0 request or notification of the Model Context Protocol (initialize, tools/list, tools/call, ...).'),
);
export const jsonRpcError = v.pipe(
  v.looseObject({
    jsonrpc: v.literal('2.0'),
    error: v.looseObject({ code: v.pipe(v.number(), v.integer()), message: v.string(), data: v.optional(v.unknown()) }),
    id: v.nullable(v.union([v.string(), v.number()])),
  }),
  d('A JSON-RPC 2.0 error. A message over the size limit has code -32000 and the MALFORMED body as data.'),
);
const jsonRpcResponse = v.pipe(
  v.looseObject({ jsonrpc: v.literal('2.0'), id: v.union([v.string(), v.number()]) }),
  d('The JSON-RPC 2.0 response (result or error); a refused tool call is a result with isError and the error body of the operation.'),
);
/** The document itself is any JSON object here: describing OpenAPI in OpenAPI says nothing more. */
const openApiBody = v.pipe(v.looseObject({ openapi: v.string() }), d('This OpenAPI 3.1 document.'));

const MCP_CLOSED = 'This stateless server keeps no sessions and offers no stream: the answer is 405 with a JSON-RPC error (after the credential check).';

/** GET /.well-known/oauth-protected-resource[/mcp[/session]] (runtime/http/protected-resource.ts). */
const PROTECTED_RESOURCE_ROUTES: RouteDoc[] = PRM_RESOURCES.map((resource) => ({
  method: 'GET',
  path: PRM_PATH + resource,
  operationId: `protectedResource${resource.split('/').map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join('')}`,
  tag: 'service',
  summary: `Protected resource metadata${resource ? ` of ${resource}` : ''} (RFC 9728)`,
  description: [
    `Where to get a token for ${resource ? `the MCP endpoint ${resource}` : 'this API'}: \`authorization_servers\` names the OIDC issuer of --oidc-issuer (docs/identity.md).`,
    'MCP clients that implement the MCP authorization spec read it after a 401 and sign the user in there.',
    'Without an oidc provider in --identity there is no authorization server: 404 NOT_FOUND saying which credential to send.',
  ].join(' '),
  auth: false,
  responses: { 200: { description: 'The metadata.', schema: protectedResourceBody } },
  errors: ['NOT_FOUND'],
  ...(resource === '' ? { schemas: { ProtectedResourceMetadata: protectedResourceBody } } : {}),
}));

/** The routes the HTTP transport mounts besides the operations (runtime/http/app.ts, runtime/http/mcp/server.ts). */
export const RUNTIME_ROUTES: RouteDoc[] = [
  ...PROTECTED_RESOURCE_ROUTES,
  {
    method: 'GET',
    path: '/healthz',
    operationId: 'healthz',
    tag: 'service',
    summary: 'Liveness',
    description: 'The process is up; independent of the database, 200 while draining too. Also on the metrics port.',
    auth: false,
    responses: { 200: { description: 'Up.', schema: healthBody } },
    errors: [],
    schemas: { Health: healthBody },
  },
  {
    method: 'GET',
    path: '/readyz',
    operationId: 'readyz',
    tag: 'service',
    summary: 'Readiness',
    description: 'Ready when the database answers and its schema is present; also on the metrics port.',
    auth: false,
    responses: { 200: { description: 'Ready.', schema: readyBody } },
    errors: ['UNAVAILABLE'],
    schemas: { Ready: readyBody },
  },
  {
    method: 'GET',
    path: OPENAPI_PATH,
    operationId: 'openapi',
    tag: 'service',
    summary: 'This document',
    description: `The OpenAPI 3.1 document of this API, without a credential (it is the same for every caller and names no class). Cached: ${OPENAPI_CACHE_CONTROL}, with an ETag.`,
    auth: false,
    headers: [{ name: 'If-None-Match', description: 'An ETag of an earlier answer: 304 while the document has not changed.' }],
    responses: {
      200: { description: 'The document.', schema: openApiBody, headers: ['Cache-Control', 'ETag'] },
      304: { description: 'Not modified: the ETag sent is current.', headers: ['Cache-Control', 'ETag'] },
    },
    errors: [],
  },
  {
    method: 'POST',
    path: MCP_PATH,
    operationId: 'mcp',
    tag: 'mcp',
    summary: 'MCP (streamable HTTP, stateless)',
    description:
      'JSON-RPC 2.0 messages of the Model Context Protocol; the six tools carry the operations above with the same answers (docs/mcp.md). Send Accept: application/json, text/event-stream. A refusal of a tool call is its error result, not an HTTP error.',
    scope: true,
    body: { schema: jsonRpcMessage, required: true },
    responses: {
      200: { description: 'The JSON-RPC response.', schema: jsonRpcResponse },
      202: { description: 'A notification or response was accepted (no body).' },
      400: { description: 'Not a valid JSON-RPC message, or larger than 4 MiB + 64 KiB.', schema: jsonRpcError },
      406: { description: 'Accept does not list application/json and text/event-stream.', schema: jsonRpcError },
      415: { description: 'Content-Type is not application/json.', schema: jsonRpcError },
    },
    errors: [],
    schemas: { JsonRpcMessage: jsonRpcMessage, JsonRpcResponse: jsonRpcResponse, JsonRpcError: jsonRpcError },
  },
  {
    method: 'GET',
    path: MCP_PATH,
    operationId: 'mcpStream',
    tag: 'mcp',
    summary: 'MCP server-to-client stream (not offered)',
    description: MCP_CLOSED,
    responses: { 405: { description: 'Not offered.', schema: jsonRpcError, headers: ['Allow'] } },
    errors: [],
  },
  {
    method: 'DELETE',
    path: MCP_PATH,
    operationId: 'mcpEndSession',
    tag: 'mcp',
    summary: 'MCP session end (no sessions)',
    description: MCP_CLOSED,
    responses: { 405: { description: 'No session to end.', schema: jsonRpcError, headers: ['Allow'] } },
    errors: [],
  },
  {
    method: 'POST',
    path: MCP_SESSION_PATH,
    operationId: 'mcpSession',
    tag: 'mcp',
    summary: 'MCP with a session (resource subscriptions)',
    description: [
      'The MCP server of /mcp with a session per client, for resources/subscribe on record resources (docs/mcp.md, Subscriptions).',
      'initialize (without Mcp-Session-Id) opens a session and answers its Mcp-Session-Id; every later request sends it.',
      'The session lives on the replica that answered initialize: route this path by Mcp-Session-Id.',
      'On Cloudflare Workers this path answers 404 NOT_FOUND.',
    ].join(' '),
    scope: true,
    headers: [{ name: 'Mcp-Session-Id', description: 'The session, after initialize.' }],
    body: { schema: jsonRpcMessage, required: true },
    responses: {
      200: { description: 'The JSON-RPC response (initialize: with the new Mcp-Session-Id).', schema: jsonRpcResponse, headers: ['Mcp-Session-Id'] },
      202: { description: 'A notification or response was accepted (no body).' },
      400: { description: 'Not a valid JSON-RPC message, larger than 4 MiB + 64 KiB, or not initialize without an Mcp-Session-Id.', schema: jsonRpcError },
      404: { description: 'Session not found (JSON-RPC -32001): unknown, ended, on another replica or of another identity; initialize again.', schema: jsonRpcError },
      406: { description: 'Accept does not list application/json and text/event-stream.', schema: jsonRpcError },
      415: { description: 'Content-Type is not application/json.', schema: jsonRpcError },
    },
    errors: ['NOT_FOUND', 'UNAVAILABLE'],
  },
  {
    method: 'GET',
    path: MCP_SESSION_PATH,
    operationId: 'mcpSessionStream',
    tag: 'mcp',
    summary: 'MCP session event stream',
    description:
      "The session's server-to-client stream (Accept: text/event-stream, Mcp-Session-Id): notifications/resources/updated of its subscriptions, one JSON-RPC message per event. One per session.",
    headers: [{ name: 'Mcp-Session-Id', description: 'The session.' }],
    responses: {
      200: { description: 'The stream; each event is a JSON-RPC notification.', schema: jsonRpcMessage, contentType: 'text/event-stream' },
      400: { description: 'No Mcp-Session-Id.', schema: jsonRpcError },
      406: { description: 'Accept does not list text/event-stream.', schema: jsonRpcError },
      404: { description: 'Session not found (JSON-RPC -32001).', schema: jsonRpcError },
      409: { description: 'The session already has its stream open.', schema: jsonRpcError },
    },
    errors: ['NOT_FOUND'],
  },
  {
    method: 'DELETE',
    path: MCP_SESSION_PATH,
    operationId: 'mcpSessionEnd',
    tag: 'mcp',
    summary: 'MCP session end',
    description: 'Ends the session: its subscriptions stop and its stream closes.',
    headers: [{ name: 'Mcp-Session-Id', description: 'The session.' }],
    responses: {
      200: { description: 'Ended.' },
      400: { description: 'No Mcp-Session-Id.', schema: jsonRpcError },
      404: { description: 'Session not found.', schema: jsonRpcError },
    },
    errors: ['NOT_FOUND'],
  },
];

/** Every documented route: the operations', then the transport's own. */
export function apiRoutes(): RouteDoc[] {
  return [...operationRoutes(), ...WATCH_ROUTES, ...RUNTIME_ROUTES];
}

let cached: { text: string } | undefined;

/** The document (built once; each caller gets its own copy to change at will). */
export function apiDocument(): Json {
  return JSON.parse(built().text) as Json;
}

/** The document as served and committed (docs/openapi.json): 2-space JSON and a final newline. */
export function apiDocumentText(): string {
  return built().text;
}

function built() {
  if (!cached) {
    const doc = openApiDocument({
      version: API_VERSION,
      routes: apiRoutes(),
      requestId: v.pipe(v.string(), v.regex(REQUEST_ID)),
    });
    cached = { text: `${JSON.stringify(doc, null, 2)}\n` };
  }
  return cached;
}

/** GET /v1/openapi.json (the ETag and 304 come from hono's etag middleware in front of it). */
export function serveOpenApi(c: Context): Response {
  return c.body(apiDocumentText(), 200, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': OPENAPI_CACHE_CONTROL,
  });
}
