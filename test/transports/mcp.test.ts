/**
 * The MCP transport (interface.md "MCP", decisions §7) against a real gateway and PostgreSQL,
 * called with the SDK's own client over streamable HTTP. A tool's structuredContent is the
 * HTTP body, so rejections are compared with what HTTP answers in the same situation.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { tasks } from '../fixtures/task-classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
const clients: Client[] = [];

beforeAll(async () => {
  t = await startTestGateway([incident, tasks]);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await t?.close();
});

let seq = 0;
const fresh = (prefix = 'm') => `${prefix}-${++seq}`;

interface ConnectOpts {
  scope?: string;
  url?: string;
  fetch?: typeof fetch;
}

/** An SDK client as a host would configure it: the URL and two headers. */
async function connect(who: string | null, opts: ConnectOpts = {}): Promise<Client> {
  const headers: Record<string, string> = {};
  if (who !== null) headers.authorization = `Bearer ${KEYS[who] ?? who}`;
  if (opts.scope) headers['x-svc-scope'] = opts.scope;
  const client = new Client({ name: 'kslate-test', version: '0.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${opts.url ?? t.url}/mcp`), {
    requestInit: { headers },
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

interface ToolOut {
  isError: boolean;
  body: any;
}

/** Call a tool; checks that content[0].text and structuredContent carry the same JSON. */
async function call(client: Client, name: string, args: Record<string, unknown>): Promise<ToolOut> {
  const res: any = await client.callTool({ name, arguments: args });
  expect(res.content).toHaveLength(1);
  expect(res.content[0].type).toBe('text');
  expect(JSON.parse(res.content[0].text)).toEqual(res.structuredContent);
  return { isError: res.isError === true, body: res.structuredContent };
}

/** The body of a successful call (fails the test with the error body otherwise). */
async function ok(client: Client, name: string, args: Record<string, unknown>): Promise<any> {
  const out = await call(client, name, args);
  expect(out.isError, JSON.stringify(out.body)).toBe(false);
  return out.body;
}

/** The body of a rejected call, which must carry `code`. */
async function rejected(client: Client, name: string, args: Record<string, unknown>, code: string): Promise<any> {
  const out = await call(client, name, args);
  expect(out.isError, JSON.stringify(out.body)).toBe(true);
  expect(out.body).toMatchObject({ error: code });
  expect(typeof out.body.message).toBe('string');
  return out.body;
}

/** A raw JSON-RPC POST to /mcp, as a host without the SDK would send it. */
function rawPost(message: unknown, headers: Record<string, string>, url = t.url): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify(message),
  });
}

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
};

async function latencyCount(): Promise<number> {
  const text = await (await fetch(`${t.gw.metricsUrl}/metrics`)).text();
  const m = /^svc_write_latency_seconds_count (\d+)/m.exec(text);
  return m ? Number(m[1]) : 0;
}

describe('tools/list', () => {
  test('lists the six tools and svc_transaction (issue 33) with JSON Schema inputs and descriptions', async () => {
    const alice = await connect('alice');
    const { tools } = await alice.listTools();
    const byName = Object.fromEntries(tools.map((tl) => [tl.name, tl]));
    expect(Object.keys(byName).sort()).toEqual(['svc_append', 'svc_checkpoint', 'svc_claim', 'svc_get', 'svc_put', 'svc_query', 'svc_transaction']);
    for (const tl of tools) {
      expect(tl.inputSchema.type).toBe('object');
      expect(tl.description!.length).toBeGreaterThan(100);
    }
    const props = (name: string) => Object.keys(byName[name].inputSchema.properties ?? {}).sort();
    expect(props('svc_get')).toEqual(['entries_before', 'entries_limit', 'fields', 'min_lsn', 'record']);
    // Every write tool takes idempotency_key and dry_run (issue 33); put and append ttl_seconds (issue 37).
    expect(props('svc_put')).toEqual(['based_on', 'dry_run', 'evidence', 'expected_version', 'field', 'idempotency_key', 'invocation', 'record', 'ttl_seconds', 'value']);
    expect(props('svc_append')).toEqual(['based_on', 'dry_run', 'entry', 'evidence', 'field', 'idempotency_key', 'invocation', 'record', 'ttl_seconds']);
    expect(props('svc_claim')).toEqual(['dry_run', 'field', 'idempotency_key', 'invocation', 'lease_seconds', 'record', 'renew']);
    expect(props('svc_checkpoint')).toEqual(['action', 'document', 'dry_run', 'idempotency_key', 'min_lsn', 'record', 'role']);
    expect(props('svc_query')).toEqual(['after', 'class', 'filters', 'limit', 'min_lsn']);
    expect(byName.svc_put.inputSchema.required).toEqual(['record', 'field', 'value']);
    expect(byName.svc_append.inputSchema.required).toEqual(['record', 'field', 'entry', 'evidence']);
    expect(byName.svc_checkpoint.inputSchema.required).toEqual(['record', 'action']);
    expect((byName.svc_checkpoint.inputSchema.properties as any).action.enum).toEqual(['save', 'load']);
    expect(byName.svc_query.inputSchema.required).toEqual(['class']);
    const premise = (byName.svc_put.inputSchema.properties as any).based_on.items;
    expect(Object.keys(premise.properties).sort()).toEqual(['field', 'kind', 'version']);
    expect(premise.properties.kind.enum).toEqual(['fence']);
    expect(byName.svc_put.description).toMatch(/expected_version/);
    expect(byName.svc_put.description).toMatch(/STALE/);
    expect(byName.svc_claim.description).toMatch(/HELD/);
  });

  test('params that do not match the method\'s schema: -32602 Invalid params naming what is wrong, not -32603', async () => {
    const cases: [unknown, RegExp][] = [
      [{ method: 'tools/call', params: { arguments: {} } }, /Invalid params of tools\/call: params\.name: .*expected string/],
      [{ method: 'tools/call', params: { name: 'svc_get', arguments: 'x' } }, /params\.arguments: /],
      [{ method: 'resources/read', params: {} }, /Invalid params of resources\/read: params\.uri: /],
      [{ method: 'tools/list', params: { cursor: 5 } }, /params\.cursor: /],
      [{ method: 'initialize', params: {} }, /Invalid params of initialize: params\.protocolVersion: .*; params\.capabilities: /],
    ];
    for (const [message, said] of cases) {
      const res = await rawPost({ jsonrpc: '2.0', id: 7, ...(message as object) }, { authorization: `Bearer ${KEYS.alice}` });
      const body = await res.json();
      expect(body.error, JSON.stringify(body)).toMatchObject({ code: ErrorCode.InvalidParams, message: expect.stringMatching(said) });
      // One line a person can read, not the schema library's JSON dump.
      expect(body.error.message).not.toContain('\n');
    }
  });

  test('an unknown tool is a protocol error (invalid params), not a tool result', async () => {
    const alice = await connect('alice');
    await expect(alice.callTool({ name: 'svc_history', arguments: { record: 'incident/x' } })).rejects.toMatchObject({
      code: ErrorCode.InvalidParams,
    });
  });
});

describe('svc_put and svc_get', () => {
  test('round trip: the put result and the record as HTTP returns them', async () => {
    const alice = await connect('alice');
    const id = fresh();
    const put = await ok(alice, 'svc_put', {
      record: `incident/${id}`,
      field: 'title',
      value: 'disk full',
      expected_version: 0,
      evidence: 'pager alert',
      based_on: [],
      invocation: { run: 'r-1', tool_call: 'c-7' },
    });
    expect(put).toEqual({ record: `incident/${id}`, field: 'title', version: 1, record_version: 1 });
    await ok(alice, 'svc_put', { record: `incident/${id}`, field: 'severity', value: 2, expected_version: 0 });

    const got = await ok(alice, 'svc_get', { record: `incident/${id}` });
    expect(got).toMatchObject({ record: `incident/${id}`, record_version: 2 });
    expect(got.fields.title).toMatchObject({
      value: 'disk full',
      version: 1,
      author: 'apikey:alice',
      identity_strength: 'shared-secret',
      evidence: 'pager alert',
      invocation: { run: 'r-1', tool_call: 'c-7' },
    });
    expect(got).toEqual((await t.call('alice', 'GET', `/v1/records/incident/${id}`)).body);

    // `fields` as a list, and HTTP's comma-separated form.
    const some = await ok(alice, 'svc_get', { record: `incident/${id}`, fields: ['severity'] });
    expect(Object.keys(some.fields)).toEqual(['severity']);
    const both = await ok(alice, 'svc_get', { record: `incident/${id}`, fields: 'title,severity' });
    expect(Object.keys(both.fields).sort()).toEqual(['severity', 'title']);
  });

  test('STALE is an error result whose body equals HTTP\'s for the same situation', async () => {
    const alice = await connect('alice');
    const id = fresh();
    await ok(alice, 'svc_put', { record: `incident/${id}`, field: 'title', value: 'first', expected_version: 0 });
    const args = { value: 'second', expected_version: 0, evidence: 'late reader' };
    const stale = await rejected(alice, 'svc_put', { record: `incident/${id}`, field: 'title', ...args }, 'STALE');
    expect(stale).toMatchObject({
      field: 'title',
      your_version: 0,
      current_version: 1,
      current_value: 'first',
      current_author: 'apikey:alice',
    });
    expect(stale.diff).toContain('-"first"');
    expect(stale.diff).toContain('+"second"');
    // A rejected write changes nothing, so HTTP now finds the very same situation.
    const http = await t.call('alice', 'PUT', `/v1/records/incident/${id}/fields/title`, args);
    expect(http.status).toBe(409);
    expect(stale).toEqual(http.body);

    // What the description tells the model to do: retry with current_version.
    const retry = await ok(alice, 'svc_put', {
      record: `incident/${id}`,
      field: 'title',
      value: 'second',
      expected_version: stale.current_version,
    });
    expect(retry.version).toBe(2);
  });

  test('arguments are not validated by the transport: MALFORMED carries HTTP\'s message', async () => {
    const alice = await connect('alice');
    const id = fresh();
    const cases: { args: Record<string, unknown>; body: unknown }[] = [
      { args: { value: 'x' }, body: { value: 'x' } }, // no expected_version
      { args: { value: 'x', expected_version: -1 }, body: { value: 'x', expected_version: -1 } },
      { args: { value: 5, expected_version: 0 }, body: { value: 5, expected_version: 0 } }, // type
      { args: { value: 'x', expected_version: 0, invocation: { pad: 'x'.repeat(2000) } }, body: { value: 'x', expected_version: 0, invocation: { pad: 'x'.repeat(2000) } } },
      { args: { value: 'x', expected_version: 0, based_on: [{ field: 'status' }] }, body: { value: 'x', expected_version: 0, based_on: [{ field: 'status' }] } },
    ];
    for (const c of cases) {
      const mcp = await rejected(alice, 'svc_put', { record: `incident/${id}`, field: 'title', ...c.args }, 'MALFORMED');
      const http = await t.call('alice', 'PUT', `/v1/records/incident/${id}/fields/title`, c.body);
      expect(http.status).toBe(400);
      expect(mcp).toEqual(http.body);
    }
  });

  test('record strings: split at the first "/"; the handler judges the id in order', async () => {
    const alice = await connect('alice');
    const noSlash = await rejected(alice, 'svc_get', { record: 'incident' }, 'MALFORMED');
    expect(noSlash.message).toMatch(/record id is empty/);
    const emptyId = await rejected(alice, 'svc_get', { record: 'incident/' }, 'MALFORMED');
    expect(emptyId.message).toMatch(/record id is empty/);
    const nested = await rejected(alice, 'svc_get', { record: 'incident/a/b' }, 'MALFORMED');
    expect(nested.message).toMatch(/may not contain "\/"/);
    // The class is checked first, as on HTTP: an unknown class is NOT_FOUND even without an id.
    await rejected(alice, 'svc_get', { record: 'nosuch' }, 'NOT_FOUND');
    // Without a record there is no operation to call.
    const missing = await rejected(alice, 'svc_get', {}, 'MALFORMED');
    expect(missing.message).toMatch(/record/);
    await rejected(alice, 'svc_get', { record: `incident/${fresh()}` }, 'NOT_FOUND');
    // Role checks as on HTTP: bob is a reviewer and may not write titles.
    const bob = await connect('bob');
    await rejected(bob, 'svc_put', { record: `incident/${fresh()}`, field: 'title', value: 'x', expected_version: 0 }, 'SCOPE_DENIED');
  });

  test('X-Svc-Scope reaches the tools: premises are inferred from reads in the scope', async () => {
    const scope = `run-${fresh()}`;
    const alice = await connect('alice', { scope });
    const id = fresh();
    const rec = `incident/${id}`;
    await ok(alice, 'svc_put', { record: rec, field: 'severity', value: 3, expected_version: 0, based_on: [] });
    await ok(alice, 'svc_get', { record: rec, fields: ['severity'] });
    await ok(alice, 'svc_put', { record: rec, field: 'title', value: 'inferred', expected_version: 0 });
    const got = await ok(alice, 'svc_get', { record: rec });
    expect(got.fields.title.based_on).toEqual([{ field: 'severity', version: 1, inferred: true }]);
    // The scope belongs to alice now: carol using it is refused.
    const carol = await connect('carol', { scope });
    await rejected(carol, 'svc_get', { record: rec }, 'IDENTITY_MISMATCH');
  });
});

describe('svc_append', () => {
  test('appends with evidence; refuses without it', async () => {
    const alice = await connect('alice');
    const rec = `incident/${fresh()}`;
    const first = await ok(alice, 'svc_append', { record: rec, field: 'notes', entry: { text: 'paged' }, evidence: 'pagerduty' });
    expect(first).toEqual({ record: rec, field: 'notes', seq: 1, record_version: 1 });
    const second = await ok(alice, 'svc_append', { record: rec, field: 'notes', entry: { text: 'ack' }, evidence: 'slack' });
    expect(second.seq).toBe(2);
    await rejected(alice, 'svc_append', { record: rec, field: 'notes', entry: { text: 'no source' } }, 'EVIDENCE_REQUIRED');
    await rejected(alice, 'svc_append', { record: rec, field: 'title', entry: 'x', evidence: 'e' }, 'NOT_APPEND_FIELD');
    const got = await ok(alice, 'svc_get', { record: rec, fields: ['notes'], entries_limit: 1 });
    expect(got.fields.notes.version).toBe(2);
    expect(got.fields.notes.entries).toHaveLength(1);
  });
});

describe('svc_claim', () => {
  test('claim, HELD for another identity (same body as HTTP), renew, release', async () => {
    const alice = await connect('alice');
    const bob = await connect('bob');
    const rec = `tasks/${fresh()}`;
    const claimed = await ok(alice, 'svc_claim', { record: rec, field: 'job', lease_seconds: 120, invocation: { run: 'a' } });
    expect(claimed).toMatchObject({ record: rec, field: 'job', owner: 'apikey:alice', version: 1, record_version: 1 });
    expect(typeof claimed.lease_expires_at).toBe('string');

    const held = await rejected(bob, 'svc_claim', { record: rec, field: 'job' }, 'HELD');
    expect(held).toMatchObject({ field: 'job', owner: 'apikey:alice', lease_expires_at: claimed.lease_expires_at, version: 1 });
    expect(held).not.toHaveProperty('record');
    const http = await t.call('bob', 'PUT', `/v1/records/${rec}/fields/job/claim`);
    expect(http.status).toBe(409);
    expect(held).toEqual(http.body);

    const renewed = await ok(alice, 'svc_claim', { record: rec, field: 'job', renew: true });
    expect(renewed).toMatchObject({ owner: 'apikey:alice', version: 2 });
    // A fence premise on the lease just renewed lets the write through.
    await ok(alice, 'svc_put', {
      record: rec,
      field: 'title',
      value: 'done',
      expected_version: 0,
      based_on: [{ field: 'job', version: renewed.version, kind: 'fence' }],
    });

    const released = await ok(alice, 'svc_claim', { record: rec, field: 'job', lease_seconds: 0 });
    expect(released).not.toHaveProperty('owner');
    expect(released).not.toHaveProperty('lease_expires_at');
    await ok(bob, 'svc_claim', { record: rec, field: 'job' });

    const noDefault = await rejected(alice, 'svc_claim', { record: rec, field: 'chore' }, 'MALFORMED');
    expect(noDefault.message).toMatch(/lease_seconds is required/);
    await rejected(alice, 'svc_claim', { record: rec, field: 'job', lease_seconds: 86_401 }, 'MALFORMED');
  });
});

describe('svc_checkpoint', () => {
  test('save with the required sections, load with changed_fields', async () => {
    const alice = await connect('alice');
    const rec = `incident/${fresh()}`;
    // The record must exist first.
    await rejected(alice, 'svc_checkpoint', { record: rec, action: 'save', document: { summary: 's', next_steps: [] } }, 'NOT_FOUND');
    await ok(alice, 'svc_put', { record: rec, field: 'title', value: 'x', expected_version: 0 });

    const missing = await rejected(alice, 'svc_checkpoint', { record: rec, action: 'save', document: { summary: 'only' } }, 'INVALID_CHECKPOINT');
    expect(missing.message).toMatch(/next_steps/);
    await rejected(alice, 'svc_checkpoint', { record: rec, action: 'save' }, 'MALFORMED');

    const doc = { summary: 'checked the disk', next_steps: ['grow the volume'] };
    const saved = await ok(alice, 'svc_checkpoint', { record: rec, action: 'save', document: doc });
    expect(saved).toMatchObject({ record: rec, role: 'responder', record_version: 1 });
    expect(Number.isInteger(saved.checkpoint_id)).toBe(true);

    await ok(alice, 'svc_put', { record: rec, field: 'severity', value: 1, expected_version: 0 });
    const carol = await connect('carol'); // the same role: a replacement agent continues
    const loaded = await ok(carol, 'svc_checkpoint', { record: rec, action: 'load' });
    expect(loaded).toMatchObject({ record: rec, role: 'responder', document: doc, record_version: 1 });
    expect(loaded.changed_fields).toEqual([{ field: 'severity', version: 1, author: 'apikey:alice', evidence: null }]);
    expect(loaded).toEqual((await t.call('carol', 'GET', `/v1/records/${rec}/checkpoint`)).body);

    const wrongRole = await rejected(carol, 'svc_checkpoint', { record: rec, action: 'load', role: 'reviewer' }, 'MALFORMED');
    expect(wrongRole).toEqual((await t.call('carol', 'GET', `/v1/records/${rec}/checkpoint?role=reviewer`)).body);
    const badAction = await rejected(alice, 'svc_checkpoint', { record: rec, action: 'delete' }, 'MALFORMED');
    expect(badAction.message).toMatch(/save.*load/);
  });
});

describe('svc_query', () => {
  test('filters by value (strings as is, other JSON as its text) and pages with after', async () => {
    const alice = await connect('alice');
    const tag = fresh('q');
    const ids = [fresh(), fresh(), fresh()];
    for (const id of ids) {
      await ok(alice, 'svc_put', { record: `incident/${id}`, field: 'title', value: tag, expected_version: 0 });
      await ok(alice, 'svc_put', { record: `incident/${id}`, field: 'severity', value: id === ids[1] ? 4 : 5, expected_version: 0 });
    }
    const all = await ok(alice, 'svc_query', { class: 'incident', filters: { title: tag } });
    expect(all.records.map((r: any) => r.record)).toEqual(ids.map((id) => `incident/${id}`));
    expect(all).not.toHaveProperty('next_after');

    const four = await ok(alice, 'svc_query', { class: 'incident', filters: { title: tag, severity: 4 } });
    expect(four.records.map((r: any) => r.record)).toEqual([`incident/${ids[1]}`]);
    expect(four).toEqual((await t.call('alice', 'GET', `/v1/records/incident?title=${tag}&severity=4`)).body);

    const page1 = await ok(alice, 'svc_query', { class: 'incident', filters: { title: tag }, limit: 2 });
    expect(page1.records).toHaveLength(2);
    expect(typeof page1.next_after).toBe('string');
    const page2 = await ok(alice, 'svc_query', { class: 'incident', filters: { title: tag }, limit: 2, after: page1.next_after });
    expect(page2.records.map((r: any) => r.record)).toEqual([`incident/${ids[2]}`]);

    await rejected(alice, 'svc_query', { class: 'incident', filters: { notes: 'x' } }, 'MALFORMED');
    await rejected(alice, 'svc_query', { class: 'incident', after: 'forged' }, 'MALFORMED');
    await rejected(alice, 'svc_query', { class: 'incident', limit: 0 }, 'MALFORMED');
    await rejected(alice, 'svc_query', { class: 'nosuch' }, 'NOT_FOUND');
  });

  test('a "__proto__" filter is a filter: UNKNOWN_FIELD, as HTTP answers, never unfiltered results', async () => {
    const alice = await connect('alice');
    await ok(alice, 'svc_put', { record: `incident/${fresh()}`, field: 'title', value: 'proto', expected_version: 0 });
    // As JSON.parse builds it from a client's message: an own "__proto__" key.
    const filters = JSON.parse('{"__proto__": "x"}') as Record<string, unknown>;
    const body = await rejected(alice, 'svc_query', { class: 'incident', filters }, 'UNKNOWN_FIELD');
    expect(body).toEqual((await t.call('alice', 'GET', '/v1/records/incident?__proto__=x')).body);
  });
});

describe('credentials come first, on the transport', () => {
  test('no or a bad credential: the client cannot connect (HTTP 401)', async () => {
    await expect(connect(null)).rejects.toMatchObject({ code: 401 });
    await expect(connect('not-a-key')).rejects.toMatchObject({ code: 401 });
  });

  test('a raw initialize without a credential is 401 with the UNAUTHENTICATED body', async () => {
    const res = await rawPost(INITIALIZE, {});
    expect(res.status).toBe(401);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    const body = await res.json();
    expect(body).toMatchObject({ error: 'UNAUTHENTICATED' });
    expect(typeof body.message).toBe('string');
    expect(body).not.toHaveProperty('jsonrpc');
    const bad = await rawPost(INITIALIZE, { authorization: 'Bearer wrong' });
    expect(bad.status).toBe(401);
    expect((await bad.json()).error).toBe('UNAUTHENTICATED');
  });

  test('an exhausted budget of rejected credentials is 429 RATE_LIMITED before any MCP method', async () => {
    // A gateway of its own, trusting one proxy hop, so this address's budget is ours alone.
    const g = await startTestGateway([incident, tasks], { db: t.db, extraArgs: ['--trust-proxy', '1'] });
    try {
      const from = { 'x-forwarded-for': '203.0.113.9' };
      const bad = async () => {
        const r = await rawPost(INITIALIZE, { ...from, authorization: 'Bearer wrong' }, g.url);
        await r.arrayBuffer();
        return r.status;
      };
      // In concurrent bursts of 100: one request at a time spends the bucket (200, refilled
      // at 50 a second) only while each 401 takes under 20 ms, which a loaded machine (or the
      // gateway on a Citus coordinator) does not promise. A burst outpaces the refill while
      // it takes under 2 s.
      let status = 0;
      for (let round = 0; round < 20 && status !== 429; round++) {
        const statuses = await Promise.all(Array.from({ length: 100 }, () => bad()));
        for (const s of statuses) {
          expect([401, 429]).toContain(s);
          if (s === 429) status = 429;
        }
      }
      expect(status).toBe(429);
      // The bucket refills one token every 20 ms: on a loaded machine the good request may
      // arrive after a refill and pass. Keep it spent with bad credentials sent alongside and
      // retry, a bounded number of times.
      let res = await rawPost(INITIALIZE, { ...from, authorization: `Bearer ${KEYS.alice}` }, g.url);
      for (let attempt = 0; attempt < 20 && res.status !== 429; attempt++) {
        await res.arrayBuffer();
        const spent = Promise.all(Array.from({ length: 20 }, () => bad()));
        res = await rawPost(INITIALIZE, { ...from, authorization: `Bearer ${KEYS.alice}` }, g.url);
        await spent;
      }
      expect(res.status).toBe(429);
      expect((await res.json()).error).toBe('RATE_LIMITED');
    } finally {
      await g.close();
    }
  });

  test('GET and DELETE: 401 without a credential, 405 with one (a stateless server has no stream or session)', async () => {
    for (const method of ['GET', 'DELETE']) {
      expect((await fetch(`${t.url}/mcp`, { method })).status).toBe(401);
      const res = await fetch(`${t.url}/mcp`, {
        method,
        headers: { authorization: `Bearer ${KEYS.alice}`, accept: 'text/event-stream' },
      });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
    }
  });
});

describe('metrics', () => {
  test('tool calls count in svc_write_latency_seconds', async () => {
    const alice = await connect('alice');
    const before = await latencyCount();
    const rec = `incident/${fresh()}`;
    await ok(alice, 'svc_put', { record: rec, field: 'title', value: 'm', expected_version: 0 });
    await ok(alice, 'svc_get', { record: rec });
    await rejected(alice, 'svc_put', { record: rec, field: 'title', value: 'm', expected_version: 0 }, 'STALE');
    expect(await latencyCount()).toBeGreaterThanOrEqual(before + 3);
  });
});

describe('stateless', () => {
  test('no session id; two clients interleave without session state', async () => {
    const init = await rawPost(INITIALIZE, { authorization: `Bearer ${KEYS.alice}` });
    expect(init.status).toBe(200);
    expect(init.headers.get('mcp-session-id')).toBeNull();

    const alice = await connect('alice');
    const carol = await connect('carol');
    const rec = `incident/${fresh()}`;
    await ok(alice, 'svc_put', { record: rec, field: 'title', value: 'a1', expected_version: 0 });
    const seen = await ok(carol, 'svc_get', { record: rec });
    await ok(carol, 'svc_put', { record: rec, field: 'title', value: 'c2', expected_version: seen.fields.title.version });
    const stale = await rejected(alice, 'svc_put', { record: rec, field: 'title', value: 'a2', expected_version: 1 }, 'STALE');
    expect(stale.current_author).toBe('apikey:carol');
    const again = await ok(alice, 'svc_get', { record: rec });
    expect(again.fields.title).toMatchObject({ value: 'c2', version: 2, author: 'apikey:carol' });
  });

  test('a tool call needs no initialize on the same server: one raw POST answers it', async () => {
    const rec = `incident/${fresh()}`;
    const res = await rawPost(
      { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'svc_put', arguments: { record: rec, field: 'title', value: 'raw', expected_version: 0 } } },
      { authorization: `Bearer ${KEYS.alice}`, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
    );
    expect(res.status).toBe(200);
    const msg = await res.json();
    expect(msg).toMatchObject({ jsonrpc: '2.0', id: 7, result: { structuredContent: { record: rec, version: 1 } } });
  });

  test('a second gateway on the same database answers the same client\'s calls', async () => {
    const g2 = await startTestGateway([incident, tasks], { db: t.db });
    try {
      // One client whose requests alternate between the two replicas.
      let n = 0;
      const alternate: typeof fetch = (input, init) => {
        const url = new URL(String(input instanceof Request ? input.url : input));
        const target = new URL(n++ % 2 === 0 ? t.url : g2.url);
        url.host = target.host;
        return fetch(url, init);
      };
      const alice = await connect('alice', { fetch: alternate });
      const rec = `incident/${fresh()}`;
      await ok(alice, 'svc_put', { record: rec, field: 'title', value: 'one', expected_version: 0 });
      const got = await ok(alice, 'svc_get', { record: rec });
      expect(got.fields.title.value).toBe('one');
      await ok(alice, 'svc_put', { record: rec, field: 'title', value: 'two', expected_version: 1 });
      await rejected(alice, 'svc_put', { record: rec, field: 'title', value: 'three', expected_version: 1 }, 'STALE');
      expect(n).toBeGreaterThanOrEqual(6);

      // And a client of the second replica alone sees the same record.
      const carol = await connect('carol', { url: g2.url });
      const seen = await ok(carol, 'svc_get', { record: rec });
      expect(seen.fields.title).toMatchObject({ value: 'two', version: 2 });
    } finally {
      await g2.close();
    }
  });
});
