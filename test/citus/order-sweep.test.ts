/**
 * Migration 0017 on Citus (issue 35): one creation order for query across nodes (record ids
 * made from creation time), and the sweep per shard (TTL expiry, the purge of expired
 * records, lapsed leases) with records on both workers.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../db/migrate.js';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { CitusCluster, testPool } from './cluster.js';

let cluster: CitusCluster;
let pool: pg.Pool;
let db: PgDb;

beforeAll(async () => {
  cluster = await CitusCluster.start();
  const url = await cluster.createDatabase('kslate_order_sweep');
  pool = testPool({ connectionString: url, max: 4 });
  await migrate(pool);
  db = new PgDb(createPool({ connectionString: url, max: 4, timeoutMs: 60_000 }));
});

afterAll(async () => {
  await db?.kysely.destroy();
  await pool?.end();
  await cluster?.stop();
});

function put(cls: string, rid: string, field: string, value: unknown) {
  return pool.query(
    `select outcome from kslate_write($1, $2, $3, $4, $5, $6, $7::jsonb, $8::text[], $9, $10, $11, $12, $13, $14, $15)`,
    [cls, rid, field, 'versioned', 'put', null, null, null, 'apikey:a', 'strong', JSON.stringify(value), null, null, null, null],
  );
}

/** The port of the worker holding `rid`'s shard. */
async function nodeOf(rid: string): Promise<number> {
  const { rows } = await pool.query<{ port: number }>(
    `select nodeport as port from citus_shards
     where table_name = 'records'::regclass and shardid = get_shard_id_for_distribution_column('records', $1::text)`,
    [rid],
  );
  return Number(rows[0].port);
}

/** `n` rids, alternating between the two workers. */
async function ridsOnBothWorkers(prefix: string, n: number): Promise<string[]> {
  const [w1, w2] = cluster.workers.map((w) => w.port);
  const on = new Map<number, string[]>([[w1, []], [w2, []]]);
  for (let i = 0; [...on.values()].some((l) => l.length < n / 2); i++) on.get(await nodeOf(`${prefix}${i}`))!.push(`${prefix}${i}`);
  const out: string[] = [];
  for (let i = 0; i < n / 2; i++) out.push(on.get(w1)![i], on.get(w2)![i]);
  return out;
}

describe('migration 0017 on Citus', () => {
  it('query answers in creation order across workers, and pages by its cursor without gaps', async () => {
    const rids = await ridsOnBothWorkers('o', 12);
    for (const rid of rids) expect((await put('ord', rid, 'k', 'same')).rows[0].outcome).toBe('applied');
    const first = await db.queryRecords('ord', [{ field: 'k', values: ['same'] }], { afterId: 0, limit: 5, fields: ['k'], maxBytes: 1 << 20 });
    expect(first.rows.map((r) => r.rid)).toEqual(rids.slice(0, 5));
    expect(first.more).toBe(true);
    const rest = await db.queryRecords('ord', [{ field: 'k', values: ['same'] }], {
      afterId: first.rows[4].id,
      limit: 100,
      fields: ['k'],
      maxBytes: 1 << 20,
    });
    expect(rest.rows.map((r) => r.rid)).toEqual(rids.slice(5));
    // Without filters too (records_class_id).
    const all = await db.queryRecords('ord', [], { afterId: 0, limit: 100, fields: [], maxBytes: 1 << 20 });
    expect(all.rows.map((r) => r.rid)).toEqual(rids);
    // Every id a JavaScript number can hold exactly.
    for (const r of all.rows) expect(Number.isSafeInteger(r.id)).toBe(true);
  });

  it('the sweep expires due records on both workers, skips one whose row a writer holds, and purges their history', async () => {
    const rids = await ridsOnBothWorkers('e', 6);
    for (const rid of rids) {
      await put('ttl', rid, 'f', 1);
      await put('ttl', rid, 'f', 2);
    }
    await pool.query(`update records set last_write_at = now() - interval '1 hour' where class = 'ttl'`);
    // A writer holds the first record's row, on its own worker.
    const held = rids[0];
    const port = await nodeOf(held);
    const name = cluster.workers.find((w) => w.port === port)!.name;
    const writer = new pg.Client({ connectionString: cluster.nodeUrl(name, 'kslate_order_sweep') });
    await writer.connect();
    try {
      await writer.query('begin');
      const shard = (await pool.query(`select get_shard_id_for_distribution_column('records', $1::text) as s`, [held])).rows[0].s;
      await writer.query(`select 1 from records_${shard} where rid = $1 for update`, [held]);
      expect(await db.expireRecords('ttl', 60, 1000)).toBe(5);
      await writer.query('rollback');
    } finally {
      await writer.end();
    }
    const left = await pool.query(`select rid from records where class = 'ttl'`);
    expect(left.rows.map((r) => r.rid)).toEqual([held]);
    expect(Number((await pool.query(`select count(*) as n from expired_records`)).rows[0].n)).toBe(5);
    let purged = 0;
    for (let more = true; more; ) {
      const p = await db.purgeExpired(3);
      purged += p.historyRows;
      more = p.more;
    }
    expect(purged).toBe(10);
    expect(Number((await pool.query(`select count(*) as n from history where class = 'ttl' and rid <> $1`, [held])).rows[0].n)).toBe(0);
    expect(Number((await pool.query(`select count(*) as n from expired_records`)).rows[0].n)).toBe(0);
    // Once free, it goes too.
    expect(await db.expireRecords('ttl', 60, 1000)).toBe(1);
  });

  it('the sweep flags lapsed leases on both workers and leaves held ones alone', async () => {
    const rids = await ridsOnBothWorkers('l', 4);
    for (const rid of rids) {
      const { rows } = await pool.query(`select outcome from kslate_claim($1, $2, $3, $4, $5, $6, $7)`, ['jobs', rid, 'job', 'apikey:a', 'strong', 60, null]);
      expect(rows[0].outcome).toBe('claim');
    }
    await pool.query(`update fields set lease_expires_at = now() - interval '1 second' where class = 'jobs' and rid = any($1)`, [rids.slice(0, 2)]);
    expect(await db.flagLapsedLeases(1000)).toBe(2);
    const { rows } = await pool.query<{ rid: string; lease_lapsed: boolean }>(`select rid, lease_lapsed from fields where class = 'jobs' order by rid`);
    expect(Object.fromEntries(rows.map((r) => [r.rid, r.lease_lapsed]))).toEqual(Object.fromEntries(rids.map((r, i) => [r, i < 2])));
    expect(await db.flagLapsedLeases(1000)).toBe(0);
  });
});
