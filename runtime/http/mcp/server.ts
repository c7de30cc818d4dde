/**
 * The MCP transport: streamable HTTP at /mcp on the API port (interface.md, MCP). Stateless:
 * every POST gets a fresh low-level `Server` and transport (a stateless transport cannot be
 * reused), so any replica answers any call and no session id exists. The credential is checked
 * as on HTTP before any MCP method (`authenticateCaller`); the tools and resources run their
 * operations through that caller's `run` (runtime/request.ts), the lifecycle every transport shares.
 */
import type { Context, Hono } from 'hono';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import {
  CallToolRequestSchema,
  CallToolResultSchema,
  ErrorCode,
  JSONRPCRequestSchema,
  ListResourcesRequestSchema,
  McpError,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  RELATED_TASK_META_KEY,
  SubscribeRequestSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
  UnsubscribeRequestSchema,
  type CallToolRequest,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { safeParse } from '@modelcontextprotocol/sdk/server/zod-compat.js';
import { asSvcError } from '../../../handlers/index.js';
import { MAX_BODY_BYTES } from '../../../handlers/body.js';
import { SvcError } from '../../../handlers/errors.js';
import { readBody } from '../body.js';
import { requestMeta, type AppEnv, type PeerAddress } from '../env.js';
import { authenticateCaller, type AppServices, type Caller } from '../../request.js';
import { listResources, listResourceTemplates, readResource } from './resources.js';
import { callTool, TOOL_LIST, type ToolArgs } from './tools.js';

export const MCP_PATH = '/mcp';
/** The methods /mcp answers (GET and DELETE with 405 after the credential check, as the SDK's stateless example). */
export const MCP_METHODS = ['POST', 'GET', 'DELETE'] as const;
/**
 * The session endpoint (docs/mcp.md, "Subscriptions"): the same MCP server with a session per
 * client (Mcp-Session-Id) and a GET event stream, for resource subscriptions. POST, GET and
 * DELETE all have a meaning there.
 */
export const MCP_SESSION_PATH = '/mcp/session';

/**
 * The largest MCP POST body: a tool's arguments may carry a 4 MiB value (the HTTP body limit)
 * plus the JSON-RPC envelope around it. The SDK's own limit would answer 413 without the
 * MALFORMED body and without reading the rest, so the body is read here, with HTTP's reader.
 */
export const MAX_MCP_BODY_BYTES = MAX_BODY_BYTES + 64 * 1024;

/** What a runtime may change about the MCP server; Node passes nothing (the SDK's defaults). */
export interface McpOptions {
  /**
   * The SDK's JSON-schema validator; Workers pass `CfWorkerJsonSchemaValidator`, as the
   * default (ajv) compiles schemas with `new Function`, which Workers forbid.
   */
  jsonSchemaValidator?: jsonSchemaValidator;
  /**
   * The session registry behind /mcp/session (runtime/http/mcp/sessions.ts). Node passes one; a
   * runtime without a long-lived process (Workers) passes none, and /mcp/session answers
   * 404 NOT_FOUND there, as the watch routes do.
   */
  sessions?: SessionEndpoint;
  /**
   * Answer the common POST of /mcp, one `tools/call` request, without the SDK's transport and
   * `Server` (`directToolCall`; docs/performance.md "MCP direct path"). On by default; `false`
   * sends every POST through the SDK, which the differential test (test/transports/mcp-direct.test.ts)
   * compares it with. Not a flag of the product: both paths answer the same bytes.
   */
  direct?: boolean;
}

/** What serves /mcp/session: `McpSessions` (runtime/http/mcp/sessions.ts). */
export interface SessionEndpoint {
  handle(c: Context<AppEnv>, s: AppServices, caller: Caller, opts: McpOptions): Promise<Response>;
}

/** What a request handler of the MCP server receives besides the request. */
export type McpExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** A session server's subscription handlers (runtime/http/mcp/sessions.ts). */
export interface SubscriptionHandlers {
  subscribe(uri: string, extra: McpExtra): Promise<void>;
  unsubscribe(uri: string, extra: McpExtra): Promise<void>;
}

const SERVER_INFO = { name: 'kslate', version: '0.9.0' };

/** Read by the host and usually shown to the model: the one habit every tool relies on. */
const INSTRUCTIONS = [
  'kslate holds shared records that several agents read and write. Records are named "<class>/<id>".',
  'Every field has a version. Read with svc_get, then write with svc_put and expected_version = the version you read (0 when the field has no value).',
  'If svc_put answers STALE, someone changed the field since your read: look at current_value, decide again, and retry with expected_version = current_version only if your change still makes sense.',
  'Claim a task field with svc_claim before working on it (HELD: someone else has it; pick another task), and save your progress with svc_checkpoint so that another agent can continue.',
].join(' ');

/**
 * Mount `/mcp` on the API app: POST carries MCP messages; GET and DELETE answer 405, as a
 * stateless server offers no SSE stream and no session to end.
 */
export function mountMcp(app: Hono<AppEnv>, s: AppServices, peer: PeerAddress, opts: McpOptions = {}): void {
  const servers = serverPool(opts);
  const direct = opts.direct !== false;
  app.post(MCP_PATH, (c) => withCaller(c, s, peer, (caller) => serveMcp(c, s, caller, servers, direct)));
  app.on(['GET', 'DELETE'], MCP_PATH, (c) => withCaller(c, s, peer, async () => methodNotAllowed()));
  const sessions = opts.sessions;
  app.on([...MCP_METHODS], MCP_SESSION_PATH, (c) =>
    withCaller(c, s, peer, async (caller) => {
      if (sessions && s.watch) return sessions.handle(c, s, caller, opts);
      const err = new SvcError(
        'NOT_FOUND',
        'MCP sessions (resource subscriptions) are not served on this runtime (Cloudflare Workers); use /mcp, or a Node gateway (`kslate serve`) for subscriptions.',
      );
      c.get('access').error = err.code;
      return c.json(err.body(), 404);
    }),
  );
}

/**
 * The credential check of every transport, before any MCP method: UNAUTHENTICATED (401) and
 * RATE_LIMITED (429) are plain HTTP answers with the error body, as on HTTP/JSON.
 */
async function withCaller(
  c: Context<AppEnv>,
  s: AppServices,
  peer: PeerAddress,
  next: (caller: Caller) => Promise<Response>,
): Promise<Response> {
  let caller: Caller;
  try {
    caller = await authenticateCaller(s, requestMeta(c, s, peer));
  } catch (e) {
    const err = asSvcError(e, { log: s.log, requestId: c.get('requestId') });
    return c.json(err.body(), err.status as 401);
  }
  return next(caller);
}

/** A server of the pool, and the caller of the request it serves now. */
interface PooledServer {
  server: Server;
  caller: Caller | null;
}

/** Idle servers kept for the next POSTs; more than this many at once are made and dropped. */
const POOL_MAX = 256;

/**
 * Servers for one POST at a time each, reused: a stateless transport serves one message and
 * is made per POST, but the `Server` (its handler table, capabilities, validator) is the same
 * for every request, so building it per POST was wasted. A server is connected to one
 * transport while it serves and closed after, which readies it for the next.
 */
function serverPool(opts: McpOptions) {
  const idle: PooledServer[] = [];
  return {
    acquire(): PooledServer {
      const reused = idle.pop();
      if (reused) return reused;
      const p: PooledServer = { server: null as unknown as Server, caller: null };
      p.server = createMcpServer(() => {
        if (!p.caller) throw new Error('MCP server used outside a request');
        return p.caller;
      }, opts);
      return p;
    },
    release(p: PooledServer) {
      p.caller = null;
      if (idle.length < POOL_MAX) idle.push(p);
    },
  };
}

/**
 * One POST: the common tools/call answered directly (`direct`), anything else by a pooled
 * server and a fresh stateless transport, answered as JSON, then closed.
 */
async function serveMcp(
  c: Context<AppEnv>,
  s: AppServices,
  caller: Caller,
  servers: ReturnType<typeof serverPool>,
  direct: boolean,
): Promise<Response> {
  const body = await readMcpPost(c.req.raw);
  if (body === 'too-large') return tooLarge();
  const { req, parsedBody } = body;
  if (direct) {
    const message = commonToolCall(req, parsedBody);
    if (message) return directToolCall(message, caller);
  }
  const pooled = servers.acquire();
  // The caller's `run` builds a fresh context per tool call: the handlers keep per-call trace state on it.
  pooled.caller = caller;
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
    maxRequestBodySize: MAX_MCP_BODY_BYTES,
  });
  // Only a server that closed cleanly serves again (a connected one would refuse the next
  // transport). The close comes on a later turn, after the answer is handed back: the SDK
  // forgets a request's abort controller in a `finally` that runs after the response is
  // sent, and closing before that aborts it, building a DOMException (its stack trace) per
  // call. Until it is closed the server is in no one's hands, so nothing else can use it.
  const closeLater = () =>
    setTimeout(() => {
      // Closing builds an McpError ("Connection closed") for the server's pending outgoing
      // requests, of which a stateless server has none, so its stack trace is never read:
      // capturing it was 1.2% of the gateway's CPU under MCP puts. The close runs
      // synchronously up to that point, so the limit is restored before anything else runs.
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 0;
      let closing: Promise<void>;
      try {
        closing = pooled.server.close();
      } finally {
        Error.stackTraceLimit = limit;
      }
      closing.then(
        () => servers.release(pooled),
        () => undefined,
      );
    }, 0);
  try {
    await pooled.server.connect(transport);
    // In JSON mode this resolves once every request of the message has its response.
    return await transport.handleRequest(req, parsedBody === undefined ? undefined : { parsedBody });
  } finally {
    closeLater();
  }
}

/** A JSON-RPC request of tools/call, as the SDK's JSON-RPC schema parsed it. */
interface ToolCallMessage {
  id: string | number;
  message: unknown;
}

/**
 * The common POST, which the direct path answers: one JSON-RPC request (not a batch, not a
 * notification, not initialize) of `tools/call`, whose headers the SDK's stateless transport
 * accepts as they are (Accept naming both JSON and SSE, Content-Type exactly application/json, a
 * supported Mcp-Protocol-Version, no Mcp-Session-Id), valid by the SDK's own JSON-RPC request
 * schema, and asking nothing of tasks (task augmentation or a related task). Anything else is
 * undefined and goes to the SDK, which answers it (or refuses it) as it always did.
 */
export function commonToolCall(req: Request, parsedBody: unknown): ToolCallMessage | undefined {
  if (parsedBody === null || typeof parsedBody !== 'object' || Array.isArray(parsedBody)) return undefined;
  if ((parsedBody as { method?: unknown }).method !== 'tools/call') return undefined;
  const h = req.headers;
  // The transport's own checks (handlePostRequest), on the values it would read.
  const accept = h.get('accept');
  if (accept === null || !accept.includes('application/json') || !accept.includes('text/event-stream')) return undefined;
  if (h.get('content-type') !== 'application/json') return undefined;
  const version = h.get('mcp-protocol-version');
  if (version === null || !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) return undefined;
  if (h.get('mcp-session-id') !== null) return undefined;
  // JSONRPCMessageSchema is a union whose first member is the request schema: a message it
  // accepts is parsed by that member, and is a request (isJSONRPCRequest).
  const parsed = safeParse(JSONRPCRequestSchema, parsedBody);
  if (!parsed.success) return undefined;
  const message = parsed.data as { id: string | number; params?: { task?: unknown; _meta?: Record<string, unknown> } };
  if (message.params?.task !== undefined || message.params?._meta?.[RELATED_TASK_META_KEY] !== undefined) return undefined;
  return { id: message.id, message };
}

/**
 * The common POST's answer, as the SDK gives it (Protocol's request handling, Server's tools/call
 * wrapper, the transport's JSON response) without its machinery: the params parsed with the
 * tools/call schema (a schema error is -32602, `invalidParams`, as every handler of our servers
 * answers it), `callTool` with the request's caller, the result parsed with the tools/call
 * result schema, and the JSON-RPC response or error (`code` when a safe integer, else -32603;
 * `message`; `data` when there is one) in a 200 application/json answer.
 */
export async function directToolCall({ id, message }: ToolCallMessage, caller: Caller): Promise<Response> {
  let text: string;
  try {
    const parsed = safeParse(CallToolRequestSchema, message);
    if (!parsed.success) throw parsed.error;
    const request = parsed.data as CallToolRequest;
    const result = await callTool(request.params.name, request.params.arguments as ToolArgs | undefined, caller);
    const checked = safeParse(CallToolResultSchema, result);
    if (!checked.success) {
      const said = checked.error instanceof Error ? checked.error.message : String(checked.error);
      throw new McpError(ErrorCode.InvalidParams, `Invalid tools/call result: ${said}`);
    }
    text = JSON.stringify({ result: checked.data, jsonrpc: '2.0', id });
  } catch (e) {
    // As `answerInvalidParams` wraps the SDK's handler, then as Protocol answers what it throws.
    const err = (invalidParams('tools/call', e) ?? e) as { code?: unknown; message?: unknown; data?: unknown };
    text = JSON.stringify({
      jsonrpc: '2.0',
      id,
      error: {
        code: Number.isSafeInteger(err.code) ? err.code : ErrorCode.InternalError,
        message: err.message ?? 'Internal error',
        ...(err.data !== undefined && { data: err.data }),
      },
    });
  }
  return new Response(text, { status: 200, headers: { 'Content-Type': 'application/json' } });
}

/**
 * An MCP POST's body, read with HTTP's reader and its limit and parsed once; the transport
 * gets the parsed body, or (text that is not JSON) a request carrying the text, on which it
 * answers the SDK's own parse error.
 */
export async function readMcpPost(raw: Request): Promise<'too-large' | { req: Request; parsedBody: unknown }> {
  const body = await readBody(raw, MAX_MCP_BODY_BYTES);
  if (body.kind === 'too-large') return 'too-large';
  let parsedBody: unknown;
  try {
    parsedBody = body.kind === 'text' ? JSON.parse(body.text) : undefined;
  } catch {
    parsedBody = undefined;
  }
  if (parsedBody !== undefined) return { req: transportView(raw), parsedBody };
  return { req: new Request(raw.url, { method: 'POST', headers: raw.headers, body: body.kind === 'text' ? body.text : '' }), parsedBody };
}

/** The request headers the SDK's transport reads (its checks and `requestInfo.headers`). */
const TRANSPORT_HEADERS = ['accept', 'content-type', 'mcp-protocol-version', 'mcp-session-id', 'last-event-id', 'host', 'origin'];

/**
 * What the SDK's transport reads of a POST whose body is already parsed: its method, URL and
 * headers (by name, and all of them once for `requestInfo`, which no kslate tool reads). On
 * Node the request is @hono/node-server's lightweight one, whose `headers.entries()` builds a
 * full web `Headers` (every header appended and validated): 1.9% of the gateway's CPU under
 * MCP puts. The view answers names from the request as they are asked for and lists only the
 * headers above.
 */
export function transportView(raw: Request): Request {
  const h = raw.headers;
  const headers = {
    get: (name: string) => h.get(name),
    has: (name: string) => h.has(name),
    *entries(): IterableIterator<[string, string]> {
      for (const name of TRANSPORT_HEADERS) {
        const value = h.get(name);
        if (value !== null) yield [name, value];
      }
    },
  };
  return { method: raw.method, url: raw.url, headers } as unknown as Request;
}

/**
 * The low-level MCP server: JSON Schema tool listings, tool calls and resource reads
 * translated onto the operation table. Handlers are registered once per server (the pool
 * reuses it); the request's caller (identity, scope, `run`) comes through `callerOf`. `resources` declares
 * `subscribe` only with `subscriptions` (a session server of /mcp/session): a stateless POST
 * has no stream to notify on. Never `listChanged`.
 */
export function createMcpServer(callerOf: (extra: McpExtra) => Caller, opts: McpOptions = {}, subscriptions?: SubscriptionHandlers): Server {
  const server = new Server(SERVER_INFO, {
    // `subscribe` only where it works: a session server, whose client holds a GET stream.
    capabilities: { tools: {}, resources: subscriptions ? { subscribe: true } : {} },
    instructions: INSTRUCTIONS,
    ...(opts.jsonSchemaValidator ? { jsonSchemaValidator: opts.jsonSchemaValidator } : {}),
  });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOL_LIST }));
  server.setRequestHandler(CallToolRequestSchema, (req, extra) =>
    callTool(req.params.name, req.params.arguments as ToolArgs | undefined, callerOf(extra)),
  );
  server.setRequestHandler(ListResourcesRequestSchema, (_req, extra) => listResources(callerOf(extra)));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => listResourceTemplates());
  server.setRequestHandler(ReadResourceRequestSchema, (req, extra) => readResource(req.params.uri, callerOf(extra)));
  if (subscriptions) {
    server.setRequestHandler(SubscribeRequestSchema, async (req, extra) => {
      await subscriptions.subscribe(req.params.uri, extra);
      return {};
    });
    server.setRequestHandler(UnsubscribeRequestSchema, async (req, extra) => {
      await subscriptions.unsubscribe(req.params.uri, extra);
      return {};
    });
  }
  answerInvalidParams(server);
  return server;
}

type RequestHandler = (request: unknown, extra: McpExtra) => Promise<unknown>;

/**
 * A request whose params do not match the MCP schema of its method answers JSON-RPC -32602
 * Invalid params saying what is wrong. The SDK parses params before a handler runs and lets
 * the schema library's error through, which its protocol layer answers -32603 Internal error
 * with the validation dump as message. Wraps every handler of the server (the SDK's own
 * initialize and ping too), so it runs once all are registered.
 */
function answerInvalidParams(server: Server): void {
  // The SDK keeps its handler table private; a version that renames it fails here, at start.
  const handlers = (server as unknown as { _requestHandlers?: unknown })._requestHandlers;
  if (!(handlers instanceof Map)) throw new Error('MCP SDK: the server has no request handler table to wrap (see answerInvalidParams)');
  for (const [method, handler] of handlers as Map<string, RequestHandler>) {
    handlers.set(method, async (request: unknown, extra: McpExtra) => {
      try {
        return await handler(request, extra);
      } catch (e) {
        throw invalidParams(method, e) ?? e;
      }
    });
  }
}

/** A schema error of the request's params as JSON-RPC -32602, or undefined for any other error. */
export function invalidParams(method: string, e: unknown): McpError | undefined {
  // zod's error (`$ZodError` from zod/v4 core, which the SDK parses with; `ZodError` from zod).
  if (!(e instanceof Error) || !/^\$?ZodError$/.test(e.name)) return undefined;
  const issues = (e as Error & { issues?: unknown }).issues;
  if (!Array.isArray(issues)) return undefined;
  const said = issues.slice(0, 5).map((i: { path?: unknown; message?: unknown }) => {
    const path = Array.isArray(i.path) ? i.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').slice(1) : '';
    return `${path || '(the request)'}: ${String(i.message ?? 'invalid')}`;
  });
  const more = issues.length > 5 ? ` (and ${issues.length - 5} more)` : '';
  const message = `Invalid params of ${method}: ${said.join('; ')}${more}.`;
  return new McpError(ErrorCode.InvalidParams, message.length > 1024 ? `${message.slice(0, 1023)}…` : message);
}

/**
 * An MCP message over the limit: HTTP 400, as an HTTP body over 4 MiB, with a JSON-RPC error
 * (-32000, the SDK's code for its own too-large answer) whose `data` is the MALFORMED body.
 */
export function tooLarge(): Response {
  const err = new SvcError(
    'MALFORMED',
    `The MCP message is larger than ${MAX_MCP_BODY_BYTES} bytes (4 MiB for a value plus 64 KiB for the JSON-RPC envelope); send a smaller value.`,
  );
  return new Response(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: err.message, data: err.body() }, id: null }), {
    status: 400,
    headers: { 'content-type': 'application/json' },
  });
}

/** What the SDK's stateless example answers on GET and DELETE. */
function methodNotAllowed(): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null }), {
    status: 405,
    headers: { allow: 'POST', 'content-type': 'application/json' },
  });
}
