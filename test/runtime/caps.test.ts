/**
 * Per-identity and per-address limits (issue 31 item 11), each below its process-wide one:
 * one identity took all 1,024 watch streams and all 256 MCP sessions (everyone else got
 * 503), and one address that reconnected each closed socket held --max-conns (44 of 50
 * legitimate requests got 503). Real gateway, real sockets (a second loopback address,
 * 127.0.0.2, plays the greedy client), grpc-js and MCP clients; the refusals are counted in
 * svc_limit_refusals_total.
 */
import { connect, type Socket } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ProtoGrpcType } from '../../runtime/grpc/generated/svc.js';
import type { SvcServiceClient } from '../../runtime/grpc/generated/svc/v1/SvcService.js';
import { loadSvcProto } from '../../runtime/grpc/proto.js';
import { grpcErrorBody } from '../transports/clients.js';
import { incident } from '../fixtures/classes.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { KEYS, quietLog, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { openWatch, waitFor, type Watch } from '../watch/sse.js';

const proto = grpc.loadPackageDefinition(loadSvcProto()) as unknown as ProtoGrpcType;
let db: TestDb;
const closers: (() => unknown)[] = [];

beforeAll(async () => {
  db = await freshDatabase();
});
afterAll(async () => {
  for (const c of closers.reverse()) await Promise.resolve(c()).catch(() => undefined);
  await db?.drop();
});

async function gateway(extra: string[]): Promise<TestGateway> {
  const g = await startTestGateway([incident], { db, log: quietLog, extraArgs: extra });
  closers.push(() => g.close());
  return g;
}

async function refusals(g: TestGateway, limit: string): Promise<number> {
  const m = (await g.gw.services.metrics.registry.getMetricsAsJSON()).find((x) => x.name === 'svc_limit_refusals_total') as
    | { values: { labels: { limit: string }; value: number }[] }
    | undefined;
  return m?.values.find((v) => v.labels.limit === limit)?.value ?? 0;
}

async function sse(g: TestGateway, who: string, path: string): Promise<Watch> {
  const w = await openWatch(g.url, who, path);
  closers.push(() => w.close());
  return w;
}

describe('per identity', () => {
  test('--watch-max-streams-per-identity: one more stream of that identity is 429 RATE_LIMITED (gRPC RESOURCE_EXHAUSTED); other identities still watch', async () => {
    const g = await gateway(['--watch-max-streams', '10', '--watch-max-streams-per-identity', '2', '--grpc-port', String(await freePort())]);
    await g.call('alice', 'PUT', '/v1/records/incident/capped/fields/title', { value: 't', expected_version: 0 });
    const mine = [await sse(g, 'alice', '/v1/records/incident/capped/watch'), await sse(g, 'alice', '/v1/classes/incident/watch')];
    for (const w of mine) expect(w.status).toBe(200);
    const refused = await sse(g, 'alice', '/v1/classes/incident/watch');
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ error: 'RATE_LIMITED' });
    expect(refused.body.message).toContain('--watch-max-streams-per-identity');
    const client: SvcServiceClient = new proto.svc.v1.SvcService(`127.0.0.1:${g.gw.grpcPort}`, grpc.credentials.createInsecure());
    closers.push(() => client.close());
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${KEYS.alice}`);
    const err = await new Promise<grpc.ServiceError>((resolve) => client.Watch({ class: 'incident' }, md).on('error', resolve));
    expect(err.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(grpcErrorBody(err)).toMatchObject({ error: 'RATE_LIMITED' });
    // Another identity is not affected.
    const carol = await sse(g, 'carol', '/v1/classes/incident/watch');
    expect(carol.status).toBe(200);
    expect(await refusals(g, 'watch_streams_per_identity')).toBe(2);
    // A stream that ends gives its identity the slot back.
    mine[0].close();
    await waitFor(() => g.gw.services.watch.open === 2, 5_000, () => `a slot to free (open: ${g.gw.services.watch.open})`);
    expect((await sse(g, 'alice', '/v1/classes/incident/watch')).status).toBe(200);
  });

  test('--mcp-max-sessions-per-identity: one more initialize of that identity is 429 RATE_LIMITED; other identities still open sessions; ending one frees it', async () => {
    const g = await gateway(['--mcp-max-sessions', '10', '--mcp-max-sessions-per-identity', '2']);
    const initialize = (who: string) =>
      fetch(`${g.url}/mcp/session`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEYS[who]}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'caps', version: '0' } },
        }),
      });
    const sessions: string[] = [];
    for (let i = 0; i < 2; i++) {
      const r = await initialize('alice');
      expect(r.status).toBe(200);
      sessions.push(r.headers.get('mcp-session-id')!);
    }
    const refused = await initialize('alice');
    expect(refused.status).toBe(429);
    const body = await refused.json();
    expect(body).toMatchObject({ error: 'RATE_LIMITED' });
    expect(body.message).toContain('--mcp-max-sessions-per-identity');
    expect((await initialize('carol')).status).toBe(200);
    expect(await refusals(g, 'mcp_sessions_per_identity')).toBe(1);
    const ended = await fetch(`${g.url}/mcp/session`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${KEYS.alice}`, 'mcp-session-id': sessions[0], 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
    });
    expect(ended.status).toBe(200);
    expect((await initialize('alice')).status).toBe(200);
  });
});

/** `p`, or an error saying what did not happen within `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms))]);
}

/** A socket from `local` that sends nothing; resolves once connected. */
function idle(port: number, local: string): Promise<{ socket: Socket; received: () => string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress: local });
    closers.push(() => socket.destroy());
    let got = '';
    socket.on('data', (d) => (got += d.toString('latin1')));
    socket.on('error', () => undefined);
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.once('connect', () => resolve({ socket, received: () => got, closed }));
    socket.once('error', reject);
  });
}

describe('per address', () => {
  test('one address holding connections up to --max-conns-per-address gets 429 beyond it, while everyone else is served', async () => {
    const g = await gateway(['--max-conns', '40', '--max-conns-per-address', '8', '--header-timeout', '30s', '--request-timeout', '30s']);
    const port = Number(new URL(g.url).port);
    // The greedy client: as many idle connections as the whole gateway takes.
    const greedy = [];
    for (let i = 0; i < 40; i++) greedy.push(await idle(port, '127.0.0.2'));
    // Everything past its 8 is answered 429 with the error body and closed.
    const refused = greedy.slice(8);
    await within(Promise.all(refused.map((s) => s.closed)), 10_000, 'the connections past the cap were not refused');
    for (const s of refused) {
      expect(s.received()).toMatch(/^HTTP\/1\.1 429 /);
      expect(JSON.parse(s.received().split('\r\n\r\n')[1])).toMatchObject({ error: 'RATE_LIMITED' });
      expect(s.received()).toContain('--max-conns-per-address');
    }
    for (const s of greedy.slice(0, 8)) expect(s.socket.destroyed).toBe(false);
    // 50 requests of another client, each on a fresh connection: every one is answered.
    const statuses: number[] = [];
    for (let i = 0; i < 50; i++) {
      const r = await fetch(`${g.url}/v1/classes`, { headers: { authorization: `Bearer ${KEYS.alice}`, connection: 'close' } });
      await r.text();
      statuses.push(r.status);
    }
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(await refusals(g, 'conns_per_address')).toBe(32);
  });

  test('the gRPC port: connections of one address beyond the cap are reset at once; the first ones and other addresses are not', async () => {
    const g = await gateway(['--max-conns', '40', '--max-conns-per-address', '4', '--header-timeout', '30s', '--grpc-port', String(await freePort())]);
    const held = [];
    for (let i = 0; i < 4; i++) held.push(await idle(g.gw.grpcPort!, '127.0.0.2'));
    const extra = await idle(g.gw.grpcPort!, '127.0.0.2');
    await within(extra.closed, 10_000, 'the connection past the cap was not reset');
    expect(held.every((s) => !s.socket.destroyed)).toBe(true);
    const client: SvcServiceClient = new proto.svc.v1.SvcService(`127.0.0.1:${g.gw.grpcPort}`, grpc.credentials.createInsecure());
    closers.push(() => client.close());
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${KEYS.alice}`);
    const classes = await new Promise<unknown>((resolve, reject) =>
      client.Query({ class: 'incident', limit: 1 }, md, (e: grpc.ServiceError | null, r: unknown) => (e ? reject(e) : resolve(r))),
    );
    expect(classes).toBeDefined();
    expect(await refusals(g, 'conns_per_address')).toBe(1);
  });
});
