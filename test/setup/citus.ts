/**
 * Whether this run's database is a Citus cluster (`npm run test:citus`, test/citus/global.ts),
 * and where a record's rows live there. Behaviour files that run on both shapes use these to
 * say, in one place, what differs on Citus.
 */
import pg from 'pg';
import { inject } from 'vitest';

export const CITUS = (inject('pgCitusWorkers') ?? []).length > 0;

/** On Citus, the port of the worker holding record `rid`'s shard (of `history`, co-located with the rest). */
export async function nodePort(dbUrl: string, rid: string): Promise<number> {
  const c = new pg.Client({ connectionString: dbUrl });
  await c.connect();
  try {
    const { rows } = await c.query<{ port: number }>(
      `select nodeport as port from citus_shards where table_name = 'history'::regclass
         and shardid = get_shard_id_for_distribution_column('history', $1::text)`,
      [rid],
    );
    if (rows.length !== 1) throw new Error(`record ${rid}: ${rows.length} shard placements, expected 1`);
    return rows[0].port;
  } finally {
    await c.end();
  }
}

/**
 * `base`, or on Citus the first of `base`, `base-1`, ... whose shard is on `rid`'s node. A class
 * watch merges one log per node group; records on one node share one order, while two nodes'
 * changes come in creation order only when both are below their bounds in the same poll (a
 * transaction open on one worker holds back that worker's changes alone; docs/watch.md). Tests
 * that assert an order across records put them on one node.
 */
export async function onNodeOf(dbUrl: string, rid: string, base: string): Promise<string> {
  if (!CITUS) return base;
  const want = await nodePort(dbUrl, rid);
  for (let i = 0; i < 100; i++) {
    const id = i === 0 ? base : `${base}-${i}`;
    if ((await nodePort(dbUrl, id)) === want) return id;
  }
  throw new Error(`no id like ${base} on the node of ${rid}`);
}
