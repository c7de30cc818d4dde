/**
 * The OpenAPI document (handlers/openapi.ts, runtime/http/openapi.ts): valid OpenAPI 3.1 by
 * an independent validator, every schema compiles as JSON Schema 2020-12, every route the
 * Hono app serves is documented and nothing else is, and each operation lists the error codes
 * of its place in the rejection order.
 */
import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import * as v from 'valibot';
import { describe, expect, test } from 'vitest';
import { ERROR_TABLE, type ErrorCode } from '../../handlers/errors.js';
import { operations } from '../../handlers/index.js';
import { openApiDocument, openApiPath, operationRoutes, type Json, type RouteDoc } from '../../handlers/openapi.js';
import { createApp } from '../../runtime/http/app.js';
import { API_VERSION, apiDocument, apiRoutes, OPENAPI_PATH } from '../../runtime/http/openapi.js';
import type { AppServices } from '../../runtime/request.js';
import { ajvFor, eventDataValidator } from './check.js';

const doc = apiDocument();
const paths = doc.paths as Record<string, Record<string, Json>>;
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

/** Every (method, path) the document has, as `GET /v1/records/{class}`. */
function documented(d: Json = doc): string[] {
  const p = d.paths as Record<string, Record<string, Json>>;
  return Object.entries(p).flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${path}`));
}

describe('validity', () => {
  test('is valid OpenAPI 3.1 (@seriousme/openapi-schema-validator), and every $ref resolves', async () => {
    const validator = new Validator();
    // The validator resolves references in the object it is given: it gets a copy.
    const res = await validator.validate(structuredClone(doc));
    expect(res.errors ?? [], JSON.stringify(res.errors, null, 2)).toEqual([]);
    expect(res.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    // resolveRefs throws on a reference to nothing.
    expect(() => validator.resolveRefs()).not.toThrow();
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/([^"]+)"/g)].map((m) => m[1]);
    for (const ref of new Set(refs)) {
      const target = ref.split('/').reduce<unknown>((node, key) => (node as Json | undefined)?.[key], doc);
      expect(target, `#/${ref} resolves to nothing`).toBeDefined();
    }
  });

  test('every component schema compiles under Ajv 2020 strict mode', () => {
    const ajv = ajvFor(doc);
    for (const name of Object.keys((doc.components as Json).schemas as Json)) {
      expect(() => ajv.getSchema(`https://kslate.invalid/openapi.json#/$defs/${name}`), name).not.toThrow();
      expect(ajv.getSchema(`https://kslate.invalid/openapi.json#/$defs/${name}`), name).toBeDefined();
    }
  });

  test('operationIds are unique; the version is the package version', () => {
    const ids = Object.values(paths).flatMap((item) => METHODS.flatMap((m) => (item[m] ? [item[m].operationId] : [])));
    expect(new Set(ids).size).toBe(ids.length);
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    expect((doc.info as Json).version).toBe(pkg.version);
    expect(API_VERSION).toBe(pkg.version);
    expect(doc.openapi).toBe('3.1.0');
  });
});

describe('routes', () => {
  // Building the app registers its routes; no request is made, so no service is used.
  const app = createApp({} as AppServices, () => '127.0.0.1');

  test('every route the app serves is in the document, and the document has no other', () => {
    const served = new Set<string>();
    const anyMethod = new Set<string>();
    for (const r of app.routes) {
      if (r.method === 'ALL') {
        // The request-id middleware on every path, and the 405 of each known path.
        if (r.path !== '/*') anyMethod.add(openApiPath(r.path));
        continue;
      }
      served.add(`${r.method} ${openApiPath(r.path)}`);
    }
    expect([...served].sort()).toEqual(documented().sort());
    // A path with a 405 for its other methods is a documented path.
    expect([...anyMethod].sort()).toEqual(Object.keys(paths).sort());
  });

  test('each path says which methods its 405 allows, as the app answers it', () => {
    for (const [path, item] of Object.entries(paths)) {
      const methods = METHODS.filter((m) => item[m]).map((m) => m.toUpperCase()).sort().join(', ');
      expect(item.description).toContain(`Allow: ${methods}`);
    }
  });

  test('every operation declares the 405 its path answers to other methods (the MCP ones that are a 405 declare their own)', () => {
    for (const [path, item] of Object.entries(paths)) {
      for (const m of METHODS.filter((x) => item[x])) {
        const r405 = (item[m].responses as Record<string, Json>)['405'];
        expect(r405, `${m.toUpperCase()} ${path}`).toBeDefined();
        if (!(path === '/mcp' && (m === 'get' || m === 'delete'))) expect(r405).toEqual({ $ref: '#/components/responses/MethodNotAllowed' });
      }
    }
  });

  test('servers: the gateway serving the document (relative), then kslate dev', () => {
    expect(doc.servers).toEqual([
      { url: '/', description: expect.any(String) },
      { url: 'http://127.0.0.1:8080', description: expect.stringContaining('kslate dev') },
    ]);
  });

  test('every operation of the table is documented with its method and path', () => {
    for (const op of Object.values(operations)) {
      const item = paths[openApiPath(op.path)];
      expect(item?.[op.method.toLowerCase()]?.operationId, op.name).toBe(op.name);
    }
    expect(paths[OPENAPI_PATH]?.get?.security).toEqual([]);
  });
});

describe('errors and parameters', () => {
  const ops = operationRoutes();
  const codesOf = (r: RouteDoc) => {
    const responses = paths[openApiPath(r.path)][r.method.toLowerCase()].responses as Record<string, Json>;
    const codes: string[] = [];
    for (const res of Object.values(responses)) {
      const schema = (res.content as Record<string, Json> | undefined)?.['application/json']?.schema as Json | undefined;
      const refs = schema ? [schema, ...(((schema.oneOf ?? schema.anyOf) as Json[] | undefined) ?? [])] : [];
      for (const ref of refs) {
        const m = /Error$/.test(String(ref.$ref)) ? String(ref.$ref).split('/').pop()! : null;
        if (m) codes.push(m);
      }
    }
    return codes;
  };

  test('every operation answers the credential errors, the faults and MALFORMED (unknown parameters); reads are never CLASS_GONE', () => {
    for (const r of ops) {
      const codes = codesOf(r);
      for (const c of ['UnauthenticatedError', 'RateLimitedError', 'InternalError', 'UnavailableError', 'MalformedError']) {
        expect(codes, `${r.operationId} lacks ${c}`).toContain(c);
      }
      if (r.method === 'GET') expect(codes, r.operationId).not.toContain('ClassGoneError');
      else expect(codes, r.operationId).toContain('ClassGoneError');
    }
  });

  test('the codes that belong to one operation appear on it alone', () => {
    const only: Record<string, string> = {
      // A transaction (issue 33) answers what its failing write would.
      StaleError: 'put,transaction',
      HeldError: 'claim,transaction',
      NotWritableError: 'put,transaction',
      NotAppendFieldError: 'append,transaction',
      NotTaskFieldError: 'claim,transaction',
      EvidenceRequiredError: 'append,put,transaction',
      StalePremiseError: 'append,put,transaction',
      InvalidCheckpointError: 'checkpointSave,put,transaction',
      WeakIdentityError: 'append,checkpointSave,claim,put,transaction',
    };
    for (const [code, owners] of Object.entries(only)) {
      const having = ops.filter((r) => codesOf(r).includes(code)).map((r) => r.operationId).sort();
      expect(having.join(','), code).toBe(owners);
    }
  });

  test('an error response groups its codes by status, told apart by `error`', () => {
    const put = paths['/v1/records/{class}/{id}/fields/{field}'].put.responses as Record<string, Json>;
    const s409 = (put['409'].content as Record<string, Json>)['application/json'].schema as Json;
    expect(s409.discriminator).toEqual({
      propertyName: 'error',
      mapping: {
        IDEMPOTENCY_KEY_IN_USE: '#/components/schemas/IdempotencyKeyInUseError',
        STALE: '#/components/schemas/StaleError',
        STALE_PREMISE: '#/components/schemas/StalePremiseError',
      },
    });
    for (const status of Object.keys(put).map(Number).filter((s) => s >= 400)) {
      expect(Object.values(ERROR_TABLE).some((e) => e.http === status), `status ${status}`).toBe(true);
    }
    const s503 = put['503'].headers as Json;
    expect(s503['Retry-After']).toEqual({ $ref: '#/components/headers/RetryAfter' });
    expect((put['401'].headers as Json)['WWW-Authenticate']).toEqual({ $ref: '#/components/headers/WWWAuthenticate' });
  });

  test('query parameters are the handlers\' parameter schemas, in HTTP form', () => {
    const get = paths['/v1/records/{class}/{id}'].get.parameters as Json[];
    const fields = get.find((p) => p.name === 'fields')!;
    expect(fields).toMatchObject({ in: 'query', style: 'form', explode: false, schema: { type: 'array', items: { type: 'string' } } });
    const entries = get.find((p) => p.name === 'entries_limit')!;
    expect(entries.schema).toMatchObject({ type: 'integer', minimum: 0, maximum: 100000 });
    const query = paths['/v1/records/{class}'].get.parameters as Json[];
    expect(query.find((p) => p.name === 'filters')).toMatchObject({ style: 'form', explode: true, schema: { type: 'object', additionalProperties: { type: 'string' } } });
    const history = paths['/v1/records/{class}/{id}/history'].get.parameters as Json[];
    expect(history.filter((p) => p.in === 'query').map((p) => p.name)).toEqual(['field', 'limit', 'before']);
    const put = paths['/v1/records/{class}/{id}/fields/{field}'].put;
    expect(put.requestBody).toEqual({ required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/PutBody' } } } });
    // The premise inside the body is the same component the body parser uses.
    const putBody = ((doc.components as Json).schemas as Json).PutBody as Json;
    expect(((putBody.properties as Json).based_on as Json).items).toEqual({ $ref: '#/components/schemas/Premise' });
    expect((putBody.additionalProperties)).toBe(false);
  });

  test('X-Svc-Scope on the record operations, the bearer scheme everywhere but the probes, the document and the protected resource metadata', () => {
    for (const r of apiRoutes()) {
      const o = paths[openApiPath(r.path)][r.method.toLowerCase()];
      const params = JSON.stringify(o.parameters);
      expect(params.includes('XSvcScope'), r.operationId).toBe(r.scope === true);
      expect(params).toContain('XRequestId');
      const open = ['healthz', 'readyz', 'openapi'].includes(r.operationId) || r.operationId.startsWith('protectedResource');
      expect(o.security, r.operationId).toEqual(open ? [] : undefined);
      expect('401' in (o.responses as Json), r.operationId).toBe(!open);
    }
  });
});

describe('the generator', () => {
  const event = v.strictObject({ field: v.string(), record_version: v.number() });
  const watch: RouteDoc = {
    method: 'GET',
    path: '/v1/records/:class/:id/watch',
    operationId: 'watchRecord',
    tag: 'watch',
    summary: 'Watch a record',
    scope: true,
    query: v.strictObject({ from_record_version: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))) }),
    headers: [{ name: 'Last-Event-ID', description: 'Resume after this event.' }],
    responses: { 200: { description: 'The changes.', schema: event, contentType: 'text/event-stream' } },
    errors: ['NOT_FOUND', 'NO_ROLE', 'MALFORMED'],
    schemas: { WatchEvent: event },
  };

  test('adding a route is one entry: an SSE route with its event schema is valid OpenAPI', async () => {
    const d = openApiDocument({ version: '0.0.0', routes: [...operationRoutes(), watch], requestId: v.string() });
    const res = await new Validator().validate(d);
    expect(res.errors ?? []).toEqual([]);
    const op = (d.paths as Record<string, Record<string, Json>>)['/v1/records/{class}/{id}/watch'].get;
    const ok = ((op.responses as Json)['200'] as Json).content as Json;
    expect(ok['text/event-stream']).toMatchObject({ schema: { type: 'string' }, 'x-event-data': { $ref: '#/components/schemas/WatchEvent' } });
    expect(((d.components as Json).schemas as Json).WatchEvent).toBeDefined();
    expect(JSON.stringify(op.parameters)).toContain('Last-Event-ID');
    expect(Object.keys(op.responses as Json)).toEqual(['200', '400', '401', '403', '404', '405', '429']);
    // A stream's test validates each event's data with the schema the document gives.
    const valid = eventDataValidator(d, 'GET', '/v1/records/{class}/{id}/watch');
    expect(valid({ field: 'title', record_version: 3 })).toBeNull();
    expect(valid({ field: 'title', record_version: 3, extra: 1 })).toMatch(/additional properties/);
  });

  test('a route documented twice, or a code listed twice, stops the build', () => {
    const again = apiRoutes()[0];
    expect(() => openApiDocument({ version: '0', routes: [again, again], requestId: v.string() })).toThrow(/documented twice/);
    const twice = { ...watch, errors: ['MALFORMED', 'MALFORMED'] as ErrorCode[] };
    expect(() => openApiDocument({ version: '0', routes: [twice], requestId: v.string() })).toThrow(/listed twice/);
  });

  test('the same schema name for two schemas stops the build', () => {
    const clash = { ...watch, schemas: { PutBody: event } };
    expect(() => openApiDocument({ version: '0', routes: [clash], requestId: v.string() })).toThrow(/two schemas named PutBody/);
  });
});

test('the document lists every route once (documented() sanity)', () => {
  expect(new Set(documented()).size).toBe(documented().length);
  expect(documented()).toContain(`GET ${OPENAPI_PATH}`);
});
