/**
 * Transport parity (interface.md "gRPC", "MCP"; decisions §7): one table of scenarios — every
 * success shape and every error code the six operations (get, put, append, claim, checkpoint
 * save/load, query) can produce — each run against HTTP/JSON (fetch), MCP (the SDK's Client
 * over StreamableHTTPClientTransport) and gRPC (a grpc-js client generated from the .proto),
 * through the adapters of ./clients.ts.
 *
 * Each scenario runs once per transport on its own record (`<key>-<transport>`), after the same
 * setup over HTTP, so every transport starts from an identical state. For every transport it
 * asserts:
 *   - the code (error code or OK) is the expected one, with the transport status the spec
 *     gives that code (HTTP status; gRPC status code; MCP: 200 for tool results, the HTTP
 *     status for answers given on the transport before any method);
 *   - the body, normalized (transport suffixes of ids, timestamps, cursors, request ids),
 *     equals the HTTP body;
 *   - `created` agrees between HTTP (201) and gRPC;
 *   - the record read back over HTTP afterwards equals the HTTP run's (same effect).
 *
 * RATE_LIMITED is left out of the table: spending the rejected-credential budget needs a
 * gateway of its own per transport; mcp.test.ts and grpc.test.ts test it per transport.
 * INTERNAL and UNAVAILABLE are faults, not answers an operation is designed to give.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PARITY_ALL, PARITY_LIVE } from '../fixtures/parity-classes.js';
import { useGatewayWithSql, type TestGateway } from '../setup/gateway.js';
import { SPEC_STATUS } from '../fixtures/spec-errors.js';
import { freePort } from '../setup/ports.js';
import {
  grpcAdapter,
  httpAdapter,
  mcpAdapter,
  TRANSPORTS,
  type Adapter,
  type Args,
  type Op,
  type Result,
  type Transport,
} from './clients.js';

// ---- the gateway and the three clients ----------------------------------------------------

let t: TestGateway;
let sql: pg.Client;
let adapters: Record<Transport, Adapter>;

useGatewayWithSql((g, c) => ((t = g), (sql = c)), PARITY_ALL, async () => ({ extraArgs: ['--grpc-port', String(await freePort())] }));
beforeAll(() => {
  expect(t.gw.grpcPort).toBeGreaterThan(0);
  adapters = { http: httpAdapter(t.url), mcp: mcpAdapter(t.url), grpc: grpcAdapter(`127.0.0.1:${t.gw.grpcPort}`) };
});
afterAll(async () => {
  if (adapters) await Promise.all(Object.values(adapters).map((a) => a.close()));
});

// ---- the spec's status of each code ---------------------------------------------------------

const HTTP_STATUS = SPEC_STATUS;

/** decisions §7: HTTP status -> gRPC status code. */
const GRPC_OF_HTTP: Record<number, number> = { 400: 3, 401: 16, 403: 7, 404: 5, 409: 10, 410: 9, 422: 9, 429: 8, 500: 13, 503: 14 };

function expectedStatus(tr: Transport, code: string, created: boolean): number {
  if (code === 'OK') return tr === 'grpc' ? 0 : tr === 'http' && created ? 201 : 200;
  const http = HTTP_STATUS[code];
  if (tr === 'http') return http;
  if (tr === 'grpc') return GRPC_OF_HTTP[http];
  // MCP: a rejection is a tool result (POST answered 200), except UNAUTHENTICATED and
  // RATE_LIMITED, answered on the transport before any MCP method.
  return code === 'UNAUTHENTICATED' || code === 'RATE_LIMITED' ? http : 200;
}

// ---- normalization ----------------------------------------------------------------------------

const TIMESTAMP = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)/g;
const TRANSPORT_SUFFIX = /-(?:http|mcp|grpc)(?![A-Za-z0-9])/g;
const CURSOR_KEYS = new Set(['next_after', 'after', 'next_before', 'before']);

/** Ids `<x>-<transport>` -> `<x>-<tr>`, timestamps -> <ts>, cursors -> <cursor>, request ids -> <rid>. */
function normalize(x: unknown, key?: string): unknown {
  if (typeof x === 'string') {
    if (key !== undefined && CURSOR_KEYS.has(key)) return '<cursor>';
    if (key === 'request_id') return '<rid>';
    return x.replace(TIMESTAMP, '<ts>').replace(TRANSPORT_SUFFIX, '-<tr>');
  }
  if (Array.isArray(x)) return x.map((v) => normalize(v));
  if (x !== null && typeof x === 'object') {
    return Object.fromEntries(Object.entries(x).map(([k, v]) => [k.replace(TRANSPORT_SUFFIX, '-<tr>'), normalize(v, k)]));
  }
  return x;
}

// ---- scenarios --------------------------------------------------------------------------------

interface Ctx {
  tr: Transport;
  /** `<key>-<transport>`: the scenario's record id on this transport. */
  id: string;
  /** `<cls>/<id>` */
  rec: string;
  /** Another record id of the scenario on this transport: `<key>-<tag>-<transport>`. */
  sub(tag: string): string;
  /** An X-Svc-Scope of the scenario on this transport. */
  scope: string;
  /** What the setup returned. */
  state: Record<string, any>;
}

interface Scenario {
  /** Slug; record ids are `<key>-<transport>`. */
  key: string;
  name: string;
  /** Class of `rec` (default pcase). */
  cls?: string;
  /** Caller of the request (default alice). */
  who?: string;
  op: Op;
  /** Runs over HTTP before the request, on this transport's records. */
  setup?(c: Ctx): Promise<Record<string, any> | void>;
  args(c: Ctx): Args;
  /** X-Svc-Scope of the request. */
  scope?(c: Ctx): string;
  /** The expected code: an error code, or OK. */
  code: string;
  /** For OK writes: whether the write creates the record (HTTP 201). */
  created?: boolean;
  /** Transports the scenario cannot be sent on, with the reason. */
  notOn?: Partial<Record<Transport, string>>;
  /** Extra checks on the HTTP body (so that the scenario shows what it claims to). */
  check?(body: any): void;
}

/** A setup step over HTTP that must succeed. */
async function ok(who: string, op: Op, args: Args, scope?: string): Promise<any> {
  const r = await adapters.http.run(who, op, args, scope === undefined ? {} : { scope });
  if (r.code !== 'OK') throw new Error(`setup ${op} ${JSON.stringify(args).slice(0, 200)}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** Let a lease expire, by the database clock. */
async function expire(cls: string, id: string, field: string): Promise<void> {
  const r = await sql.query(
    `update fields set lease_expires_at = now() - interval '1 second'
     where name = $3 and record_id = (select id from records where class = $1 and rid = $2)`,
    [cls, id, field],
  );
  if (r.rowCount !== 1) throw new Error(`expire ${cls}/${id} ${field}: ${r.rowCount} rows`);
}

const DOC = { summary: 'checked the disk', next_steps: ['grow the volume', { owner: 'ops' }], n: 1, done: false, none: null };
const BIG_DOC = { summary: 'x'.repeat(70 * 1024), next_steps: [] };

const put = (rec: string, field: string, value: unknown, expected_version = 0, extra: Args = {}): Args => ({
  record: rec,
  field,
  value,
  expected_version,
  ...extra,
});

const SCENARIOS: Scenario[] = [
  // ---- get ------------------------------------------------------------------------------------
  {
    key: 'get-full',
    name: 'get: every field kind — values (incl. null), evidence, invocation, explicit/fence/inferred/declared-none premises, entries, a held task',
    op: 'get',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 'disk full', 0, { evidence: 'pager', invocation: { run: 'r-1', n: 2 }, based_on: [] }));
      await ok('alice', 'put', put(c.rec, 'severity', 2), c.scope);
      await ok('alice', 'get', { record: c.rec, fields: ['severity'] }, c.scope);
      await ok('alice', 'put', put(c.rec, 'status', 'open'), c.scope); // premises inferred from the read
      await ok('alice', 'put', put(c.rec, 'scratch', null));
      await ok('alice', 'append', { record: c.rec, field: 'notes', entry: { text: 'paged' }, evidence: 'pd', invocation: { tool: 'x' }, based_on: [] });
      await ok('alice', 'append', { record: c.rec, field: 'notes', entry: { text: 'ack' }, evidence: 'slack', based_on: [{ field: 'title', version: 1 }] });
      await ok('alice', 'claim', { record: c.rec, field: 'job', lease_seconds: 120, invocation: { run: 'r-2' } });
      await ok('alice', 'put', put(c.rec, 'blob', { nested: [1, 'two', null, true, { x: 1.5, y: -3 }], empty: {}, list: [] }, 0, {
        based_on: [{ field: 'job', version: 1, kind: 'fence' }],
      }));
    },
    args: (c) => ({ record: c.rec }),
    code: 'OK',
    check(b) {
      expect(Object.keys(b.fields).sort()).toEqual(['blob', 'job', 'notes', 'scratch', 'severity', 'status', 'title']);
      expect(b.fields.status.based_on).toEqual([{ field: 'severity', version: 1, inferred: true }]);
      expect(b.fields.title.based_on).toEqual([]);
      expect(b.fields.scratch.value).toBeNull();
      expect(b.fields.job.owner).toBe('apikey:alice');
      expect(b.fields.notes.entries).toHaveLength(2);
    },
  },
  {
    key: 'get-fields',
    name: 'get: fields and entries_limit (field version stays the entry count)',
    op: 'get',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
      await ok('alice', 'put', put(c.rec, 'severity', 1));
      for (const n of [1, 2, 3]) await ok('alice', 'append', { record: c.rec, field: 'notes', entry: { n }, evidence: `e${n}` });
    },
    args: (c) => ({ record: c.rec, fields: ['notes', 'title'], entries_limit: 2 }),
    code: 'OK',
    check(b) {
      expect(Object.keys(b.fields).sort()).toEqual(['notes', 'title']);
      expect(b.fields.notes.version).toBe(3);
      expect(b.fields.notes.entries.map((e: any) => e.value.n)).toEqual([2, 3]);
    },
  },
  {
    key: 'get-entries-zero',
    name: 'get: entries_limit 0 (an append field with no entries returned)',
    op: 'get',
    async setup(c) {
      await ok('alice', 'append', { record: c.rec, field: 'notes', entry: { n: 1 }, evidence: 'e' });
    },
    args: (c) => ({ record: c.rec, entries_limit: 0 }),
    code: 'OK',
    check: (b) => expect(b.fields.notes).toEqual({ version: 1, entries: [] }),
  },
  {
    key: 'get-task-held',
    name: 'get: a held task field (owner, lease_expires_at)',
    op: 'get',
    async setup(c) {
      await ok('carol', 'claim', { record: c.rec, field: 'job', lease_seconds: 300 });
    },
    args: (c) => ({ record: c.rec, fields: ['job'] }),
    code: 'OK',
    check: (b) => expect(b.fields.job).toMatchObject({ owner: 'apikey:carol', version: 1 }),
  },
  {
    key: 'get-task-unheld',
    name: 'get: a released task field (no owner)',
    op: 'get',
    async setup(c) {
      await ok('alice', 'claim', { record: c.rec, field: 'job', lease_seconds: 300 });
      await ok('alice', 'claim', { record: c.rec, field: 'job', lease_seconds: 0 });
    },
    args: (c) => ({ record: c.rec, fields: ['job'] }),
    code: 'OK',
    check(b) {
      expect(b.fields.job.version).toBe(2);
      expect(b.fields.job).not.toHaveProperty('owner');
      expect(b.fields.job).not.toHaveProperty('lease_expires_at');
    },
  },
  {
    key: 'get-task-lapsed',
    name: 'get: a task field whose lease expired (lease_lapsed)',
    op: 'get',
    async setup(c) {
      await ok('alice', 'claim', { record: c.rec, field: 'job', lease_seconds: 300 });
      await expire('pcase', c.id, 'job');
    },
    args: (c) => ({ record: c.rec, fields: ['job'] }),
    code: 'OK',
    check(b) {
      expect(b.fields.job.lease_lapsed).toBe(true);
      expect(b.fields.job).not.toHaveProperty('owner');
    },
  },
  {
    key: 'get-reviewer',
    name: 'get: a role that reads only some fields gets only those',
    who: 'bob',
    op: 'get',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
      await ok('alice', 'put', put(c.rec, 'severity', 4));
    },
    args: (c) => ({ record: c.rec }),
    code: 'OK',
    check: (b) => expect(Object.keys(b.fields)).toEqual(['title']),
  },

  // ---- put ------------------------------------------------------------------------------------
  {
    key: 'put-create',
    name: 'put: creates the record (201)',
    op: 'put',
    args: (c) => put(c.rec, 'title', 'disk full', 0, { evidence: 'pager' }),
    code: 'OK',
    created: true,
  },
  {
    key: 'put-update',
    name: 'put: updates a field (200)',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 'first'));
      await ok('alice', 'put', put(c.rec, 'severity', 1));
    },
    args: (c) => put(c.rec, 'title', 'second', 1),
    code: 'OK',
    created: false,
    check: (b) => expect(b).toMatchObject({ version: 2, record_version: 3 }),
  },
  {
    key: 'put-soft',
    name: 'put: a soft field ignores expected_version',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'scratch', 'a'));
      await ok('alice', 'put', put(c.rec, 'scratch', 'b'));
    },
    // expected_version is sent (and wrong) on every transport: gRPC always sends one.
    args: (c) => put(c.rec, 'scratch', { any: ['json', 1] }, 7),
    code: 'OK',
    created: false,
    check: (b) => expect(b.version).toBe(3),
  },
  {
    key: 'put-null',
    name: 'put: a JSON null value',
    op: 'put',
    args: (c) => put(c.rec, 'blob', null),
    code: 'OK',
    created: true,
  },
  {
    key: 'put-invocation',
    name: 'put: with invocation (stored and returned unchanged)',
    op: 'put',
    args: (c) => put(c.rec, 'title', 't', 0, { invocation: { run: 'r-9', step: 3, tags: ['a', 'b'], deep: { ok: true, none: null } } }),
    code: 'OK',
    created: true,
  },
  {
    key: 'put-based-on',
    name: 'put: with an explicit premise that holds',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'status', 'open'));
    },
    args: (c) => put(c.rec, 'severity', 3, 0, { based_on: [{ field: 'status', version: 1 }], evidence: 'runbook' }),
    code: 'OK',
    created: false,
  },
  {
    key: 'put-fence',
    name: 'put: with a fence premise on a lease the writer holds',
    op: 'put',
    async setup(c) {
      await ok('alice', 'claim', { record: c.rec, field: 'job', lease_seconds: 300 });
    },
    args: (c) => put(c.rec, 'title', 'fenced', 0, { based_on: [{ field: 'job', version: 1, kind: 'fence' }] }),
    code: 'OK',
    created: false,
  },
  {
    key: 'put-no-premises',
    name: 'put: based_on [] (rests on nothing; gRPC declare_no_premises) in a scope with reads',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'severity', 2));
      await ok('alice', 'get', { record: c.rec }, c.scope);
    },
    scope: (c) => c.scope,
    args: (c) => put(c.rec, 'title', 'no premises', 0, { based_on: [] }),
    code: 'OK',
    created: false,
  },
  {
    key: 'put-inferred',
    name: 'put: premises inferred from reads in the scope (X-Svc-Scope / x-svc-scope)',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'severity', 2));
      await ok('alice', 'put', put(c.rec, 'status', 'open'));
      await ok('alice', 'get', { record: c.rec, fields: ['severity', 'status'] }, c.scope);
    },
    scope: (c) => c.scope,
    args: (c) => put(c.rec, 'title', 'inferred'),
    code: 'OK',
    created: false,
  },
  {
    key: 'put-resolve',
    name: 'put: status resolved after the required role checkpointed',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'status', 'open'));
      await ok('carol', 'checkpointSave', { record: c.rec, document: DOC });
    },
    args: (c) => put(c.rec, 'status', 'resolved', 1),
    code: 'OK',
    created: false,
  },

  // ---- append ---------------------------------------------------------------------------------
  {
    key: 'append-create',
    name: 'append: creates the record (201)',
    op: 'append',
    args: (c) => ({ record: c.rec, field: 'notes', entry: { text: 'paged' }, evidence: 'pagerduty', invocation: { run: 'a-1' } }),
    code: 'OK',
    created: true,
    check: (b) => expect(b).toMatchObject({ seq: 1, record_version: 1 }),
  },
  {
    key: 'append-update',
    name: 'append: a second entry (200)',
    op: 'append',
    async setup(c) {
      await ok('alice', 'append', { record: c.rec, field: 'notes', entry: { text: 'one' }, evidence: 'e1' });
    },
    args: (c) => ({ record: c.rec, field: 'notes', entry: { text: 'two', list: [1, null] }, evidence: 'e2', based_on: [{ field: 'notes', version: 1 }] }),
    code: 'OK',
    created: false,
    check: (b) => expect(b).toMatchObject({ seq: 2, record_version: 2 }),
  },

  // ---- claim ----------------------------------------------------------------------------------
  {
    key: 'claim-create',
    name: 'claim: takes an unheld task on a new record, class-defined lease (201)',
    op: 'claim',
    args: (c) => ({ record: c.rec, field: 'job' }),
    code: 'OK',
    created: true,
    check: (b) => expect(b).toMatchObject({ owner: 'apikey:alice', version: 1 }),
  },
  {
    key: 'claim-renew',
    name: 'claim: renew extends the lease the caller holds',
    op: 'claim',
    async setup(c) {
      await ok('alice', 'claim', { record: c.rec, field: 'job', lease_seconds: 60 });
    },
    args: (c) => ({ record: c.rec, field: 'job', lease_seconds: 600, renew: true, invocation: { run: 'renew' } }),
    code: 'OK',
    created: false,
    check: (b) => expect(b).toMatchObject({ owner: 'apikey:alice', version: 2 }),
  },
  {
    key: 'claim-takeover',
    name: 'claim: takes over an expired lease (took_over_from)',
    who: 'carol',
    op: 'claim',
    async setup(c) {
      await ok('alice', 'claim', { record: c.rec, field: 'job', lease_seconds: 60 });
      await expire('pcase', c.id, 'job');
    },
    args: (c) => ({ record: c.rec, field: 'job', lease_seconds: 120 }),
    code: 'OK',
    created: false,
    check: (b) => expect(b).toMatchObject({ owner: 'apikey:carol', took_over_from: 'apikey:alice' }),
  },
  {
    key: 'claim-release',
    name: 'claim: lease_seconds 0 releases (no owner, no expiry)',
    op: 'claim',
    async setup(c) {
      await ok('alice', 'claim', { record: c.rec, field: 'chore', lease_seconds: 60 });
    },
    args: (c) => ({ record: c.rec, field: 'chore', lease_seconds: 0 }),
    code: 'OK',
    created: false,
    check(b) {
      expect(b).not.toHaveProperty('owner');
      expect(b).not.toHaveProperty('lease_expires_at');
    },
  },

  // ---- checkpoint -----------------------------------------------------------------------------
  {
    key: 'cp-save',
    name: 'checkpoint save',
    op: 'checkpointSave',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
    },
    args: (c) => ({ record: c.rec, document: DOC }),
    code: 'OK',
    check: (b) => expect(b).toMatchObject({ role: 'responder', checkpoint_id: 1, record_version: 1 }),
  },
  {
    key: 'cp-load-none',
    name: 'checkpoint load without a checkpoint (document null, every written field)',
    op: 'checkpointLoad',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't', 0, { evidence: 'seen' }));
      await ok('alice', 'put', put(c.rec, 'severity', 2));
      await ok('alice', 'claim', { record: c.rec, field: 'job' });
    },
    args: (c) => ({ record: c.rec }),
    code: 'OK',
    check(b) {
      expect(b).toMatchObject({ document: null, record_version: 0 });
      expect(b.changed_fields.map((f: any) => f.field).sort()).toEqual(['severity', 'title']);
    },
  },
  {
    key: 'cp-load-changed',
    name: 'checkpoint load with a checkpoint and changed_fields (author, evidence null)',
    who: 'carol',
    op: 'checkpointLoad',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
      await ok('alice', 'checkpointSave', { record: c.rec, document: DOC });
      await ok('alice', 'put', put(c.rec, 'severity', 2, 0, { evidence: 'pager' }));
      await ok('alice', 'put', put(c.rec, 'title', 't2', 1));
    },
    args: (c) => ({ record: c.rec, role: 'responder' }),
    code: 'OK',
    check(b) {
      expect(b.document).toEqual(DOC);
      expect(b.changed_fields).toHaveLength(2);
    },
  },
  {
    key: 'cp-load-role',
    name: 'checkpoint load naming one of several roles',
    cls: 'pduo',
    op: 'checkpointLoad',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
    },
    args: (c) => ({ record: c.rec, role: 'crew' }),
    code: 'OK',
  },

  // ---- query ----------------------------------------------------------------------------------
  {
    key: 'query-filters',
    name: 'query: string and enum filters',
    op: 'query',
    async setup(c) {
      await ok('alice', 'put', put(`pcase/${c.sub('a')}`, 'title', c.id));
      await ok('alice', 'put', put(`pcase/${c.sub('a')}`, 'status', 'open'));
      await ok('alice', 'append', { record: `pcase/${c.sub('a')}`, field: 'notes', entry: { n: 1 }, evidence: 'e' });
      await ok('alice', 'append', { record: `pcase/${c.sub('a')}`, field: 'notes', entry: { n: 2 }, evidence: 'e' });
      await ok('alice', 'put', put(`pcase/${c.sub('b')}`, 'title', c.id));
      await ok('alice', 'put', put(`pcase/${c.sub('b')}`, 'status', 'investigating'));
      await ok('alice', 'put', put(`pcase/${c.sub('c')}`, 'title', `${c.id}-other`));
    },
    args: (c) => ({ class: 'pcase', filters: { title: c.id, status: 'open' } }),
    code: 'OK',
    check(b) {
      expect(b.records).toHaveLength(1);
      expect(b.records[0].fields.notes.entries).toHaveLength(1); // query: the latest entry only
      expect(b).not.toHaveProperty('next_after');
    },
  },
  {
    key: 'query-number',
    name: 'query: a number filter matches a number field; a task filter matches its owner',
    op: 'query',
    async setup(c) {
      for (const [tag, sev, who] of [['a', 2, 'carol'], ['b', 3, 'carol'], ['c', 2, 'alice']] as const) {
        await ok('alice', 'put', put(`pcase/${c.sub(tag)}`, 'title', c.id));
        await ok('alice', 'put', put(`pcase/${c.sub(tag)}`, 'severity', sev));
        await ok(who, 'claim', { record: `pcase/${c.sub(tag)}`, field: 'job', lease_seconds: 300 });
      }
    },
    args: (c) => ({ class: 'pcase', filters: { title: c.id, severity: 2, job: 'apikey:carol' } }),
    code: 'OK',
    check: (b) => expect(b.records.map((r: any) => r.record)).toHaveLength(1),
  },
  {
    key: 'query-limit',
    name: 'query: limit with next_after',
    op: 'query',
    async setup(c) {
      for (const tag of ['a', 'b', 'c']) await ok('alice', 'put', put(`pcase/${c.sub(tag)}`, 'title', c.id));
    },
    args: (c) => ({ class: 'pcase', filters: { title: c.id }, limit: 2 }),
    code: 'OK',
    check(b) {
      expect(b.records).toHaveLength(2);
      expect(typeof b.next_after).toBe('string');
    },
  },
  {
    key: 'query-after',
    name: 'query: the next page with after (last page, no next_after)',
    op: 'query',
    async setup(c) {
      for (const tag of ['a', 'b', 'c']) await ok('alice', 'put', put(`pcase/${c.sub(tag)}`, 'title', c.id));
      const page1 = await ok('alice', 'query', { class: 'pcase', filters: { title: c.id }, limit: 2 });
      return { after: page1.next_after };
    },
    args: (c) => ({ class: 'pcase', filters: { title: c.id }, limit: 2, after: c.state.after }),
    code: 'OK',
    check(b) {
      expect(b.records).toHaveLength(1);
      expect(b).not.toHaveProperty('next_after');
    },
  },

  // ---- MALFORMED ------------------------------------------------------------------------------
  {
    key: 'mal-id',
    name: 'MALFORMED: record id not matching idPattern',
    op: 'get',
    args: (c) => ({ record: `pcase/Bad_${c.id}` }),
    code: 'MALFORMED',
  },
  {
    key: 'mal-type',
    name: 'MALFORMED: value of the wrong type',
    op: 'put',
    args: (c) => put(c.rec, 'severity', 'high'),
    code: 'MALFORMED',
  },
  {
    key: 'mal-enum',
    name: 'MALFORMED: value outside the enum',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'status', 'open'));
    },
    args: (c) => put(c.rec, 'status', 'closed', 1),
    code: 'MALFORMED',
  },
  {
    key: 'mal-no-value',
    name: 'MALFORMED: put without value',
    op: 'put',
    args: (c) => ({ record: c.rec, field: 'title', expected_version: 0 }),
    code: 'MALFORMED',
  },
  {
    key: 'mal-no-expected',
    name: 'MALFORMED: put on a versioned field without expected_version',
    op: 'put',
    args: (c) => ({ record: c.rec, field: 'title', value: 'x' }),
    code: 'MALFORMED',
    notOn: { grpc: 'proto3: PutRequest.expected_version is a plain int64, always sent (0 = "must not exist")' },
  },
  {
    key: 'mal-lease-range',
    name: 'MALFORMED: lease_seconds out of range',
    op: 'claim',
    args: (c) => ({ record: c.rec, field: 'job', lease_seconds: 86_401 }),
    code: 'MALFORMED',
  },
  {
    key: 'mal-lease-required',
    name: 'MALFORMED: lease_seconds omitted on a task field without a default lease',
    op: 'claim',
    args: (c) => ({ record: c.rec, field: 'chore' }),
    code: 'MALFORMED',
  },
  {
    key: 'mal-invocation',
    name: 'MALFORMED: invocation over 1 KiB',
    op: 'put',
    args: (c) => put(c.rec, 'title', 'x', 0, { invocation: { pad: 'x'.repeat(2000) } }),
    code: 'MALFORMED',
  },
  {
    key: 'mal-declare',
    name: 'MALFORMED: declare_no_premises together with based_on',
    op: 'put',
    args: (c) => put(c.rec, 'title', 'x', 0, { based_on: [{ field: 'status', version: 0 }], declare_no_premises: true }),
    code: 'MALFORMED',
    // HTTP bodies accept the flag (docs/decisions.md); the MCP tools do not list it
    // (decisions §7: svc_put/svc_append take based_on, where [] says the same) and pass only
    // their listed body keys, so MCP cannot send it.
    notOn: { mcp: 'svc_put has no declare_no_premises argument' },
  },
  {
    key: 'order-declare',
    name: 'NO_ROLE before the declare_no_premises/based_on conflict (authorization checks come first)',
    who: 'dave',
    op: 'put',
    args: (c) => put(c.rec, 'title', 'x', 0, { based_on: [{ field: 'status', version: 0 }], declare_no_premises: true }),
    code: 'NO_ROLE',
    notOn: { mcp: 'svc_put has no declare_no_premises argument' },
  },
  {
    key: 'mal-entries-limit',
    name: 'MALFORMED: entries_limit below 0',
    op: 'get',
    args: (c) => ({ record: c.rec, entries_limit: -1 }),
    code: 'MALFORMED',
  },
  {
    key: 'mal-after',
    name: 'MALFORMED: an after cursor the gateway did not issue',
    op: 'query',
    args: () => ({ class: 'pcase', filters: { title: 'x' }, after: 'forged' }),
    code: 'MALFORMED',
  },
  {
    key: 'mal-filter-append',
    name: 'MALFORMED: a filter on an append field',
    op: 'query',
    args: () => ({ class: 'pcase', filters: { notes: 'x' } }),
    code: 'MALFORMED',
  },
  {
    key: 'mal-no-document',
    name: 'MALFORMED: checkpoint save without document',
    op: 'checkpointSave',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
    },
    args: (c) => ({ record: c.rec }),
    code: 'MALFORMED',
  },
  {
    key: 'mal-ambiguous',
    name: 'MALFORMED: checkpoint save by an identity holding two roles',
    cls: 'pduo',
    op: 'checkpointSave',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
    },
    args: (c) => ({ record: c.rec, document: { summary: 's' } }),
    code: 'MALFORMED',
  },
  {
    key: 'mal-load-role',
    name: 'MALFORMED: checkpoint load without role by an identity holding two roles',
    cls: 'pduo',
    op: 'checkpointLoad',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
    },
    args: (c) => ({ record: c.rec }),
    code: 'MALFORMED',
  },

  // ---- UNAUTHENTICATED, NO_ROLE, SCOPE_DENIED, WEAK_IDENTITY, IDENTITY_MISMATCH ---------------
  {
    key: 'unauth-get',
    name: 'UNAUTHENTICATED: get with an unknown key (MCP: 401 on the transport)',
    who: 'not-a-key',
    op: 'get',
    args: (c) => ({ record: c.rec }),
    code: 'UNAUTHENTICATED',
  },
  {
    key: 'unauth-put',
    name: 'UNAUTHENTICATED: put with an unknown key (MCP: 401 on the transport)',
    who: 'not-a-key',
    op: 'put',
    args: (c) => put(c.rec, 'title', 'x'),
    code: 'UNAUTHENTICATED',
  },
  {
    key: 'no-role-get',
    name: 'NO_ROLE: get by an identity without a role in the class',
    who: 'dave',
    op: 'get',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
    },
    args: (c) => ({ record: c.rec }),
    code: 'NO_ROLE',
  },
  {
    key: 'no-role-claim',
    name: 'NO_ROLE: claim by an identity without a role in the class',
    who: 'dave',
    op: 'claim',
    args: (c) => ({ record: c.rec, field: 'job', lease_seconds: 10 }),
    code: 'NO_ROLE',
  },
  {
    key: 'scope-read',
    name: 'SCOPE_DENIED: get of a field the role may not read',
    who: 'bob',
    op: 'get',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'severity', 1));
    },
    args: (c) => ({ record: c.rec, fields: ['title', 'severity'] }),
    code: 'SCOPE_DENIED',
  },
  {
    key: 'scope-write',
    name: 'SCOPE_DENIED: put of a field the role may not write',
    who: 'bob',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
    },
    args: (c) => put(c.rec, 'title', 'bob was here', 1, { evidence: 'e' }),
    code: 'SCOPE_DENIED',
  },
  {
    key: 'weak-class',
    name: 'WEAK_IDENTITY: below the class floor (required, presented, no field)',
    cls: 'pfort',
    op: 'put',
    args: (c) => put(c.rec, 'gate', 'open'),
    code: 'WEAK_IDENTITY',
    check: (b) => expect(b).not.toHaveProperty('field'),
  },
  {
    key: 'weak-field',
    name: 'WEAK_IDENTITY: below a field floor (with field)',
    op: 'put',
    args: (c) => put(c.rec, 'strong', 1),
    code: 'WEAK_IDENTITY',
    check: (b) => expect(b).toMatchObject({ field: 'strong', required: 'sa-bound', presented: 'shared-secret' }),
  },
  {
    key: 'weak-checkpoint',
    name: 'WEAK_IDENTITY: checkpoint save below the class floor',
    cls: 'pfort',
    op: 'checkpointSave',
    args: (c) => ({ record: c.rec, document: { summary: 's' } }),
    code: 'WEAK_IDENTITY',
  },
  {
    key: 'idm-get',
    name: 'IDENTITY_MISMATCH: get with a scope another identity uses',
    who: 'carol',
    op: 'get',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
      await ok('alice', 'get', { record: c.rec }, c.scope);
    },
    scope: (c) => c.scope,
    args: (c) => ({ record: c.rec }),
    code: 'IDENTITY_MISMATCH',
  },
  {
    key: 'idm-put',
    name: 'IDENTITY_MISMATCH: put with a scope another identity uses',
    who: 'carol',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
      await ok('alice', 'get', { record: c.rec }, c.scope);
    },
    scope: (c) => c.scope,
    args: (c) => put(c.rec, 'title', 'carol', 1),
    code: 'IDENTITY_MISMATCH',
  },

  // ---- NOT_FOUND ------------------------------------------------------------------------------
  {
    key: 'nf-class',
    name: 'NOT_FOUND: unknown class',
    op: 'get',
    args: (c) => ({ record: `nosuchclass/${c.id}` }),
    code: 'NOT_FOUND',
  },
  {
    key: 'nf-class-query',
    name: 'NOT_FOUND: query of an unknown class',
    op: 'query',
    args: () => ({ class: 'nosuchclass', filters: { title: 'x' } }),
    code: 'NOT_FOUND',
  },
  {
    key: 'nf-record',
    name: 'NOT_FOUND: unknown record',
    op: 'get',
    args: (c) => ({ record: c.rec }),
    code: 'NOT_FOUND',
  },
  {
    key: 'nf-checkpoint',
    name: 'NOT_FOUND: checkpoint save on a record that does not exist',
    op: 'checkpointSave',
    args: (c) => ({ record: c.rec, document: DOC }),
    code: 'NOT_FOUND',
  },

  // ---- STALE, STALE_PREMISE, HELD -------------------------------------------------------------
  {
    key: 'stale',
    name: 'STALE: full body with current value, author, evidence and diff',
    op: 'put',
    async setup(c) {
      await ok('carol', 'put', put(c.rec, 'title', 'first', 0, { evidence: 'carol saw it' }));
    },
    args: (c) => put(c.rec, 'title', 'second', 0, { evidence: 'late reader' }),
    code: 'STALE',
    check(b) {
      expect(b).toMatchObject({ field: 'title', your_version: 0, current_version: 1, current_value: 'first', current_author: 'apikey:carol', current_evidence: 'carol saw it' });
      expect(b.diff).toContain('+"second"');
    },
  },
  {
    key: 'stale-blind',
    name: 'STALE: on a field the role may write but not read (current_* null, empty diff)',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'secret', 'a'));
    },
    args: (c) => put(c.rec, 'secret', 'b'),
    code: 'STALE',
    check: (b) => expect(b).toMatchObject({ current_value: null, current_author: null, diff: '' }),
  },
  {
    key: 'stale-premise',
    name: 'STALE_PREMISE: a premise moved (moved[])',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'status', 'open'));
      await ok('carol', 'put', put(c.rec, 'status', 'investigating', 1, { evidence: 'carol' }));
    },
    args: (c) => put(c.rec, 'severity', 2, 0, { based_on: [{ field: 'status', version: 1 }] }),
    code: 'STALE_PREMISE',
    check: (b) => expect(b.moved).toEqual([{ field: 'status', your_version: 1, current_version: 2, current_author: 'apikey:carol', current_evidence: 'carol' }]),
  },
  {
    key: 'stale-fence',
    name: 'STALE_PREMISE: an append fenced on a lease the writer no longer holds',
    op: 'append',
    async setup(c) {
      await ok('alice', 'claim', { record: c.rec, field: 'job', lease_seconds: 60 });
      await expire('pcase', c.id, 'job');
    },
    args: (c) => ({ record: c.rec, field: 'notes', entry: { text: 'late' }, evidence: 'e', based_on: [{ field: 'job', version: 1, kind: 'fence' }] }),
    code: 'STALE_PREMISE',
  },
  {
    key: 'held',
    name: 'HELD: task leased by another identity (owner, expiry, version; no record)',
    who: 'carol',
    op: 'claim',
    async setup(c) {
      await ok('alice', 'claim', { record: c.rec, field: 'job', lease_seconds: 300 });
    },
    args: (c) => ({ record: c.rec, field: 'job', lease_seconds: 30 }),
    code: 'HELD',
    check(b) {
      expect(b).toMatchObject({ field: 'job', owner: 'apikey:alice', version: 1 });
      expect(b).not.toHaveProperty('record');
    },
  },

  // ---- 422s -----------------------------------------------------------------------------------
  {
    key: 'ev-put',
    name: 'EVIDENCE_REQUIRED: put on a field that requires evidence',
    op: 'put',
    args: (c) => put(c.rec, 'proof', { ok: true }),
    code: 'EVIDENCE_REQUIRED',
  },
  {
    key: 'ev-append',
    name: 'EVIDENCE_REQUIRED: append without evidence',
    op: 'append',
    args: (c) => ({ record: c.rec, field: 'notes', entry: { text: 'no source' } }),
    code: 'EVIDENCE_REQUIRED',
  },
  {
    key: 'unknown-put',
    name: 'UNKNOWN_FIELD: put on a field not in the class',
    op: 'put',
    args: (c) => put(c.rec, 'nosuch', 1),
    code: 'UNKNOWN_FIELD',
  },
  {
    key: 'unknown-get',
    name: 'UNKNOWN_FIELD: get naming a field not in the class',
    op: 'get',
    args: (c) => ({ record: c.rec, fields: ['title', 'nosuch'] }),
    code: 'UNKNOWN_FIELD',
  },
  {
    key: 'unknown-premise',
    name: 'UNKNOWN_FIELD: a premise naming a field not in the class',
    op: 'put',
    args: (c) => put(c.rec, 'title', 'x', 0, { based_on: [{ field: 'nosuch', version: 1 }] }),
    code: 'UNKNOWN_FIELD',
  },
  {
    key: 'not-writable',
    name: 'NOT_WRITABLE: put on an append field',
    op: 'put',
    args: (c) => put(c.rec, 'notes', { text: 'x' }),
    code: 'NOT_WRITABLE',
  },
  {
    key: 'not-writable-task',
    name: 'NOT_WRITABLE: put on a task field',
    op: 'put',
    args: (c) => put(c.rec, 'job', 'mine'),
    code: 'NOT_WRITABLE',
  },
  {
    key: 'not-append',
    name: 'NOT_APPEND_FIELD: append on a versioned field',
    op: 'append',
    args: (c) => ({ record: c.rec, field: 'title', entry: 'x', evidence: 'e' }),
    code: 'NOT_APPEND_FIELD',
  },
  {
    key: 'not-task',
    name: 'NOT_TASK_FIELD: claim on a versioned field',
    op: 'claim',
    args: (c) => ({ record: c.rec, field: 'title', lease_seconds: 10 }),
    code: 'NOT_TASK_FIELD',
  },
  {
    key: 'cp-gate',
    name: 'INVALID_CHECKPOINT: resolve before the required role checkpointed',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'status', 'open'));
    },
    args: (c) => put(c.rec, 'status', 'resolved', 1),
    code: 'INVALID_CHECKPOINT',
  },
  {
    key: 'cp-sections',
    name: 'INVALID_CHECKPOINT: document missing a required section',
    op: 'checkpointSave',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
    },
    args: (c) => ({ record: c.rec, document: { summary: 'only' } }),
    code: 'INVALID_CHECKPOINT',
  },
  {
    key: 'cp-size',
    name: 'INVALID_CHECKPOINT: document over 64 KiB',
    op: 'checkpointSave',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
    },
    args: (c) => ({ record: c.rec, document: BIG_DOC }),
    code: 'INVALID_CHECKPOINT',
  },
  {
    key: 'cp-not-object',
    name: 'INVALID_CHECKPOINT: document that is not an object',
    op: 'checkpointSave',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'title', 't'));
    },
    args: (c) => ({ record: c.rec, document: ['a', 'list'] }),
    code: 'INVALID_CHECKPOINT',
    notOn: { grpc: 'CheckpointSaveRequest.document is a google.protobuf.Struct: always an object' },
  },
];

/** Writes to a class removed after setup (run in their own describe, below). */
const GONE: Scenario[] = [
  {
    key: 'gone-put',
    name: 'CLASS_GONE: put to a deleted class',
    cls: 'prelic',
    op: 'put',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'label', 'vase'));
    },
    args: (c) => put(c.rec, 'label', 'urn', 1),
    code: 'CLASS_GONE',
  },
  {
    key: 'gone-append',
    name: 'CLASS_GONE: append to a deleted class',
    cls: 'prelic',
    op: 'append',
    args: (c) => ({ record: c.rec, field: 'log', entry: 1, evidence: 'e' }),
    code: 'CLASS_GONE',
  },
  {
    key: 'gone-claim',
    name: 'CLASS_GONE: claim in a deleted class',
    cls: 'prelic',
    op: 'claim',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'label', 'vase'));
    },
    args: (c) => ({ record: c.rec, field: 'job' }),
    code: 'CLASS_GONE',
  },
  {
    key: 'gone-checkpoint',
    name: 'CLASS_GONE: checkpoint save in a deleted class',
    cls: 'prelic',
    op: 'checkpointSave',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'label', 'vase'));
    },
    args: (c) => ({ record: c.rec, document: { summary: 's' } }),
    code: 'CLASS_GONE',
  },
  {
    key: 'gone-get',
    name: 'get of a deleted class still works',
    cls: 'prelic',
    op: 'get',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'label', 'vase', 0, { evidence: 'catalogue' }));
      await ok('alice', 'claim', { record: c.rec, field: 'job' });
    },
    args: (c) => ({ record: c.rec }),
    code: 'OK',
  },
  {
    key: 'gone-load',
    name: 'checkpoint load in a deleted class still works',
    cls: 'prelic',
    op: 'checkpointLoad',
    async setup(c) {
      await ok('alice', 'put', put(c.rec, 'label', 'vase'));
      await ok('alice', 'checkpointSave', { record: c.rec, document: { summary: 's' } });
    },
    args: (c) => ({ record: c.rec }),
    code: 'OK',
  },
];

// ---- running a scenario -----------------------------------------------------------------------

function ctxOf(s: Scenario, tr: Transport): Ctx {
  const id = `${s.key}-${tr}`;
  return {
    tr,
    id,
    rec: `${s.cls ?? 'pcase'}/${id}`,
    sub: (tag) => `${s.key}-${tag}-${tr}`,
    scope: `scope-${s.key}-${tr}`,
    state: {},
  };
}

const applies = (s: Scenario, tr: Transport) => s.notOn?.[tr] === undefined;

async function setupAll(s: Scenario): Promise<Map<Transport, Record<string, any>>> {
  const states = new Map<Transport, Record<string, any>>();
  for (const tr of TRANSPORTS) {
    if (!applies(s, tr)) continue;
    states.set(tr, (await s.setup?.(ctxOf(s, tr))) ?? {});
  }
  return states;
}

async function runScenario(s: Scenario, prepared?: Map<Transport, Record<string, any>>): Promise<void> {
  const out: Partial<Record<Transport, Result>> = {};
  const after: Partial<Record<Transport, Result>> = {};
  for (const tr of TRANSPORTS) {
    if (!applies(s, tr)) continue;
    const c = ctxOf(s, tr);
    c.state = prepared ? (prepared.get(tr) ?? {}) : ((await s.setup?.(c)) ?? {});
    out[tr] = await adapters[tr].run(s.who ?? 'alice', s.op, s.args(c), s.scope ? { scope: s.scope(c) } : {});
    // The effect, read back over HTTP: the same request must leave the same record.
    after[tr] = await adapters.http.run('alice', 'get', { record: c.rec });
  }

  const http = out.http!;
  const created = s.code === 'OK' && s.created === true;
  for (const tr of TRANSPORTS) {
    const r = out[tr];
    if (!r) continue;
    const what = `${tr} ${s.op}: ${JSON.stringify(r.body)?.slice(0, 600)}`;
    expect.soft(r.code, `code on ${what}`).toBe(s.code);
    expect.soft(r.status, `transport status on ${what}`).toBe(expectedStatus(tr, s.code, created));
    expect.soft(typeof r.body === 'object' && r.body !== null, `body is a JSON object on ${what}`).toBe(true);
    if (s.code !== 'OK') expect.soft(typeof (r.body as any)?.message, `error body has a message on ${what}`).toBe('string');
    if (tr !== 'http') {
      expect.soft(normalize(r.body), `${tr} body equals the HTTP body`).toEqual(normalize(http.body));
      expect.soft(normalize(after[tr]!.body), `${tr}: the record afterwards equals HTTP's`).toEqual(normalize(after.http!.body));
    }
  }
  if (s.code === 'OK') expect.soft(http.created, 'HTTP 201 exactly when the write created the record').toBe(created);
  if (out.grpc) expect.soft(out.grpc.created, 'gRPC `created` agrees with HTTP 201').toBe(http.created);
  if (out.mcp) expect.soft(out.mcp.created, 'MCP has no created').toBeUndefined();
  if (s.check && http.code === s.code) s.check(http.body);
}

// ---- the table --------------------------------------------------------------------------------

const REQUIRED_CODES = [
  'MALFORMED',
  'UNAUTHENTICATED',
  'NO_ROLE',
  'SCOPE_DENIED',
  'WEAK_IDENTITY',
  'IDENTITY_MISMATCH',
  'NOT_FOUND',
  'STALE',
  'STALE_PREMISE',
  'HELD',
  'CLASS_GONE',
  'EVIDENCE_REQUIRED',
  'UNKNOWN_FIELD',
  'NOT_WRITABLE',
  'NOT_APPEND_FIELD',
  'NOT_TASK_FIELD',
  'INVALID_CHECKPOINT',
];

describe('the table', () => {
  test('has at least 40 scenarios covering every operation\'s success and every error code', () => {
    const all = [...SCENARIOS, ...GONE];
    expect(all.length).toBeGreaterThanOrEqual(40);
    expect(new Set(all.map((s) => s.key)).size).toBe(all.length);
    const codes = new Set(all.map((s) => s.code));
    for (const code of REQUIRED_CODES) expect(codes, code).toContain(code);
    const okOps = new Set(all.filter((s) => s.code === 'OK').map((s) => s.op));
    expect([...okOps].sort()).toEqual(['append', 'checkpointLoad', 'checkpointSave', 'claim', 'get', 'put', 'query']);
    // Not applicable somewhere: kept to what a transport cannot express.
    expect(all.filter((s) => s.notOn).length).toBeLessThanOrEqual(4);
  });
});

describe('parity: HTTP, MCP and gRPC answer the same code and body', () => {
  for (const s of SCENARIOS) {
    test(`${s.name}${s.notOn ? ` [not on ${Object.keys(s.notOn).join(', ')}]` : ''}`, () => runScenario(s));
  }

});

describe('parity after a class is deleted (CLASS_GONE; reads keep working)', () => {
  const prepared = new Map<string, Map<Transport, Record<string, any>>>();
  beforeAll(async () => {
    for (const s of GONE) prepared.set(s.key, await setupAll(s));
    t.writeClasses(PARITY_LIVE);
    await t.gw.services.sweepOnce();
  });
  for (const s of GONE) test(s.name, () => runScenario(s, prepared.get(s.key)));
});
