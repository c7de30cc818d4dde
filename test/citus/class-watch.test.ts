/**
 * The class watch on Citus (issue 35 item 3; docs/watch.md, docs/scale-out.md): changes of
 * records on both workers, committed interleaved and out of order across the nodes (a
 * transaction held open on one worker while the other commits; worker 2's transaction ids
 * pushed far past worker 1's), reach a class watcher exactly once and in each record's order,
 * over SSE on a real socket and over gRPC Watch, and a watcher that reconnects with its last
 * event id goes on without a skip or a repeat. The log position is one `(tx, id)` per node
 * group (db/port.ts), each group read below its own node's oldest running transaction.
 */
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../db/migrate.js';
import { loadSvcProto } from '../../runtime/grpc/proto.js';
import type { ProtoGrpcType } from '../../runtime/grpc/generated/svc.js';
import type { SvcServiceClient } from '../../runtime/grpc/generated/svc/v1/SvcService.js';
import type { WatchEvent__Output } from '../../runtime/grpc/generated/svc/v1/WatchEvent.js';
import { incident } from '../fixtures/classes.js';
import { freePort } from '../setup/ports.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { fromStruct } from '../transports/clients.js';
import { openWatch, waitFor, type SseEvent, type Watch } from '../watch/sse.js';
import { CitusCluster, testPool } from './cluster.js';

const proto = grpc.loadPackageDefinition(loadSvcProto()) as unknown as ProtoGrpcType;

let cluster: CitusCluster;
let pool: pg.Pool;
let t: TestGateway;
let client: SvcServiceClient;
const opened: { close(): void }[] = [];
const clients: pg.Client[] = [];

beforeAll(async () => {
  cluster = await CitusCluster.start();
  const url = await cluster.createDatabase('kslate_class_watch');
  pool = testPool({ connectionString: url, max: 4 });
  await migrate(pool);
  t = await startTestGateway([incident], {
    db: { url, name: 'kslate_class_watch', drop: async () => undefined },
    extraArgs: ['--grpc-port', String(await freePort()), '--watch-poll-interval', '20ms', '--watch-heartbeat', '300ms'],
  });
  client = new proto.svc.v1.SvcService(`127.0.0.1:${t.gw.grpcPort}`, grpc.credentials.createInsecure());
});

afterAll(async () => {
  for (const w of opened) w.close();
  client?.close();
  for (const c of clients) await c.end().catch(() => undefined);
  await t?.close();
  await pool?.end();
  await cluster?.stop();
});

/** The port of the worker holding `rid`'s shard. */
async function nodeOf(rid: string): Promise<number> {
  const { rows } = await pool.query<{ port: number }>(
    `select nodeport as port from citus_shards
     where table_name = 'records'::regclass and shardid = get_shard_id_for_distribution_column('records', $1::text)`,
    [rid],
  );
  return Number(rows[0].port);
}

/** `n` record ids on each worker: [on worker 1, on worker 2]. */
async function ridsPerWorker(prefix: string, n: number): Promise<[string[], string[]]> {
  const [w1, w2] = cluster.workers.map((w) => w.port);
  const on = new Map<number, string[]>([[w1, []], [w2, []]]);
  for (let i = 0; [...on.values()].some((l) => l.length < n); i++) {
    const list = on.get(await nodeOf(`${prefix}${i}`))!;
    if (list.length < n) list.push(`${prefix}${i}`);
  }
  return [on.get(w1)!, on.get(w2)!];
}

/** A session on one worker's copy of the database (its own transaction ids). */
async function workerSession(i: number): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: cluster.nodeUrl(cluster.workers[i].name, 'kslate_class_watch') });
  await c.connect();
  clients.push(c);
  return c;
}

const put = async (id: string, value: unknown) => {
  const r = await t.call('alice', 'PUT', `/v1/records/incident/${id}/fields/scratch`, { value });
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
};

async function sse(path: string, headers: Record<string, string> = {}): Promise<Watch> {
  const w = await openWatch(t.url, 'alice', path, headers);
  opened.push(w);
  return w;
}

interface GWatch {
  events: SseEvent[];
  until(n: number, ms?: number): Promise<SseEvent[]>;
  close(): void;
}

function gwatch(cls: string): GWatch {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${KEYS.alice}`);
  const call = client.Watch({ class: cls }, md);
  let failed: Error | null = null;
  const w: GWatch = {
    events: [],
    until: (n, ms = 60_000) =>
      waitFor(() => w.events.length >= n || failed !== null, ms, () => `${w.events.length} of ${n} gRPC events`).then(() => {
        if (w.events.length < n) throw failed ?? new Error('gRPC watch ended');
        return w.events;
      }),
    close: () => call.cancel(),
  };
  call.on('data', (ev: WatchEvent__Output) => {
    if (ev.event === 'open') w.events.push({ event: 'open', id: ev.open!.id, data: fromStruct(ev.open!.data!) });
    if (ev.event === 'change') w.events.push({ event: 'change', id: ev.change!.id, data: fromStruct(ev.change!.data!) });
  });
  call.on('error', (e: Error) => {
    if (!/Cancelled/i.test(e.message)) failed = e;
  });
  opened.push(w);
  return w;
}

/** `record@record_version` of each change event. */
const keys = (events: SseEvent[]) => events.filter((e) => e.event === 'change').map((e) => `${e.data.record}@${e.data.record_version}`);

/** Every change once, and each record's changes in record_version order. */
function expectOncePerRecordOrder(got: string[], expected: string[]): void {
  expect(new Set(got).size, 'a change delivered twice').toBe(got.length);
  expect([...got].sort()).toEqual([...expected].sort());
  const last = new Map<string, number>();
  for (const k of got) {
    const [rec, rv] = k.split('@');
    expect(Number(rv), `${rec} out of order`).toBeGreaterThan(last.get(rec) ?? 0);
    last.set(rec, Number(rv));
  }
}

/** Burn `n` transaction ids on a worker, so its ids run far ahead of the other's. */
async function burnXids(s: pg.Client, n: number): Promise<void> {
  await s.query(`do $$ begin for i in 1..${n} loop perform pg_current_xact_id(); commit; end loop; end $$`);
}

/** The shard of `rid` (records' shard; its co-located shards move with it). */
async function shardOf(rid: string): Promise<string> {
  const { rows } = await pool.query<{ id: string }>(`select get_shard_id_for_distribution_column('records', $1::text)::text as id`, [rid]);
  return rows[0].id;
}

/** Two records on worker `i`, on different shards (so moving one's shard leaves the other). */
async function twoShardsOn(prefix: string, i: number): Promise<[string, string]> {
  const port = cluster.workers[i].port;
  const found: string[] = [];
  const shards = new Set<string>();
  for (let k = 0; found.length < 2; k++) {
    const rid = `${prefix}${k}`;
    if ((await nodeOf(rid)) !== port) continue;
    const shard = await shardOf(rid);
    if (shards.has(shard)) continue;
    shards.add(shard);
    found.push(rid);
  }
  return [found[0], found[1]];
}

/** Move `rid`'s shard (and its co-located shards) to worker `to`, writes blocked meanwhile. */
async function moveTo(rid: string, to: number): Promise<void> {
  const from = await nodeOf(rid);
  await pool.query(
    `select citus_move_shard_placement($1::bigint, '127.0.0.1', $2, '127.0.0.1', $3, shard_transfer_mode => 'block_writes')`,
    [await shardOf(rid), from, cluster.workers[to].port],
  );
  expect(await nodeOf(rid)).toBe(cluster.workers[to].port);
}

describe('the class watch on Citus (a cursor per node, merged)', () => {
  it('sees every change of records on both workers exactly once and in per-record order, and resumes without skips or repeats', async () => {
    const [on1, on2] = await ridsPerWorker('w', 3);
    const w2 = await workerSession(1);
    // Worker 2's transaction ids far ahead of worker 1's: one id space would order its
    // changes after every change of worker 1 (or, from worker 1's frontier, skip them).
    await burnXids(w2, 2_000);

    const watcher = await sse('/v1/classes/incident/watch');
    expect(watcher.status).toBe(200);
    await watcher.until(1);
    const g = gwatch('incident');
    await g.until(1);

    const expected: string[] = [];
    const wrote = (rid: string, rv: number) => expected.push(`incident/${rid}@${rv}`);

    // Interleaved writers on both workers.
    await Promise.all(
      [on1[0], on2[0], on1[1], on2[1]].map(async (rid) => {
        for (let v = 1; v <= 3; v++) {
          await put(rid, { rid, v });
          wrote(rid, v);
        }
      }),
    );
    await watcher.until(1 + expected.length, 60_000);

    // A transaction held open on worker 1 (its own transaction id there) with a change of
    // on1[2]; meanwhile on1[0] commits on worker 1 after it, and on2[2] on worker 2.
    const w1 = await workerSession(0);
    await w1.query('begin');
    await w1.query(
      `select outcome from kslate_write($1, $2, $3, $4, $5, $6, $7::jsonb, $8::text[], $9, $10, $11, $12, $13, $14, $15)`,
      ['incident', on1[2], 'scratch', 'soft', 'put', null, null, null, 'apikey:alice', 'strong', JSON.stringify('held'), null, null, null, null],
    );
    await put(on1[0], 'after the held one');
    const before = watcher.events.length;
    for (let v = 1; v <= 3; v++) await put(on2[2], { v });
    // Worker 2's changes are not held back by worker 1's open transaction...
    const seen = await watcher.until(before + 3, 60_000);
    expect(keys(seen.slice(before))).toEqual([1, 2, 3].map((v) => `incident/${on2[2]}@${v}`));
    // ...while worker 1's later commit waits behind it (it was committed before on2[2]'s).
    expect(keys(watcher.events)).not.toContain(`incident/${on1[0]}@4`);
    await w1.query('commit');
    wrote(on2[2], 1);
    wrote(on2[2], 2);
    wrote(on2[2], 3);
    wrote(on1[2], 1);
    wrote(on1[0], 4);
    const all = await watcher.until(1 + expected.length, 60_000);
    const held = keys(all).indexOf(`incident/${on1[2]}@1`);
    expect(held).toBeGreaterThanOrEqual(0);
    // Worker 1's log in its own order: the held change before the one committed after it.
    expect(keys(all).indexOf(`incident/${on1[0]}@4`)).toBeGreaterThan(held);
    expectOncePerRecordOrder(keys(all), expected);
    // The cursors carry a part per worker.
    const grpcAll = await g.until(1 + expected.length, 60_000);
    expectOncePerRecordOrder(keys(grpcAll), expected);

    // Reconnect: the watcher leaves after its last event, writes go on on both workers, and
    // it resumes with Last-Event-ID.
    const lastId = all[all.length - 1].id!;
    watcher.close();
    const more: string[] = [];
    for (const rid of [on2[1], on1[1], on2[0]]) {
      await put(rid, 'while away');
      more.push(`incident/${rid}@4`);
    }
    const back = await sse('/v1/classes/incident/watch', { 'last-event-id': lastId });
    expect(back.status).toBe(200);
    const resumed = await back.until(1 + more.length, 60_000);
    expectOncePerRecordOrder(keys(resumed), more);
    expected.push(...more);

    // From every cursor the first watcher was given: exactly what came after it.
    const full = keys([...all, ...resumed.slice(1)]);
    const ids = [...all, ...resumed.slice(1)].filter((e) => e.event === 'change').map((e) => e.id!);
    for (const i of [0, 4, 11, ids.length - 2]) {
      const w = await sse(`/v1/classes/incident/watch?from=${encodeURIComponent(ids[i])}`);
      expect(w.status).toBe(200);
      const rest = full.slice(i + 1);
      const got = await w.until(1 + rest.length, 60_000);
      expectOncePerRecordOrder(keys(got), rest);
      w.close();
    }
    expectOncePerRecordOrder(full, expected);
  });

  it("a record whose shard moved to the other worker goes on in the class stream at once, in order, from the new node's ids", async () => {
    // migration 0027: the record's log_tx and its rows' log group follow the node that writes
    // them. Before it, a record moved from the node whose transaction ids ran ahead was read
    // with the old node's ids: moved to the lower group its next change sat behind that
    // group's cursor (never delivered); moved to the higher one it waited until the new node's
    // ids passed the old ones.
    const watcher = await sse('/v1/classes/incident/watch');
    expect(watcher.status).toBe(200);
    await watcher.until(1);
    const expected: string[] = [];
    const step = async (rid: string, rv: number) => {
      await put(rid, { rid, rv });
      expected.push(`incident/${rid}@${rv}`);
      const got = await watcher.until(1 + expected.length, 60_000);
      expect(keys(got)).toContain(`incident/${rid}@${rv}`);
    };
    for (const [from, to] of [
      [1, 0],
      [0, 1],
    ]) {
      // The source node's transaction ids far ahead of the destination's.
      const [dst, src] = await Promise.all([workerSession(to), workerSession(from)]);
      const ids = async (c: pg.Client) => BigInt((await c.query(`select pg_current_xact_id()::text as x`)).rows[0].x);
      const gap = (await ids(dst)) - (await ids(src));
      await burnXids(src, Number(gap > 0n ? gap : 0n) + 3_000);
      const [moved, stays] = await twoShardsOn(`mv${from}-`, from);
      await step(moved, 1);
      // A later change on the source node: its group's cursor passes the moved record's log_tx.
      await step(stays, 1);
      await moveTo(moved, to);
      await step(moved, 2);
      await step(moved, 3);
      await step(stays, 2);
    }
    expectOncePerRecordOrder(keys(watcher.events), expected);
    // A stream resumed from the start of this case sees the same changes.
    const first = watcher.events[0].id!;
    const again = await sse(`/v1/classes/incident/watch?from=${encodeURIComponent(first)}`);
    expectOncePerRecordOrder(keys(await again.until(1 + expected.length, 60_000)), expected);
  });
});
