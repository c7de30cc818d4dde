/**
 * The Citus harness itself (issue 35, item 1): a coordinator and two workers, a table
 * distributed by a text key, rows on both workers, read back whole through the coordinator.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CitusCluster } from './cluster.js';

let cluster: CitusCluster;

beforeAll(async () => {
  cluster = await CitusCluster.start();
});

afterAll(async () => {
  await cluster?.stop();
});

describe('a Citus cluster on loopback', () => {
  it('has a coordinator and two active workers', async () => {
    const nodes = await cluster.on('coordinator', 'postgres', async (c) =>
      (await c.query<{ nodeport: number; noderole: string; isactive: boolean; groupid: number }>(
        'select nodeport, noderole, isactive, groupid from pg_dist_node order by groupid',
      )).rows,
    );
    expect(nodes.map((n) => n.nodeport)).toEqual(cluster.nodes.map((n) => n.port));
    expect(nodes.every((n) => n.isactive && n.noderole === 'primary')).toBe(true);
    const version = await cluster.on('coordinator', 'postgres', async (c) => (await c.query<{ v: string }>("select extversion as v from pg_extension where extname = 'citus'")).rows[0].v);
    expect(version).toMatch(/^13\.2/);
  });

  it('spreads a distributed table over both workers and reads it back through the coordinator', async () => {
    await cluster.on('coordinator', 'postgres', async (c) => {
      await c.query('create table kv (k text primary key, v integer not null)');
      await c.query(`select create_distributed_table('kv', 'k')`);
      await c.query(`insert into kv select 'r' || g, g from generate_series(1, 200) g`);
    });
    // Per worker, the rows its shards hold, counted on the worker itself.
    const perWorker = await Promise.all(
      cluster.workers.map((w) =>
        cluster.on(w.name, 'postgres', async (c) => {
          // Citus hides shards from pg_class for ordinary clients.
          await c.query('set citus.override_table_visibility = off');
          const shards = (await c.query<{ t: string }>(`select relname as t from pg_class where relname ~ '^kv_[0-9]+$' and relkind = 'r'`)).rows;
          let n = 0;
          for (const s of shards) n += Number((await c.query<{ n: string }>(`select count(*) as n from ${s.t}`)).rows[0].n);
          return n;
        }),
      ),
    );
    expect(perWorker.every((n) => n > 0)).toBe(true);
    expect(perWorker.reduce((a, b) => a + b, 0)).toBe(200);
    const total = await cluster.on('coordinator', 'postgres', async (c) => (await c.query<{ n: string; s: string }>('select count(*) as n, sum(v) as s from kv')).rows[0]);
    expect(Number(total.n)).toBe(200);
    expect(Number(total.s)).toBe(200 * 201 / 2);
  });
});
