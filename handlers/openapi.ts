/**
 * The OpenAPI 3.1 document of the HTTP API, generated from the schemas the handlers use: the
 * request bodies and parameters (put.ts, get.ts, ...: the ones that parse and the MCP tool
 * listing shows) and the response and error bodies (responses.ts). Nothing is written twice.
 *
 * A route is one `RouteDoc` entry. The operations of the table (index.ts) get theirs from
 * `OPERATION_DOCS` below (a missing one stops the start, as MCP tools do); the routes the
 * runtime mounts itself (probes, /mcp, the document itself) pass theirs in
 * (runtime/http/openapi.ts). Pure: valibot and its JSON Schema converter only.
 */
import * as v from 'valibot';
import { toJsonSchema, toJsonSchemaDefs } from '@valibot/to-json-schema';
import { appendBody } from './append.js';
import { premiseSchema } from './body.js';
import { claimBody } from './claim.js';
import { saveBody } from './checkpoint-save.js';
import { loadParams } from './checkpoint-load.js';
import { ERROR_TABLE, type ErrorCode } from './errors.js';
import { getParams } from './get.js';
import { historyParams } from './history.js';
import { operations, type Operation } from './index.js';
import { MAX_SCOPE_BYTES } from './pipeline.js';
import { putBody } from './put.js';
import { transactionBody } from './transaction.js';
import { queryParams } from './query.js';
import {
  appendResponse,
  checkpointLoadResponse,
  checkpointSaveResponse,
  claimResponse,
  classesResponse,
  classResponse,
  errorSchemaName,
  ERROR_BODIES,
  getResponse,
  historyResponse,
  putResponse,
  queryResponse,
  transactionResponse,
  RESPONSE_SCHEMAS,
} from './responses.js';

/** A JSON object of the document (OpenAPI objects and JSON Schemas are plain JSON). */
export type Json = { [key: string]: unknown };

/** One answer of a route other than an error body of the error table. */
export interface ResponseDoc {
  description: string;
  /** The body: JSON by default; for `text/event-stream` the JSON `data` of each event. Absent: no body. */
  schema?: v.GenericSchema;
  contentType?: 'application/json' | 'text/event-stream';
  /** Response headers besides X-Request-Id (every answer has it): names of `HEADERS`. */
  headers?: (keyof typeof HEADERS)[];
}

/** A query parameter or request header of one route that is not a valibot schema entry. */
export interface HeaderParamDoc {
  name: string;
  description: string;
}

/** Everything the document says about one route. */
export interface RouteDoc {
  method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  /** Hono-style (`/v1/records/:class/:id`), as mounted. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: keyof typeof TAGS;
  /** Needs `Authorization: Bearer` (default true): adds the security requirement, 401 and 429. */
  auth?: boolean;
  /** Reads X-Svc-Scope (premise inference, IDENTITY_MISMATCH). */
  scope?: boolean;
  /** The query parameters: a strict object schema whose entries are the parameters. */
  query?: v.ObjectSchema<v.ObjectEntries, any> | v.StrictObjectSchema<v.ObjectEntries, any>;
  /** Other request headers the route reads. */
  headers?: HeaderParamDoc[];
  body?: { schema: v.GenericSchema; required: boolean; description?: string };
  /** Answers that are not error bodies, by status. */
  responses: Record<number, ResponseDoc>;
  /** The error codes it can answer (their bodies and statuses come from the error table). */
  errors: ErrorCode[];
  /** Named schemas the route brings (components it refers to). */
  schemas?: Record<string, v.GenericSchema>;
}

const TAGS = {
  classes: 'Class definitions the caller has a role in.',
  records: 'Shared records: read, write (compare-and-set), leases, checkpoints, history.',
  watch: 'Change streams (Server-Sent Events).',
  mcp: 'The MCP endpoint (streamable HTTP, JSON-RPC 2.0); see docs/mcp.md for its tools.',
  service: 'Probes and this document; no credential.',
} as const;

/** Response headers of the document, by name. */
export const HEADERS = {
  'X-Request-Id': {
    description: 'The request id: the one sent in X-Request-Id when it is a sane token, else a fresh one. In the access log and in INTERNAL bodies.',
    schema: { type: 'string' },
  },
  'Retry-After': {
    description: 'Seconds to wait before retrying; sent with every 503.',
    schema: { type: 'integer', minimum: 0 },
  },
  'WWW-Authenticate': {
    description:
      'How to authenticate (RFC 6750 §3): `Bearer realm="kslate"`, with `error="invalid_token"` when a bearer token was sent, and, when the gateway names an authorization server (--identity oidc), `resource_metadata` with the URL of its protected resource metadata (RFC 9728). Sent with every 401.',
    schema: { type: 'string' },
  },
  Allow: { description: 'The methods the path takes.', schema: { type: 'string' } },
  'Cache-Control': { description: 'How long the answer may be cached.', schema: { type: 'string' } },
  ETag: { description: 'A validator of this answer; send it in If-None-Match to get 304 while it has not changed.', schema: { type: 'string' } },
  'X-Kslate-Lsn': {
    description:
      "The database's WAL position at or after this write's commit (e.g. 16/B374D848). Send it back as X-Kslate-Min-Lsn on a read to see this write even when a standby serves the read (docs/ha.md, Reads from standbys). Also on a refusal that recorded a history row (STALE, STALE_PREMISE, HELD).",
    schema: { type: 'string', pattern: '^[0-9A-F]{1,8}/[0-9A-F]{1,8}$' },
  },
  'Mcp-Session-Id': {
    description: 'The MCP session opened by initialize on /mcp/session: send it on every later request of the session (docs/mcp.md, Subscriptions).',
    schema: { type: 'string' },
  },
} as const;

// ---- the operations of the table --------------------------------------------------------------

/** The read-your-writes token a read may send (docs/ha.md, Reads from standbys). */
const MIN_LSN: HeaderParamDoc = {
  name: 'X-Kslate-Min-Lsn',
  description:
    'Read your own writes: the X-Kslate-Lsn of a write. A standby serves the read only once it has replayed that far; else the primary does. Malformed: 400 MALFORMED.',
};
const LSN: (keyof typeof HEADERS)[] = ['X-Kslate-Lsn'];

type OperationName = keyof typeof operations;
type OperationDoc = Omit<RouteDoc, 'method' | 'path' | 'operationId' | 'body'> & {
  body?: { schema: v.GenericSchema; required: boolean; description?: string };
};

/** Every operation may fail inside: a fault (INTERNAL) or the database (UNAVAILABLE). */
const FAULTS: ErrorCode[] = ['INTERNAL', 'UNAVAILABLE'];
/** The refusals of a record read (get, history, query), in the rejection order. */
const READS: ErrorCode[] = ['NOT_FOUND', 'NO_ROLE', 'MALFORMED', 'UNKNOWN_FIELD', 'SCOPE_DENIED', 'IDENTITY_MISMATCH', ...FAULTS];
const created = (what: string): ResponseDoc => ({ description: `${what}; the write created the record.` });

// The codes of each operation, in the spec's rejection order (interface.md, Rejection order;
// handlers/pipeline.ts): reads are never CLASS_GONE; writes take no query parameters but
// refuse unknown ones (MALFORMED); only put has STALE and the resolve gate, only claim HELD.
export const OPERATION_DOCS: Record<OperationName, OperationDoc> = {
  classes: {
    tag: 'classes',
    summary: 'List the classes you have a role in',
    responses: { 200: { description: 'The classes, by name; a deleted one shows gone: true.', schema: classesResponse } },
    errors: ['MALFORMED', ...FAULTS],
  },
  class: {
    tag: 'classes',
    summary: 'Read a class definition',
    description: 'Fields (kinds, types, enums), roles and what each may read and write, checkpoint settings. Needs a role in the class.',
    responses: { 200: { description: 'The class definition.', schema: classResponse } },
    errors: ['NOT_FOUND', 'NO_ROLE', 'MALFORMED', ...FAULTS],
  },
  history: {
    tag: 'records',
    summary: 'Read the history of a record',
    description: 'Every write attempt, rejected ones included, newest first; only rows of fields your role may read.',
    scope: true,
    headers: [MIN_LSN],
    query: historyParams,
    responses: { 200: { description: 'A page of history rows.', schema: historyResponse } },
    errors: READS,
  },
  get: {
    tag: 'records',
    summary: 'Read a record',
    description:
      "Every field your role may read that has a value, with its version (send it back as expected_version) and author. With X-Svc-Scope, the versions read become the premises of later writes in that scope.",
    scope: true,
    headers: [MIN_LSN],
    query: getParams,
    responses: { 200: { description: 'The record.', schema: getResponse } },
    errors: READS,
  },
  query: {
    tag: 'records',
    summary: 'Find records by field values',
    description:
      'Every query parameter other than limit and after filters on a field: compared as a JSON string and, when it parses as JSON, as that value too; a task field matches its owner. Oldest first.',
    scope: true,
    headers: [MIN_LSN],
    query: queryParams,
    responses: { 200: { description: 'A page of matching records.', schema: queryResponse } },
    errors: READS,
  },
  checkpointSave: {
    tag: 'records',
    summary: "Save your role's checkpoint",
    description: 'A progress document of your role on an existing record, so that another agent can continue the work; the latest wins.',
    scope: true,
    body: { schema: saveBody, required: true },
    responses: { 200: { description: 'Saved.', schema: checkpointSaveResponse, headers: LSN } },
    errors: ['NOT_FOUND', 'NO_ROLE', 'CLASS_GONE', 'MALFORMED', 'WEAK_IDENTITY', 'IDENTITY_MISMATCH', 'INVALID_CHECKPOINT', ...FAULTS],
  },
  checkpointLoad: {
    tag: 'records',
    summary: "Load your role's checkpoint",
    description: 'The document and the fields written since it was saved (re-read them before acting on it).',
    scope: true,
    headers: [MIN_LSN],
    query: loadParams,
    responses: { 200: { description: 'The checkpoint (document null when none was saved).', schema: checkpointLoadResponse } },
    errors: ['NOT_FOUND', 'NO_ROLE', 'MALFORMED', 'IDENTITY_MISMATCH', ...FAULTS],
  },
  claim: {
    tag: 'records',
    summary: 'Take, renew or release a task lease',
    description: "lease_seconds 0 releases; an expired lease is taken over (took_over_from). The body may be omitted (the field's default lease).",
    scope: true,
    body: { schema: claimBody, required: false },
    responses: {
      200: { description: 'The lease after the claim (no owner after a release).', schema: claimResponse, headers: LSN },
      201: { ...created('The lease'), schema: claimResponse, headers: LSN },
    },
    errors: [
      'NOT_FOUND', 'NO_ROLE', 'CLASS_GONE', 'MALFORMED', 'UNKNOWN_FIELD', 'SCOPE_DENIED', 'WEAK_IDENTITY', 'NOT_TASK_FIELD',
      'IDENTITY_MISMATCH', 'HELD', ...FAULTS,
    ],
  },
  append: {
    tag: 'records',
    summary: 'Add an entry to an append field',
    description: "Appends never conflict; the field's version is its entry count. evidence is always required.",
    scope: true,
    body: { schema: appendBody, required: true },
    responses: {
      200: { description: 'The entry was added.', schema: appendResponse, headers: LSN },
      201: { ...created('The entry was added'), schema: appendResponse, headers: LSN },
    },
    errors: [
      'NOT_FOUND', 'NO_ROLE', 'CLASS_GONE', 'MALFORMED', 'UNKNOWN_FIELD', 'SCOPE_DENIED', 'WEAK_IDENTITY', 'NOT_APPEND_FIELD',
      'IDENTITY_MISMATCH', 'EVIDENCE_REQUIRED', 'STALE_PREMISE', ...FAULTS,
    ],
  },
  put: {
    tag: 'records',
    summary: 'Write a field (compare-and-set)',
    description:
      'expected_version is the version you read (0: the field has no value yet); STALE when someone wrote it since. Soft fields ignore it. based_on premises must still hold (STALE_PREMISE).',
    scope: true,
    body: { schema: putBody, required: true },
    responses: {
      200: { description: 'Written.', schema: putResponse, headers: LSN },
      201: { ...created('Written'), schema: putResponse, headers: LSN },
    },
    errors: [
      'NOT_FOUND', 'NO_ROLE', 'CLASS_GONE', 'MALFORMED', 'UNKNOWN_FIELD', 'SCOPE_DENIED', 'WEAK_IDENTITY', 'NOT_WRITABLE',
      'IDENTITY_MISMATCH', 'EVIDENCE_REQUIRED', 'STALE', 'INVALID_CHECKPOINT', 'STALE_PREMISE', ...FAULTS,
    ],
  },
  transaction: {
    tag: 'records',
    summary: 'Write several fields of one record, all or nothing',
    description:
      'Puts, appends and claims (1 to 64) applied in order with one new record_version, or none. Each write is checked as it would be alone, against the record as the earlier writes leave it; a refusal is the failing write\'s own error body plus `index`. History keeps one row per write with the transaction\'s id (docs/api.md, Transactions).',
    scope: true,
    body: { schema: transactionBody, required: true },
    responses: {
      200: { description: 'Every write was applied.', schema: transactionResponse },
      201: { ...created('Every write was applied'), schema: transactionResponse },
    },
    errors: [
      'NOT_FOUND', 'NO_ROLE', 'CLASS_GONE', 'MALFORMED', 'UNKNOWN_FIELD', 'SCOPE_DENIED', 'WEAK_IDENTITY', 'NOT_WRITABLE',
      'NOT_APPEND_FIELD', 'NOT_TASK_FIELD', 'IDENTITY_MISMATCH', 'HELD', 'EVIDENCE_REQUIRED', 'STALE', 'INVALID_CHECKPOINT',
      'STALE_PREMISE', ...FAULTS,
    ],
  },
};

/** What a write's idempotency key can answer besides the write's own codes. */
const WRITE_ONCE_ERRORS: ErrorCode[] = ['IDEMPOTENCY_KEY_REUSED', 'IDEMPOTENCY_KEY_IN_USE'];

/** The request bodies and the request premise, by component name. */
const REQUEST_SCHEMAS: Record<string, v.GenericSchema> = {
  Premise: premiseSchema,
  PutBody: putBody,
  AppendBody: appendBody,
  ClaimBody: claimBody,
  TransactionBody: transactionBody,
  CheckpointSaveBody: saveBody,
};

/** The route of every operation of the table, in table order. */
export function operationRoutes(): RouteDoc[] {
  return (Object.entries(operations) as [OperationName, Operation][]).map(([name, op]) => {
    const doc = OPERATION_DOCS[name];
    if (!doc) throw new Error(`operation ${name} has no entry in OPERATION_DOCS (handlers/openapi.ts)`);
    if (op.write !== (doc.body !== undefined)) throw new Error(`operation ${name}: only writes read a body`);
    // Every write takes an Idempotency-Key and dry_run (issue 33; handlers/write-once.ts).
    const errors = op.write ? [...doc.errors, ...WRITE_ONCE_ERRORS.filter((c) => !doc.errors.includes(c))] : doc.errors;
    return { ...doc, errors, method: op.method, path: op.path, operationId: op.name };
  });
}

// ---- the document -----------------------------------------------------------------------------

const PATH_PARAMS: Record<string, string> = {
  class: 'The class name.',
  name: 'The class name.',
  id: `The record id: at most 256 bytes, no "/", matching the class idPattern.`,
  field: 'The field name, as the class defines it.',
};

/** `/v1/records/:class/:id` → `/v1/records/{class}/{id}`. */
export function openApiPath(honoPath: string): string {
  return honoPath.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
}

export interface DocumentOptions {
  /** The API version (the package version). */
  version: string;
  routes: RouteDoc[];
  /** The X-Request-Id a client may send (runtime/http/env.ts decides which are kept). */
  requestId: v.GenericSchema;
}

/** The OpenAPI 3.1 document: plain JSON, the same for every caller. */
export function openApiDocument(opts: DocumentOptions): Json {
  const named: Record<string, v.GenericSchema> = { ...REQUEST_SCHEMAS, ...RESPONSE_SCHEMAS };
  for (const r of opts.routes) {
    for (const [name, schema] of Object.entries(r.schemas ?? {})) {
      if (named[name] && named[name] !== schema) throw new Error(`two schemas named ${name}`);
      named[name] = schema;
    }
  }
  const convert = converter(named);
  const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

  const paths: Record<string, Record<string, unknown>> = {};
  const methodsOf = new Map<string, string[]>();
  for (const r of opts.routes) {
    const path = openApiPath(r.path);
    const item = (paths[path] ??= {});
    const method = r.method.toLowerCase();
    if (item[method]) throw new Error(`${r.method} ${path} is documented twice`);
    item[method] = operation(r, convert);
    methodsOf.set(path, [...(methodsOf.get(path) ?? []), r.method]);
  }
  for (const [path, methods] of methodsOf) {
    const allow = [...methods].sort().join(', ');
    paths[path].description = `Other methods answer 405 METHOD_NOT_ALLOWED with Allow: ${allow} (components.responses.MethodNotAllowed), before any credential check.`;
  }

  const defs = toJsonSchemaDefs(named, CONVERSION) as Record<string, Json>;
  const schemas = Object.fromEntries(Object.keys(defs).sort().map((name) => [name, defs[name]]));

  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    info: {
      title: 'kslate',
      version: opts.version,
      summary: 'Shared, versioned records for fleets of AI agents.',
      description: [
        'Compare-and-set records, leases, premises, checkpoints and an audit history. The same operations are served over MCP (POST /mcp) and gRPC (svc.v1.SvcService); see docs/api.md, docs/mcp.md and docs/grpc.md.',
        'Every error body is {error, message, ...}: `error` is the code (components.schemas.<Code>Error); a request failing several checks gets the first code of the rejection order (docs/api.md).',
        'An unknown path answers 404 NOT_FOUND; a known path with another method 405 METHOD_NOT_ALLOWED with Allow. Connection-level answers (408, 431, 400 for a request that is not HTTP/1.1, 503 with Retry-After at the connection limit) are described in docs/api.md.',
        'Generated from the handlers\' valibot schemas (handlers/openapi.ts); docs/openapi.json is this document, regenerated with npm run openapi:generate.',
      ].join('\n\n'),
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    // Relative first: the gateway that served this document (GET /v1/openapi.json).
    servers: [
      { url: '/', description: 'The gateway serving this document.' },
      { url: 'http://127.0.0.1:8080', description: 'kslate dev (npm start), and kslate serve with the default --listen.' },
    ],
    tags: (Object.entries(TAGS) as [string, string][])
      .filter(([name]) => opts.routes.some((r) => r.tag === name))
      .map(([name, description]) => ({ name, description })),
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description:
            'Authorization: Bearer <token>: an API key, a Kubernetes service-account token or an OIDC token, as the gateway\'s --identity list allows (docs/identity.md).',
        },
      },
      parameters: {
        XSvcScope: {
          name: 'X-Svc-Scope',
          in: 'header',
          required: false,
          description: `Your run (e.g. a fresh UUID per agent run), 1 to ${MAX_SCOPE_BYTES} bytes of text: what you read in it becomes the premises of your later writes without based_on (15 minutes). A scope belongs to the first identity using it: another one gets IDENTITY_MISMATCH.`,
          schema: { type: 'string', minLength: 1 },
        },
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description:
            'Your key for this logical write (e.g. a fresh UUID), 1 to 255 printable ASCII characters (draft-ietf-httpapi-idempotency-key-header). The answer (2xx or 4xx) is stored with the write in one transaction and kept 24 h (--idempotency-ttl): a retry with the same key and request (operation, record, field, body) gets it byte for byte with `Idempotent-Replayed: true` and writes nothing. The same key with another request: 422 IDEMPOTENCY_KEY_REUSED; while the first still runs: 409 IDEMPOTENCY_KEY_IN_USE with Retry-After. Keys are per identity. A 5xx is not stored: retry with the same key.',
          schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$' },
        },
        DryRun: {
          name: 'dry_run',
          in: 'query',
          required: false,
          description:
            'true: every check runs against the current state and the answer is what the write would answer now (the versions it would get, or the exact rejection) with "dry_run": true; nothing is written (no history row, no version, no idempotency key, no metrics of applied writes).',
          schema: { type: 'boolean' },
        },
        XRequestId: {
          name: 'X-Request-Id',
          in: 'header',
          required: false,
          description: 'Your id for the request, echoed back; one that does not match the pattern is replaced by a fresh one (never refused).',
          schema: convert(opts.requestId),
        },
      },
      headers: Object.fromEntries(Object.entries(HEADERS).map(([k, h]) => [k.replace(/-/g, ''), h])),
      responses: {
        MethodNotAllowed: {
          description:
            'METHOD_NOT_ALLOWED: the path was called with a method it does not take; Allow lists those it does. Answered before any credential check, to every method the path does not document.',
          headers: { Allow: { $ref: '#/components/headers/Allow' }, 'X-Request-Id': { $ref: '#/components/headers/XRequestId' } },
          content: { 'application/json': { schema: ref(errorSchemaName('METHOD_NOT_ALLOWED')) } },
        },
        NotFound: {
          description: 'NOT_FOUND: no such endpoint.',
          headers: { 'X-Request-Id': { $ref: '#/components/headers/XRequestId' } },
          content: { 'application/json': { schema: ref(errorSchemaName('NOT_FOUND')) } },
        },
      },
      schemas,
    },
  };
}

const CONVERSION = {
  target: 'draft-2020-12',
  // v.custom and v.check cannot be said in JSON Schema; the schemas carry v.metadata for them.
  errorMode: 'ignore',
  overrideRef: ({ referenceId }: { referenceId: string }) => `#/components/schemas/${referenceId}`,
} as const;

/** valibot → JSON Schema 2020-12, where a named schema (at any depth) is a $ref to components.schemas. */
function converter(named: Record<string, v.GenericSchema>) {
  const nameOf = new Map(Object.entries(named).map(([name, schema]) => [schema, name]));
  return (schema: v.GenericSchema): Json => {
    // A named schema is its reference (what the converter would answer, without converting every definition again).
    const name = nameOf.get(schema);
    if (name) return { $ref: `#/components/schemas/${name}` };
    const out = toJsonSchema(schema, { ...CONVERSION, definitions: named }) as Json;
    delete out.$schema;
    delete out.$defs;
    return out;
  };
}

function operation(r: RouteDoc, convert: (s: v.GenericSchema) => Json): Json {
  const auth = r.auth ?? true;
  const parameters: Json[] = [];
  for (const name of r.path.match(/:([A-Za-z_][A-Za-z0-9_]*)/g) ?? []) {
    const key = name.slice(1);
    parameters.push({ name: key, in: 'path', required: true, description: PATH_PARAMS[key] ?? key, schema: { type: 'string' } });
  }
  for (const [name, entry] of Object.entries(r.query?.entries ?? {})) parameters.push(queryParameter(name, entry, convert));
  if (r.scope) parameters.push({ $ref: '#/components/parameters/XSvcScope' });
  if (r.body) parameters.push({ $ref: '#/components/parameters/IdempotencyKey' }, { $ref: '#/components/parameters/DryRun' });
  for (const h of r.headers ?? []) parameters.push({ name: h.name, in: 'header', required: false, description: h.description, schema: { type: 'string' } });
  parameters.push({ $ref: '#/components/parameters/XRequestId' });

  const out: Json = { operationId: r.operationId, summary: r.summary, tags: [r.tag] };
  if (r.description) out.description = r.description;
  if (!auth) out.security = [];
  out.parameters = parameters;
  if (r.body) {
    out.requestBody = {
      required: r.body.required,
      ...(r.body.description ? { description: r.body.description } : {}),
      content: { 'application/json': { schema: convert(r.body.schema) } },
    };
  }
  out.responses = responses(r, auth, convert);
  return out;
}

/**
 * A query parameter from an entry of the route's parameter schema, as HTTP carries it: a list
 * is comma-separated (`fields=a,b`), an object is one parameter per key (query's filters).
 */
function queryParameter(name: string, entry: v.GenericSchema, convert: (s: v.GenericSchema) => Json): Json {
  const schema = convert(entry);
  const { description, ...rest } = schema;
  const p: Json = { name, in: 'query', required: entry.type !== 'optional' && entry.type !== 'exact_optional' };
  if (typeof description === 'string') p.description = description;
  if (rest.type === 'array') Object.assign(p, { style: 'form', explode: false });
  if (rest.type === 'object') {
    // Every other parameter of the query string; a query string carries text.
    Object.assign(p, { style: 'form', explode: true });
    p.description = `${typeof description === 'string' ? `${description} ` : ''}Over HTTP each key is a query parameter of its own (?status=open&severity=1), so this parameter has no name of its own.`;
    rest.additionalProperties = { type: 'string' };
    delete rest.properties;
    delete rest.required;
  }
  p.schema = rest;
  return p;
}

function responses(r: RouteDoc, auth: boolean, convert: (s: v.GenericSchema) => Json): Json {
  const codes = [...(auth ? (['UNAUTHENTICATED', 'RATE_LIMITED'] as ErrorCode[]) : []), ...r.errors];
  if (new Set(codes).size !== codes.length) throw new Error(`${r.operationId}: an error code is listed twice`);
  const statuses = new Set<number>([...Object.keys(r.responses).map(Number), ...codes.map((c) => ERROR_TABLE[c].http)]);
  const out: Json = {};
  for (const status of [...statuses].sort((a, b) => a - b)) {
    const doc = r.responses[status];
    const errs = codes.filter((c) => ERROR_TABLE[c].http === status);
    const headers: Json = { 'X-Request-Id': { $ref: '#/components/headers/XRequestId' } };
    for (const h of doc?.headers ?? []) headers[h] = { $ref: `#/components/headers/${h.replace(/-/g, '')}` };
    if (status === 503) headers['Retry-After'] = { $ref: '#/components/headers/RetryAfter' };
    if (status === 401) headers['WWW-Authenticate'] = { $ref: '#/components/headers/WWWAuthenticate' };
    const refs = errs.map((c) => ({ $ref: `#/components/schemas/${errorSchemaName(c)}` }));
    const alternatives: Json[] = [...(doc?.schema ? [convert(doc.schema)] : []), ...refs];
    const description = [doc?.description, ...errs.map((c) => `${c}: ${ERROR_NOTES[c]}`)].filter(Boolean).join(' ');
    const res: Json = { description, headers };
    if (alternatives.length > 0) {
      const contentType = doc?.schema ? (doc.contentType ?? 'application/json') : 'application/json';
      let schema: Json;
      if (alternatives.length === 1) schema = alternatives[0];
      else if (!doc?.schema) {
        // Error bodies only: `error` tells them apart.
        schema = {
          type: 'object',
          oneOf: refs,
          discriminator: {
            propertyName: 'error',
            mapping: Object.fromEntries(errs.map((c) => [c, `#/components/schemas/${errorSchemaName(c)}`])),
          },
        };
      } else schema = { anyOf: alternatives };
      if (doc?.contentType === 'text/event-stream') {
        if (refs.length > 0) throw new Error(`${r.operationId}: a stream status cannot also be an error body`);
        res.content = {
          'text/event-stream': {
            schema: { type: 'string', description: 'Server-Sent Events; the data of each event is one JSON object matching x-event-data.' },
            'x-event-data': schema,
          },
        };
      } else {
        res.content = { [contentType]: { schema } };
      }
    }
    out[String(status)] = res;
  }
  // Every known path answers its other methods 405 (runtime/http/app.ts), before any credential
  // check: declared on each of its operations, unless the operation is itself a 405 (GET /mcp).
  out['405'] ??= { $ref: '#/components/responses/MethodNotAllowed' };
  return out;
}

/** One line per code, for the response descriptions. */
const ERROR_NOTES: Record<ErrorCode, string> = {
  MALFORMED: 'bad JSON or UTF-8, a missing, unknown or repeated key or parameter, a wrong type or enum, a bad id or cursor, a body over 4 MiB.',
  UNAUTHENTICATED: 'no credential, or one no identity provider accepts.',
  NO_ROLE: 'you have no role in the class (nothing else about it is revealed).',
  SCOPE_DENIED: 'your role may not read or write that field.',
  WEAK_IDENTITY: 'your credential is below the class or field floor (required, presented).',
  IDENTITY_MISMATCH: 'your X-Svc-Scope is in use by another identity.',
  NOT_FOUND: 'the class or record does not exist.',
  STALE: 'the field moved since the version you read; re-read and decide again.',
  STALE_PREMISE: 'a premise moved (moved lists them); re-read and decide again.',
  HELD: 'another identity holds the lease (owner, lease_expires_at).',
  CLASS_GONE: 'the class was deleted; its records can be read, not written.',
  EVIDENCE_REQUIRED: 'the class or field wants evidence.',
  UNKNOWN_FIELD: 'the class has no such field.',
  NOT_WRITABLE: 'put on an append or task field.',
  NOT_APPEND_FIELD: 'append on a field that is not an append field.',
  NOT_TASK_FIELD: 'claim on a field that is not a task field.',
  INVALID_CHECKPOINT: 'the checkpoint document is not an object, over 64 KiB or lacks a section, or status resolved needs a role\'s checkpoint first.',
  RATE_LIMITED: 'too many rejected credentials from your address; wait a few seconds.',
  INTERNAL: 'a fault; quote request_id to the operator.',
  UNAVAILABLE: 'the database is unreachable, slow (--db-timeout) or being migrated, or an identity provider cannot judge right now; retry.',
  METHOD_NOT_ALLOWED: 'the path takes other methods (Allow).',
  IDEMPOTENCY_KEY_REUSED: 'the Idempotency-Key was used for a different request (operation, record, field or body); use a fresh key.',
  IDEMPOTENCY_KEY_IN_USE: 'a request with this Idempotency-Key is still running; retry with the same key after Retry-After.',
  EXPIRED: 'the class watch cursor is older than the retained window (--watch-retention); oldest is the oldest cursor still available.',
};

/** The error body schema of a code (responses.ts), for transports and tests. */
export function errorBodySchema(code: ErrorCode): v.GenericSchema {
  return ERROR_BODIES[code];
}
