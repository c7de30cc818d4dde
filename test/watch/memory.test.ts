/**
 * Watch streams bounded in memory (issue 31 item 9), against a real `kslate serve` process:
 * 150 Server-Sent-Events clients (raw sockets that stop reading once the stream opened) and
 * 40 grpc-js clients whose Watch call is paused, all resuming a record with 16 MiB of
 * history from its start. The gateway must catch each of them up only as its socket drains,
 * so its resident memory stays under 450 MB (VmHWM: the peak, read from /proc) however many
 * such readers there are; afterwards a client that reads gets the whole history.
 *
 * Before: the same scenario took the gateway from 169 MB to 2.8 GB (each stream held its
 * 16 MiB catch-up page, each gRPC call 16 messages). The gateway runs with the heap limit
 * the chart gives it (gateway.maxHeapMB: 384): what it holds is bounded either way, but
 * without a limit V8 lets a few hundred MB of garbage (the events already written to the
 * sockets' kernel buffers) pile up before it collects, which makes the peak wander.
 */
import { readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { MethodDefinition } from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadSvcProto } from '../../runtime/grpc/proto.js';
import { incident } from '../fixtures/classes.js';
import { children, cleanEnv, ensureBuilt, start, stop, type Served } from '../setup/cli.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { callAs, gatewayFiles, KEYS } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { openWatch, waitFor } from './sse.js';

const SSE_STREAMS = 150;
const GRPC_STREAMS = 40;
/** 64 changes of 256 KiB: 16 MiB of history on one record. */
const CHANGES = 64;
const VALUE = 'x'.repeat(256 * 1024);
// The bound the issue-31 fix is held to. Node 20 peaks near 330 MB here (328 idle); Node 24's V8
// holds more young-generation garbage under the same old-space cap (393-395 MB idle, 418 MB
// once in a loaded CI run, at this commit and at the one before today's changes alike), so
// the bound leaves room for that. Without the per-stream bound the peak was 2.8 GB.
const LIMIT_MB = 450;

let work: string;
let db: TestDb;
let served: Served;
let url: string;
let port: number;
let grpcPort: number;
let metricsPort: number;
const sockets: Socket[] = [];
const clients: grpc.Client[] = [];

beforeAll(async () => {
  await ensureBuilt();
  db = await freshDatabase();
  work = gatewayFiles('kslate-watch-mem-', [incident]).dir;
  port = await freePort();
  grpcPort = await freePort();
  served = await start(
    [
      'serve',
      '--database-url', db.url,
      '--listen', `127.0.0.1:${port}`,
      '--metrics-port', String((metricsPort = await freePort())),
      '--grpc-port', String(grpcPort),
      '--identity', 'apikey',
      '--apikeys', join(work, 'apikeys.yaml'),
      '--classes', join(work, 'classes'),
      '--watch-max-streams', '400',
    ],
    cleanEnv({ NODE_OPTIONS: '--max-old-space-size=384' }),
  );
  url = `http://127.0.0.1:${port}`;
}, 150_000);

afterAll(async () => {
  for (const s of sockets) s.destroy();
  for (const c of clients) c.close();
  await Promise.all([...children].map((c) => stop(c).catch(() => undefined)));
  await db?.drop().catch(() => undefined);
  if (work) rmSync(work, { recursive: true, force: true });
}, 30_000);

/** The gateway's resident memory now and at its peak, in MB. */
function memory(): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${served.child.pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)![1]);
  return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
}

/** An SSE watch on a raw socket that stops reading as soon as its stream has opened. */
function pausedSse(path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    sockets.push(s);
    let head = '';
    s.on('error', () => undefined);
    s.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1', 0, Math.min(chunk.length, 4096));
      if (!head.startsWith('HTTP/1.1 200')) {
        if (head.includes('\r\n\r\n')) reject(new Error(`the watch was refused: ${head.slice(0, 300)}`));
        return;
      }
      if (head.includes('event: open')) {
        s.pause(); // a client that stops reading: the kernel's buffers fill, then the gateway's writes wait
        resolve();
      }
    });
    s.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEYS.alice}\r\nAccept: text/event-stream\r\n\r\n`);
  });
}

/**
 * A grpc-js Watch call (its own connection) paused after its first message. The client keeps
 * only each message's length, so what it buffers (grpc-js reads 16 messages ahead) costs
 * this test process nothing.
 */
function pausedGrpc(record: string): Promise<void> {
  const def = loadSvcProto()['svc.v1.SvcService'] as unknown as Record<string, MethodDefinition<object, object>>;
  const Client = grpc.makeGenericClientConstructor(
    { Watch: { ...def.Watch, responseDeserialize: (b: Buffer) => b.length } } as unknown as grpc.ServiceDefinition,
    'SvcService',
  );
  const client = new Client(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
    'grpc.max_receive_message_length': -1,
  });
  clients.push(client);
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${KEYS.alice}`);
  const call = (client as unknown as { Watch(req: object, md: grpc.Metadata): grpc.ClientReadableStream<number> }).Watch(
    { record, from_record_version: 0 },
    md,
  );
  return new Promise((resolve, reject) => {
    call.on('error', (e) => reject(e));
    call.once('data', () => {
      call.pause();
      resolve();
    });
  });
}

/** Resolves once the gateway's RSS has not grown by 1 MB for 3 s (sampled every 100 ms); throws after `ms`. */
async function settled(ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  let top = memory().rss;
  let since = Date.now();
  while (Date.now() - since < 3_000) {
    if (Date.now() > deadline) throw new Error(`the gateway's memory did not settle within ${ms} ms (RSS ${top.toFixed(0)} MB)`);
    await new Promise((r) => setTimeout(r, 100));
    const now = memory().rss;
    if (now - top >= 1) since = Date.now();
    top = Math.max(top, now);
  }
}

describe('watch streams bounded in memory', () => {
  test(
    `${SSE_STREAMS} paused SSE and ${GRPC_STREAMS} paused gRPC streams on a record with 16 MiB of history keep the gateway under ${LIMIT_MB} MB`,
    { timeout: 300_000 },
    async () => {
      for (let v = 1; v <= CHANGES; v++) {
        const r = await callAs(url, 'alice', 'PUT', '/v1/records/incident/big/fields/blob', { value: `${v}:${VALUE}`, expected_version: v - 1 });
        expect(r.status).toBe(v === 1 ? 201 : 200);
      }
      const before = memory();
      const path = '/v1/records/incident/big/watch?from_record_version=0';
      for (let i = 0; i < SSE_STREAMS; i += 10) await Promise.all(Array.from({ length: 10 }, () => pausedSse(path)));
      for (let i = 0; i < GRPC_STREAMS; i += 10) await Promise.all(Array.from({ length: 10 }, () => pausedGrpc('incident/big')));
      // Until the gateway has done what it will with them: its memory stops growing (3 s
      // without growing by more than 1 MB), with a deadline.
      await settled(120_000);
      const held = memory();
      const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      const metric = (re: RegExp) => Number(re.exec(metrics)?.[1] ?? NaN);
      console.log(
        `watch memory: RSS ${before.rss.toFixed(0)} MB before (peak ${before.hwm.toFixed(0)} MB); with ${SSE_STREAMS} paused SSE and ${GRPC_STREAMS} paused gRPC streams on 16 MiB of history: RSS ${held.rss.toFixed(0)} MB, peak (VmHWM) ${held.hwm.toFixed(0)} MB; ` +
          `${metric(/^svc_watch_streams (\d+)/m)} streams still open holding ${(metric(/^svc_watch_buffered_bytes (\d+)/m) / 2 ** 20).toFixed(1)} MiB, ${metric(/^svc_watch_ended_total\{reason="slow"\} (\d+)/m)} ended slow`,
      );
      expect(held.hwm).toBeLessThan(LIMIT_MB);

      // The paused readers go away; a reader that reads gets the whole history, in order.
      for (const s of sockets) s.destroy();
      for (const c of clients) c.close();
      const w = await openWatch(url, 'alice', path);
      const events = await w.until(1 + CHANGES, 60_000);
      expect(events.slice(1).map((e) => Number(e.id))).toEqual(Array.from({ length: CHANGES }, (_, k) => k + 1));
      expect(events.at(-1)!.data.value).toBe(`${CHANGES}:${VALUE}`);
      w.close();
    },
  );
});
