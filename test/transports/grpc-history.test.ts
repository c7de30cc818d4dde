/**
 * The gRPC History RPC (an addition to decisions §7, issue 16; docs/grpc.md "History")
 * against a real gateway and PostgreSQL with a grpc-js client generated from
 * proto/svc/v1/svc.proto at run time. Every page is turned back into the HTTP row shape by a
 * converter written here (independently of runtime/grpc/convert.ts) and compared with what
 * HTTP answers the same identity for the same page.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { tasks } from '../fixtures/task-classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { svcDescriptorText } from './reflection.js';
import { fromStruct, fromValue, grpcErrorBody } from './clients.js';
import { loadSvcProto } from '../../runtime/grpc/proto.js';
import type { ProtoGrpcType } from '../../runtime/grpc/generated/svc.js';
import type { HistoryEntry__Output } from '../../runtime/grpc/generated/svc/v1/HistoryEntry.js';
import type { HistoryRequest } from '../../runtime/grpc/generated/svc/v1/HistoryRequest.js';
import type { HistoryResult__Output } from '../../runtime/grpc/generated/svc/v1/HistoryResult.js';
import type { SvcServiceClient } from '../../runtime/grpc/generated/svc/v1/SvcService.js';

const proto = grpc.loadPackageDefinition(loadSvcProto()) as unknown as ProtoGrpcType;

let t: TestGateway;
let client: SvcServiceClient;
beforeAll(async () => {
  t = await startTestGateway([incident, tasks], { extraArgs: ['--grpc-port', String(await freePort())] });
  client = new proto.svc.v1.SvcService(`127.0.0.1:${t.gw.grpcPort}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
  });
  await seed();
});
afterAll(async () => {
  client?.close();
  await t?.close();
});

type Reply = { res?: HistoryResult__Output; err?: grpc.ServiceError };

function history(req: HistoryRequest, who: string | null = 'alice', extra: Record<string, string> = {}): Promise<Reply> {
  const md = new grpc.Metadata();
  if (who !== null) md.set('authorization', `Bearer ${KEYS[who] ?? who}`);
  for (const [k, v] of Object.entries(extra)) md.set(k, v);
  return new Promise((resolve) => client.History(req, md, (err, res) => resolve(err ? { err } : { res })));
}

async function ok(req: HistoryRequest, who = 'alice'): Promise<HistoryResult__Output> {
  const r = await history(req, who);
  expect(r.err, r.err ? `${grpc.status[r.err.code]} ${r.err.details}` : '').toBeUndefined();
  return r.res!;
}

/** A HistoryEntry back in the HTTP row shape (keys in HTTP's order). */
function httpRow(e: HistoryEntry__Output): Record<string, unknown> {
  const out: Record<string, unknown> = { seq: e.seq, field: e.field, op: e.op };
  if (e.version !== undefined) out.version = e.version;
  if (e.record_version !== undefined) out.record_version = e.record_version;
  if (e.value_sha256 !== undefined) {
    out.value_size = e.value_size;
    out.value_sha256 = e.value_sha256;
  } else if (e.value !== null) {
    out.value = fromValue(e.value);
  }
  out.author = e.author;
  if (e.identity_strength !== undefined) out.identity_strength = e.identity_strength;
  if (e.evidence !== undefined) out.evidence = e.evidence;
  if (e.expected_version !== undefined) out.expected_version = e.expected_version;
  if (e.declare_no_premises) out.based_on = [];
  else if (e.based_on.length > 0) {
    out.based_on = e.based_on.map((p) => ({ field: p.field, version: p.version, ...(p.kind ? { kind: p.kind } : {}), ...(p.inferred ? { inferred: true } : {}) }));
  }
  if (e.invocation !== null) out.invocation = fromStruct(e.invocation);
  out.outcome = e.outcome;
  out.created_at = e.created_at;
  return out;
}

function httpBody(r: HistoryResult__Output): Record<string, unknown> {
  return { record: r.record, history: r.history.map(httpRow), ...(r.next_before !== undefined ? { next_before: r.next_before } : {}) };
}

const enc = encodeURIComponent;
async function httpHistory(who: string, record: string, q: Record<string, string | number | undefined> = {}) {
  const [cls, id] = record.split('/');
  const params = Object.entries(q).filter(([, v]) => v !== undefined).map(([k, v]) => `${enc(k)}=${enc(String(v))}`);
  return t.call(who, 'GET', `/v1/records/${enc(cls)}/${enc(id)}/history${params.length ? `?${params.join('&')}` : ''}`);
}

const R = 'incident/h1';
const T = 'tasks/h2';
const BIG = 'x'.repeat(70 * 1024);

/** Every kind of history row: applied, rejected, premises, invocation, a claim, a big rejected value. */
async function seed(): Promise<void> {
  const put = async (who: string, record: string, field: string, body: Record<string, unknown>, expect?: number) => {
    const [cls, id] = record.split('/');
    const r = await t.call(who, 'PUT', `/v1/records/${cls}/${id}/fields/${field}`, body);
    if (expect !== undefined && r.status !== expect) throw new Error(`${field}: ${r.status} ${JSON.stringify(r.body)}`);
  };
  await put('alice', R, 'title', { value: 'db outage', expected_version: 0 }, 201);
  await put('alice', R, 'severity', { value: 2, expected_version: 0 }, 200);
  await put('alice', R, 'status', { value: 'open', expected_version: 0, based_on: [{ field: 'severity', version: 1 }, { field: 'title', version: 1 }] }, 200);
  await put('alice', R, 'severity', { value: 3, expected_version: 1, invocation: { run: 'r-1', step: 2 } }, 200);
  await put('carol', R, 'status', { value: 'resolved', expected_version: 0 }, 409); // stale
  await put('alice', R, 'title', { value: 'db outage (eu)', expected_version: 1, based_on: [] }, 200);
  await put('bob', R, 'title', { value: 'mine', expected_version: 2 }, 403); // scope_denied
  await put('alice', R, 'proof', { value: BIG, expected_version: 0 }, 422); // evidence_required, value kept as digest
  await put('alice', R, 'secret', { value: 'hunter2', expected_version: 0 }, 200); // nobody may read it
  await put('alice', R, 'blob', { value: null, expected_version: 0 }, 200);
  const n = await t.call('alice', 'POST', `/v1/records/incident/h1/fields/notes/entries`, { entry: { text: 'paged' }, evidence: 'pager' });
  expect(n.status).toBe(200);
  for (let i = 0; i < 5; i++) await put('alice', R, 'scratch', { value: i });
  // A task field: claims carry no value.
  const c = await t.call('alice', 'PUT', '/v1/records/tasks/h2/fields/job/claim', { lease_seconds: 30 });
  expect(c.status).toBe(201);
  const rel = await t.call('alice', 'PUT', '/v1/records/tasks/h2/fields/job/claim', { lease_seconds: 0 });
  expect(rel.status).toBe(200);
}

describe('gRPC History', () => {
  it('the newest page equals HTTP history for each identity, redaction included', async () => {
    for (const who of ['alice', 'bob']) {
      const res = await ok({ record: R }, who);
      const http = await httpHistory(who, R);
      expect(http.status).toBe(200);
      expect(httpBody(res), who).toStrictEqual(http.body);
    }
    const alice = httpBody(await ok({ record: R }, 'alice')) as { history: { field: string }[] };
    const bob = httpBody(await ok({ record: R }, 'bob')) as { history: { field: string; based_on?: { field: string }[] }[] };
    const fields = (h: { history: { field: string }[] }) => [...new Set(h.history.map((r) => r.field))].sort();
    expect(fields(alice)).toEqual(['blob', 'notes', 'proof', 'scratch', 'severity', 'status', 'title']); // no secret
    expect(fields(bob)).toEqual(['notes', 'status', 'title']);
    // The premise on severity is left out of the status row bob sees.
    const status = bob.history.find((r) => r.field === 'status' && r.based_on);
    expect(status?.based_on?.map((p) => p.field)).toEqual(['title']);
  });

  it('carries every row shape: rejections, a digest-only value, a JSON null, premises, invocation, claims', async () => {
    const rows = (await ok({ record: R })).history;
    const stale = rows.find((r) => r.outcome === 'stale')!;
    expect(stale).toMatchObject({ field: 'status', author: 'apikey:carol', expected_version: 0 });
    expect(stale.version).toBeUndefined();
    const big = rows.find((r) => r.outcome === 'evidence_required')!;
    expect(big.value).toBeNull();
    expect(big.value_size).toBe(JSON.stringify(BIG).length);
    expect(big.value_sha256).toMatch(/^[0-9a-f]{64}$/);
    const declared = rows.find((r) => r.field === 'title' && r.version === 2)!;
    expect(declared.declare_no_premises).toBe(true);
    const invoked = rows.find((r) => r.field === 'severity' && r.version === 2)!;
    expect(fromStruct(invoked.invocation!)).toStrictEqual({ run: 'r-1', step: 2 });
    const claims = (await ok({ record: T })).history;
    expect(claims.map((r) => [r.field, r.outcome, r.value])).toEqual([
      ['job', 'applied', null],
      ['job', 'applied', null],
    ]);
    expect(httpBody(await ok({ record: T }))).toStrictEqual((await httpHistory('alice', T)).body);
  });

  it('pages with limit and before until exhausted, each page equal to HTTP’s', async () => {
    for (const [who, limit] of [['alice', 3], ['bob', 2], ['alice', 1]] as const) {
      const all = (await httpHistory(who, R)).body.history as { seq: number }[];
      let before: string | undefined;
      const seen: number[] = [];
      for (let page = 0; page < 50; page++) {
        const res = await ok({ record: R, limit, ...(before !== undefined ? { before } : {}) }, who);
        const http = await httpHistory(who, R, { limit, before });
        expect(httpBody(res), `${who} page ${page}`).toStrictEqual(http.body);
        expect(res.history.length).toBeLessThanOrEqual(limit);
        seen.push(...res.history.map((r) => r.seq));
        before = res.next_before;
        if (before === undefined) break;
      }
      expect(seen, `${who} limit ${limit}`).toEqual(all.map((r) => r.seq));
    }
  });

  it('a field filter, and its cursor, as on HTTP', async () => {
    const first = await ok({ record: R, field: 'scratch', limit: 2 });
    expect(httpBody(first)).toStrictEqual((await httpHistory('alice', R, { field: 'scratch', limit: 2 })).body);
    expect(first.history.map((r) => fromValue(r.value!))).toEqual([4, 3]);
    const next = await ok({ record: R, field: 'scratch', limit: 2, before: first.next_before! });
    expect(next.history.map((r) => fromValue(r.value!))).toEqual([2, 1]);
    // The cursor is bound to the field filter.
    const other = await history({ record: R, field: 'title', before: first.next_before! });
    expect(grpcErrorBody(other.err!)).toStrictEqual((await httpHistory('alice', R, { field: 'title', before: first.next_before! })).body);
    expect(other.err!.code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('limit 0 and before "" are unset: the default page, the newest rows', async () => {
    const res = await ok({ record: R, limit: 0, before: '' });
    expect(httpBody(res)).toStrictEqual((await httpHistory('alice', R)).body);
  });

  const refusals: [string, string, HistoryRequest, string, grpc.status, Record<string, string | number>][] = [
    ['an unknown record', 'alice', { record: 'incident/never' }, 'NOT_FOUND', grpc.status.NOT_FOUND, {}],
    ['an unknown class', 'alice', { record: 'nope/x' }, 'NOT_FOUND', grpc.status.NOT_FOUND, {}],
    ['no role', 'dave', { record: R }, 'NO_ROLE', grpc.status.PERMISSION_DENIED, {}],
    ['a field outside the read scope', 'bob', { record: R, field: 'severity' }, 'SCOPE_DENIED', grpc.status.PERMISSION_DENIED, { field: 'severity' }],
    ['an unknown field', 'alice', { record: R, field: 'colour' }, 'UNKNOWN_FIELD', grpc.status.FAILED_PRECONDITION, { field: 'colour' }],
    ['a negative limit', 'alice', { record: R, limit: -1 }, 'MALFORMED', grpc.status.INVALID_ARGUMENT, { limit: -1 }],
    ['a limit over the maximum', 'alice', { record: R, limit: 10_001 }, 'MALFORMED', grpc.status.INVALID_ARGUMENT, { limit: 10_001 }],
    ['a forged cursor', 'alice', { record: R, before: 'forged' }, 'MALFORMED', grpc.status.INVALID_ARGUMENT, { before: 'forged' }],
    ['an id outside idPattern', 'alice', { record: 'incident/BAD_ID' }, 'MALFORMED', grpc.status.INVALID_ARGUMENT, {}],
  ];
  it.each(refusals)('%s: the HTTP error body with the mapped status', async (_what, who, req, code, status, q) => {
    const r = await history(req, who);
    expect(r.err, JSON.stringify(r.res)).toBeDefined();
    const body = grpcErrorBody(r.err!);
    expect(body.error).toBe(code);
    expect(r.err!.code, r.err!.details).toBe(status);
    expect(r.err!.details).toBe(body.message);
    const http = await httpHistory(who, req.record!, q);
    expect(body).toStrictEqual(http.body);
  });

  it('a record without an id and a missing credential are refused like the other RPCs', async () => {
    const noId = await history({ record: 'incident' });
    expect(grpcErrorBody(noId.err!)).toMatchObject({ error: 'MALFORMED' });
    const anon = await history({ record: R }, null);
    expect(anon.err!.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(grpcErrorBody(anon.err!)).toMatchObject({ error: 'UNAUTHENTICATED' });
  });

  it('an X-Svc-Scope owned by another identity is refused as on HTTP', async () => {
    const scope = `h-scope-${Date.now()}`;
    expect((await t.call('alice', 'GET', '/v1/records/incident/h1', undefined, { 'x-svc-scope': scope })).status).toBe(200);
    const r = await history({ record: R }, 'bob', { 'x-svc-scope': scope });
    const http = await t.call('bob', 'GET', '/v1/records/incident/h1/history', undefined, { 'x-svc-scope': scope });
    expect(http.body.error).toBe('IDENTITY_MISMATCH');
    expect(grpcErrorBody(r.err!)).toStrictEqual(http.body);
  });
});

describe('reflection', () => {
  it('describes History and its messages, so grpcurl can call it', async () => {
    const text = await svcDescriptorText(`127.0.0.1:${t.gw.grpcPort}`);
    for (const name of ['History', 'HistoryRequest', 'HistoryResult', 'HistoryEntry']) expect(text).toContain(name);
  });
});
