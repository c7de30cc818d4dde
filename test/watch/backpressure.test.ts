/**
 * Watch streams paced by their sockets (issue 31 item 9), in a real gateway with real
 * sockets: what the streams hold for clients that stopped reading stays within
 * --watch-buffer while a reading client still catches up, and a stream whose socket has not
 * drained for --watch-slow-timeout is ended (`slow`) and its connection closed.
 */
import { connect, type Socket } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import type { MethodDefinition } from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadSvcProto } from '../../runtime/grpc/proto.js';
import { incident } from '../fixtures/classes.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { KEYS, quietLog, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { openWatch, waitFor } from './sse.js';

let db: TestDb;
const closers: (() => unknown)[] = [];
/** 40 changes of 256 KiB on incident/deep: 10 MiB of history, more than a socket's kernel buffers hold. */
const CHANGES = 40;
const VALUE = 'x'.repeat(256 * 1024);
const PATH = '/v1/records/incident/deep/watch?from_record_version=0';

beforeAll(async () => {
  db = await freshDatabase();
  const g = await startTestGateway([incident], { db, log: quietLog });
  for (let v = 1; v <= CHANGES; v++) {
    const r = await g.call('alice', 'PUT', '/v1/records/incident/deep/fields/blob', { value: `${v}:${VALUE}`, expected_version: v - 1 });
    expect(r.status).toBeLessThan(300);
  }
  await g.close();
}, 120_000);
afterAll(async () => {
  for (const c of closers.reverse()) await Promise.resolve(c()).catch(() => undefined);
  await db?.drop();
});

async function gateway(extra: string[]): Promise<TestGateway> {
  const g = await startTestGateway([incident], { db, log: quietLog, extraArgs: ['--watch-poll-interval', '20ms', ...extra] });
  closers.push(() => g.close());
  return g;
}

/** An SSE watch on a raw socket that stops reading once the stream has opened; `closed` settles when the server closes it. */
function pausedSse(url: string): Promise<{ socket: Socket; closed: Promise<void> }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    closers.push(() => socket.destroy());
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    let head = '';
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1', 0, Math.min(chunk.length, 4096));
      if (!head.startsWith('HTTP/1.1 200') && head.includes('\r\n\r\n')) reject(new Error(head.slice(0, 300)));
      if (head.includes('event: open')) {
        socket.pause();
        resolve({ socket, closed });
      }
    });
    socket.write(`GET ${PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.alice}\r\nAccept: text/event-stream\r\n\r\n`);
  });
}

/** A grpc-js Watch call paused after its first message (keeping only message lengths). */
function pausedGrpc(port: number): Promise<{ ended: Promise<grpc.StatusObject | Error> }> {
  const def = loadSvcProto()['svc.v1.SvcService'] as unknown as Record<string, MethodDefinition<object, object>>;
  const Client = grpc.makeGenericClientConstructor(
    { Watch: { ...def.Watch, responseDeserialize: (b: Buffer) => b.length } } as unknown as grpc.ServiceDefinition,
    'SvcService',
  );
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': -1 });
  closers.push(() => client.close());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${KEYS.alice}`);
  const call = (client as unknown as { Watch(req: object, md: grpc.Metadata): grpc.ClientReadableStream<number> }).Watch(
    { record: 'incident/deep', from_record_version: 0 },
    md,
  );
  const ended = new Promise<grpc.StatusObject | Error>((r) => {
    call.on('error', r);
    call.on('status', r);
  });
  return new Promise((resolve, reject) => {
    call.once('error', reject);
    call.once('data', () => {
      call.pause();
      resolve({ ended });
    });
  });
}

async function slowEnded(g: TestGateway): Promise<number> {
  const m = (await g.gw.services.metrics.registry.getMetricsAsJSON()).find((x) => x.name === 'svc_watch_ended_total') as
    | { values: { labels: { reason: string }; value: number }[] }
    | undefined;
  return m?.values.find((v) => v.labels.reason === 'slow')?.value ?? 0;
}

describe('paced by the socket', () => {
  test('clients that stop reading hold no more than --watch-buffer between them; a client that reads still gets the whole history', async () => {
    const g = await gateway(['--watch-stream-buffer', '512Ki', '--watch-buffer', '1Mi', '--watch-slow-timeout', '10m']);
    const hub = g.gw.services.watch;
    let most = 0;
    const sampler = setInterval(() => (most = Math.max(most, hub.buffered)), 5);
    closers.push(() => clearInterval(sampler));
    await Promise.all(Array.from({ length: 8 }, () => pausedSse(g.url)));
    const reader = await openWatch(g.url, 'alice', PATH);
    closers.push(() => reader.close());
    const events = await reader.until(1 + CHANGES, 60_000);
    clearInterval(sampler);
    expect(events.slice(1).map((e) => Number(e.id))).toEqual(Array.from({ length: CHANGES }, (_, k) => k + 1));
    // Never more than the budget: each change is 256 KiB (plus its envelope), a page holds one.
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(1024 * 1024);
    // The reader got its turn because paused streams holding the budget were ended while it waited.
    expect(await slowEnded(g)).toBeGreaterThan(0);
    console.log(`8 paused SSE readers and one reading on 10 MiB of history: at most ${(most / 1024).toFixed(0)} KiB held (--watch-buffer 1Mi)`);
  });

  test('a stream whose socket has not drained for --watch-slow-timeout ends (slow), SSE and gRPC alike, and its connection is closed', async () => {
    const g = await gateway(['--watch-slow-timeout', '1s', '--grpc-port', String(await freePort())]);
    const hub = g.gw.services.watch;
    const sse = await pausedSse(g.url);
    const rpc = await pausedGrpc(g.gw.grpcPort!);
    expect(hub.open).toBe(2);
    await waitFor(() => hub.open === 0, 20_000, () => `the stalled streams to end (open: ${hub.open})`);
    expect(await slowEnded(g)).toBe(2);
    // Its last event cannot reach a client that does not read: the connection is reset, not
    // kept open with its buffers. (A paused socket sees that only once it reads again.)
    sse.socket.removeAllListeners('data');
    sse.socket.on('data', () => undefined);
    sse.socket.resume();
    await Promise.race([sse.closed, new Promise((_, reject) => setTimeout(() => reject(new Error('the SSE connection stayed open')), 10_000))]);
    const status = await Promise.race([rpc.ended, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the gRPC call stayed open')), 10_000))]);
    expect((status as { code: number }).code).toBe(grpc.status.CANCELLED);
  });
});
