/**
 * Streams follow the credential (issue 31 item 10): a watch keeps checking the credential it
 * was opened with, so revoking an API key or letting an OIDC token expire ends every stream
 * it opened (SSE record and class watches, the console's live stream, gRPC Watch, an MCP
 * session's subscriptions) with a last `end` (`revoked`); and no stream lives longer than
 * --watch-max-age (`end`, `max_age`), after which the client resumes with its last id.
 * A real gateway, a real key file rewritten on disk, a loopback OIDC issuer, real clients.
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createHash } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ProtoGrpcType } from '../../runtime/grpc/generated/svc.js';
import type { SvcServiceClient } from '../../runtime/grpc/generated/svc/v1/SvcService.js';
import type { WatchEvent__Output } from '../../runtime/grpc/generated/svc/v1/WatchEvent.js';
import { loadSvcProto } from '../../runtime/grpc/proto.js';
import { AUD, fakeIssuer, key, token, type Key } from '../identity/fake-issuer.js';
import { KEYS, startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { settled } from '../setup/wait.js';
import { openWatch, waitFor, type Watch } from './sse.js';

const proto = grpc.loadPackageDefinition(loadSvcProto()) as unknown as ProtoGrpcType;

/** A class where API keys and one OIDC subject hold a role. */
const board: ClassInput = {
  name: 'board',
  spec: {
    fields: { note: { kind: 'soft' } },
    roles: { member: { subjects: ['apikey:alice', 'apikey:carol', 'oidc:agent-1'], read: ['*'], write: ['*'] } },
  },
};

let issuer: Awaited<ReturnType<typeof fakeIssuer>>;
let k: Key;
const closers: (() => unknown)[] = [];

beforeAll(async () => {
  issuer = await fakeIssuer();
  k = await key('k1');
  issuer.jwks.push(k.jwk);
});
afterAll(async () => {
  for (const c of closers.reverse()) await Promise.resolve(c()).catch(() => undefined);
  await issuer?.close();
});

async function gateway(extra: string[]): Promise<TestGateway> {
  const g = await startTestGateway([board], {
    extraArgs: ['--identity', 'apikey,oidc', '--oidc-issuer', issuer.url, '--oidc-audience', AUD, '--watch-poll-interval', '20ms', ...extra],
  });
  closers.push(() => g.close());
  return g;
}

async function sse(g: TestGateway, who: string, path: string, headers: Record<string, string> = {}): Promise<Watch> {
  const w = await openWatch(g.url, who, path, headers);
  closers.push(() => w.close());
  expect(w.status, JSON.stringify(w.body)).toBe(200);
  return w;
}

interface GWatch {
  events: { event: string; reason?: string; message?: string; id?: string }[];
  done: boolean;
  status?: grpc.StatusObject;
}

function gwatch(g: TestGateway, bearer: string, req: object): GWatch {
  const client: SvcServiceClient = new proto.svc.v1.SvcService(`127.0.0.1:${g.gw.grpcPort}`, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${bearer}`);
  const call = client.Watch(req, md);
  const w: GWatch = { events: [], done: false };
  call.on('data', (ev: WatchEvent__Output) => {
    if (ev.open) w.events.push({ event: 'open', id: ev.open.id });
    else if (ev.change) w.events.push({ event: 'change', id: ev.change.id });
    else if (ev.end) w.events.push({ event: 'end', reason: ev.end.reason, message: ev.end.message });
  });
  call.on('error', () => void (w.done = true));
  call.on('status', (s) => {
    w.status = s;
    w.done = true;
  });
  closers.push(() => {
    call.cancel();
    client.close();
  });
  return w;
}

const lastEvent = (w: Watch) => w.events.at(-1);

/** The key file of a test gateway, rewritten with only `names`. */
function keepKeys(g: TestGateway, names: string[]): void {
  writeFileSync(
    join(dirname(g.classesDir), 'apikeys.yaml'),
    stringify({ keys: names.map((name) => ({ name, sha256: createHash('sha256').update(KEYS[name]).digest('hex') })) }),
  );
}

async function note(g: TestGateway, id: string, value: unknown): Promise<void> {
  const r = await g.call('alice', 'PUT', `/v1/records/board/${id}/fields/note`, { value });
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
}

/** The console's sign-in, as a browser posts it: the cookie it sets. */
async function consoleCookie(g: TestGateway, who: string): Promise<string> {
  const res = await fetch(`${g.url}/ui/sign-in`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: g.url },
    body: new URLSearchParams({ token: KEYS[who] }).toString(),
    redirect: 'manual',
  });
  const cookies = res.headers.getSetCookie().map((c) => c.split(';')[0]);
  expect(cookies.length, `sign-in answered ${res.status} without a cookie`).toBeGreaterThan(0);
  return cookies.join('; ');
}

/** An MCP session subscribed to `uri`; `getStream` resolves with its GET event stream's response. */
async function mcpSubscriber(g: TestGateway, who: string, uri: string) {
  const updated: string[] = [];
  const client = new Client({ name: 'credential-test', version: '0.0.0' });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (msg) => void updated.push(msg.params.uri));
  const transport = new StreamableHTTPClientTransport(new URL(`${g.url}/mcp/session`), {
    requestInit: { headers: { authorization: `Bearer ${KEYS[who]}` } },
    // No reconnection of the GET stream: once the gateway ends the session, it stays ended.
    reconnectionOptions: { maxReconnectionDelay: 1, initialReconnectionDelay: 1, reconnectionDelayGrowFactor: 1, maxRetries: 0 },
  });
  await client.connect(transport);
  closers.push(() => client.close());
  await client.subscribeResource({ uri });
  return { client, transport, updated };
}

/** The open MCP sessions of a gateway (its gauge). */
async function mcpSessions(g: TestGateway): Promise<number> {
  const m = (await g.gw.services.metrics.registry.getMetricsAsJSON()).find((x) => x.name === 'svc_mcp_sessions');
  return Number((m as { values: { value: number }[] } | undefined)?.values[0]?.value ?? NaN);
}

describe('a revoked API key', () => {
  test('ends its SSE record and class watches, the console live stream, its gRPC watch and its MCP session with `revoked`; others go on', async () => {
    const g = await gateway(['--grpc-port', String(await freePort()), '--watch-heartbeat', '200ms']);
    await note(g, 'r1', 'first');
    const record = await sse(g, 'carol', '/v1/records/board/r1/watch');
    const klass = await sse(g, 'carol', '/v1/classes/board/watch');
    const live = await sse(g, 'nobody', '/ui/records/board/r1/watch', { cookie: await consoleCookie(g, 'carol') });
    const rpc = gwatch(g, KEYS.carol, { record: 'board/r1' });
    const mcp = await mcpSubscriber(g, 'carol', 'kslate://records/board/r1');
    const control = await sse(g, 'alice', '/v1/records/board/r1/watch');
    for (const w of [record, klass, live, control]) await w.next();
    await waitFor(() => rpc.events.length > 0, 10_000, () => 'the gRPC watch to open');
    expect(await mcpSessions(g)).toBe(1);
    // Every stream works before the key is revoked.
    await note(g, 'r1', 'second');
    for (const w of [record, klass, live, control]) expect((await w.next()).event).toBe('change');
    await waitFor(() => mcp.updated.length > 0, 10_000, () => 'the MCP notification');

    keepKeys(g, ['alice', 'bob', 'dave']);
    // The key file is reloaded (it is watched): carol's key is refused from then on.
    await settled(() => g.call('carol', 'GET', '/v1/classes'), (r) => r.status === 401);
    // Quiet streams notice at their next heartbeat, busy ones before their next change.
    await note(g, 'r1', 'third');
    for (const w of [record, klass, live]) {
      await w.ended();
      expect(lastEvent(w)).toMatchObject({ event: 'end', data: { reason: 'revoked' } });
      expect(lastEvent(w)!.data.message).toMatch(/credential is no longer accepted/);
    }
    await waitFor(() => rpc.done, 10_000, () => 'the gRPC watch to end');
    expect(rpc.events.at(-1)).toMatchObject({ event: 'end', reason: 'revoked' });
    expect(rpc.status?.code).toBe(grpc.status.OK);
    await settled(() => mcpSessions(g), (n) => n === 0);
    // alice's stream is untouched: it has every change.
    await note(g, 'r1', 'fourth');
    expect((await control.next()).data.value).toBe('third');
    expect((await control.next()).data.value).toBe('fourth');
    // Resuming with a valid key goes on from the last id received.
    const last = record.events.filter((e) => e.event === 'change').at(-1)!.id!;
    const again = await sse(g, 'alice', '/v1/records/board/r1/watch', { 'last-event-id': last });
    await again.next();
    expect((await again.next()).id).toBe(String(Number(last) + 1));
    expect(g.gw.services.watch.open).toBe(2);
  });
});

describe('an expiring OIDC token', () => {
  test('ends a quiet SSE and gRPC watch when the provider stops accepting it, with no change or heartbeat to send', async () => {
    // Heartbeats far away: only the token's expiry can end these streams.
    const g = await gateway(['--grpc-port', String(await freePort()), '--watch-heartbeat', '1h']);
    await note(g, 'quiet', 'x');
    // The provider accepts a token up to 30 s past its `exp` (clock skew): one that expired
    // 27 s ago is accepted now and refused about 3 s later.
    const jwt = await token(k, { iss: issuer.url, sub: 'agent-1', exp: Math.floor(Date.now() / 1000) - 27 });
    const w = await sse(g, jwt, '/v1/records/board/quiet/watch');
    await w.next();
    const rpc = gwatch(g, jwt, { record: 'board/quiet' });
    await waitFor(() => rpc.events.length > 0, 10_000, () => 'the gRPC watch to open');
    await w.ended(20_000);
    expect(lastEvent(w)).toMatchObject({ event: 'end', data: { reason: 'revoked' } });
    expect(w.comments).toBe(0);
    await waitFor(() => rpc.done, 10_000, () => 'the gRPC watch to end');
    expect(rpc.events.at(-1)).toMatchObject({ event: 'end', reason: 'revoked' });
    expect((await g.call(jwt, 'GET', '/v1/classes')).status).toBe(401);
    await waitFor(() => g.gw.services.watch.open === 0, 5_000, () => 'the streams to be released');
  });

  test('a token valid for longer keeps its stream open', async () => {
    const g = await gateway(['--watch-heartbeat', '100ms']);
    await note(g, 'fresh', 'x');
    const jwt = await token(k, { iss: issuer.url, sub: 'agent-1', exp: '10m' });
    const w = await sse(g, jwt, '/v1/records/board/fresh/watch');
    await w.next();
    // Heartbeats re-check the credential every second: several pass without ending it.
    await waitFor(() => w.comments >= 20, 20_000, () => `heartbeats (${w.comments})`);
    await note(g, 'fresh', 'y');
    expect((await w.next()).data.value).toBe('y');
    expect(w.done).toBe(false);
  });
});

describe('--watch-max-age', () => {
  test('ends SSE and gRPC streams (`max_age`) and the client resumes from its last id with nothing lost; an MCP subscription carries on', async () => {
    const g = await gateway(['--grpc-port', String(await freePort()), '--watch-max-age', '1s']);
    await note(g, 'aged', 0);
    const w = await sse(g, 'alice', '/v1/records/board/aged/watch?from_record_version=0');
    const rpc = gwatch(g, KEYS.alice, { record: 'board/aged', from_record_version: 0 });
    const mcp = await mcpSubscriber(g, 'carol', 'kslate://records/board/aged');
    await w.ended(10_000);
    expect(lastEvent(w)).toMatchObject({ event: 'end', data: { reason: 'max_age' } });
    expect(lastEvent(w)!.data.message).toContain('--watch-max-age');
    await waitFor(() => rpc.done, 10_000, () => 'the gRPC watch to end');
    expect(rpc.events.at(-1)).toMatchObject({ event: 'end', reason: 'max_age' });
    expect(rpc.status?.code).toBe(grpc.status.OK);
    // Written after the streams ended: the resumed stream has it, after what it had.
    await note(g, 'aged', 1);
    const last = w.events.filter((e) => e.event === 'change').at(-1)?.id ?? w.events[0].id!;
    const again = await sse(g, 'alice', '/v1/records/board/aged/watch', { 'last-event-id': last });
    await again.next();
    const next = await again.next();
    expect(next.id).toBe(String(Number(last) + 1));
    expect(next.data.value).toBe(1);
    // The MCP session outlived several max ages of its subscription's watch, and still notifies.
    await waitFor(() => mcp.updated.length > 0, 10_000, () => 'the MCP notification after max_age');
    expect(await mcpSessions(g)).toBe(1);
  });
});
