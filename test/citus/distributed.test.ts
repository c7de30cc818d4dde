/**
 * Correctness under distribution (issue 35, items 4 and 5): the HA suite's load
 * (test/ha/workload.ts: writers doing read-then-compare-and-set puts, appends and 1-second
 * claims), here 64 writers over 16 records, through two `kslate serve` processes on the
 * coordinator of a Citus cluster whose records sit on both workers. Checked afterwards: no
 * field version issued twice and every acknowledged write applied exactly once (zero lost
 * updates), each register's history linearizable (test/support/linearizability.ts), and one
 * lease holder at a time in every task's history.

 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../db/migrate.js';
import { manifestsYaml } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { children, cleanEnv, ensureBuilt, start, stop } from '../setup/cli.js';
import { checkRun, haClassFor, readHistory, readRegister, writerKey, Workload, type OpRecord } from '../ha/workload.js';
import { CitusCluster, waitFor, testPool } from './cluster.js';

const DB = 'kslate_dist';
/** 64 clients (issue 35 item 4), four to a record as in the HA run. */
const WRITERS = 64;
const RECORDS = Array.from({ length: 16 }, (_, i) => `r${i}`);
let cluster: CitusCluster;
const urls: string[] = [];

beforeAll(async () => {
  await ensureBuilt();
  cluster = await CitusCluster.start();
  await cluster.createDatabase(DB);
  // 8 shards rather than Citus's 32: fewer shard groups for a rebalance to move (docs/scale-out.md);
  // the 16 records still land on both workers, at least three on each.
  await cluster.on('coordinator', DB, (c) => c.query(`alter database ${DB} set citus.shard_count = 8`));
  const pool = testPool({ connectionString: cluster.url(DB), max: 1 });
  await migrate(pool);
  // The workload's probe writes here (a table local to the coordinator).
  await pool.query('create table ha_probe (at timestamptz not null)');
  await pool.end();
  const dir = join(cluster.dir, 'gateway');
  mkdirSync(join(dir, 'classes'), { recursive: true });
  writeFileSync(join(dir, 'classes', 'ha.yaml'), manifestsYaml([haClassFor(WRITERS)]));
  writeFileSync(
    join(dir, 'apikeys.yaml'),
    stringify({ keys: Array.from({ length: WRITERS }, (_, i) => ({ name: `w${i}`, sha256: createHash('sha256').update(writerKey(i)).digest('hex') })) }),
  );
  for (let g = 0; g < 2; g++) {
    const port = await freePort();
    await start(
      [
        'serve',
        '--database-url', cluster.url(DB),
        '--classes', join(dir, 'classes'),
        '--identity', 'apikey',
        '--apikeys', join(dir, 'apikeys.yaml'),
        '--listen', `127.0.0.1:${port}`,
        '--metrics-port', String(await freePort()),
        '--allow-async-replication', 'true',
      ],
      cleanEnv(),
      { timeoutMs: 120_000 },
    );
    urls.push(`http://127.0.0.1:${port}`);
  }
  for (const url of urls) await waitFor(`${url}/readyz`, async () => ((await fetch(`${url}/readyz`)).status === 200 ? true : undefined), 60_000);
  for (const r of RECORDS) {
    const res = await fetch(`${urls[0]}/v1/records/ha/${r}/fields/reg`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${writerKey(0)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ value: `init-${r}`, expected_version: 0 }),
    });
    expect(res.status).toBe(201);
  }
}, 600_000);

afterAll(async () => {
  await Promise.all([...children].map((c) => stop(c).catch(() => undefined)));
  await cluster?.stop();
}, 120_000);

/** Each record's worker, by port. */
async function placements(): Promise<Map<string, number>> {
  const rows = await cluster.on('coordinator', DB, async (c) =>
    (await c.query<{ rid: string; port: number }>(
      `select r.rid, s.nodeport as port from records r
       join pg_dist_shard_placement s on s.shardid = get_shard_id_for_distribution_column('records', r.rid)`,
    )).rows,
  );
  return new Map(rows.map((r) => [r.rid, r.port]));
}

/** Run the load until `during` resolves, then `afterMs` more; every operation it made. */
async function underLoad(tag: string, writers: number, during: () => Promise<void>, afterMs: number): Promise<{ load: Workload; before: Awaited<ReturnType<typeof registers>> }> {
  const before = await registers();
  const load = new Workload(urls, cluster.url(DB), 30_000, tag, true, { writers, records: RECORDS });
  load.start();
  try {
    await during();
    await new Promise((r) => setTimeout(r, afterMs));
  } finally {
    await load.stop();
  }
  return { load, before };
}

/** The run's checks: zero lost updates, linearizable registers, one lease holder at a time. */
async function check(load: Workload, before: Awaited<ReturnType<typeof registers>>, writers: number): Promise<void> {
  const history = new Map<string, Awaited<ReturnType<typeof readHistory>>>();
  for (const r of RECORDS) history.set(r, await readHistory(urls[0], writerKey(0), r));
  const report = checkRun(load.ops, history, before, await registers(), { answerWithinMs: 30_000, retryAfter: false, records: RECORDS });
  expect(report.problems, JSON.stringify(report.counts)).toEqual([]);
  expect(load.ops.filter((o) => o.kind === 'put' && o.status !== null && o.status < 300).length).toBeGreaterThan(20);
  // Every client took part.
  expect(new Set(load.ops.filter((o) => o.status !== null && o.status < 300).map((o) => o.writer)).size).toBe(writers);

  // One lease holder at a time: the task passes to another identity only by a release or a
  // takeover of an expired lease (kslate_claim's outcomes), never by a plain claim.
  let handovers = 0;
  for (const r of RECORDS) {
    const rows = (history.get(r) ?? []).filter((h) => h.field === 'task' && h.outcome === 'applied');
    for (let i = 1; i < rows.length; i++) {
      const prev = rows[i - 1];
      const cur = rows[i];
      if (cur.author !== prev.author && cur.op !== 'release') {
        handovers++;
        expect([cur.op === 'takeover', prev.op === 'release'], `${r}: ${JSON.stringify(prev)} then ${JSON.stringify(cur)}`).toContain(true);
      }
    }
  }
  expect(handovers).toBeGreaterThan(0);
}

/** Operations that failed: no answer, or a 5xx (a 409 STALE or HELD is an answer, not a failure). */
const failed = (ops: OpRecord[]) => ops.filter((o) => o.status === null || o.status >= 500);

async function registers() {
  const m = new Map<string, Awaited<ReturnType<typeof readRegister>>>();
  for (const r of RECORDS) m.set(r, await readRegister(urls[0], writerKey(0), r));
  return m;
}

describe('kslate on Citus under concurrent load through two gateways', () => {
  it('spreads the records over both workers', async () => {
    const nodes = await placements();
    expect([...nodes.keys()].sort()).toEqual([...RECORDS].sort());
    const perWorker = new Map<number, number>();
    for (const port of nodes.values()) perWorker.set(port, (perWorker.get(port) ?? 0) + 1);
    expect([...perWorker.keys()].sort()).toEqual(cluster.workers.map((w) => w.port).sort());
    // Not all but one on one worker: the load reaches both.
    for (const n of perWorker.values()) expect(n).toBeGreaterThanOrEqual(3);
  });

  it('64 clients: loses no update, stays linearizable, and has one lease holder at a time', async () => {
    const { load, before } = await underLoad('citus', WRITERS, () => new Promise((r) => setTimeout(r, 15_000)), 0);
    expect(failed(load.ops).map((o) => `${o.kind} ${o.record} ${o.status ?? o.error}`)).toEqual([]);
    await check(load, before, WRITERS);
  });
});
