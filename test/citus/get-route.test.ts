/**
 * A get on Citus goes to the record's node only (issue 35: every operation touches one
 * record). Its statement (db/kysely/record.ts readRecord) joins a record's fields in a
 * subquery of the select list; correlated only through `r.rid`, Citus could not prune the
 * fields table and sent the statement to all 32 shards (bench:citus: 7 gets/s at 64 clients,
 * 265 ms of PostgreSQL CPU a get). Here: the gateway's own statement text, as the pool
 * prepares it, sends one remote command per execution, first runs and the plan cache's
 * generic plan alike, and answers the record's fields.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../db/migrate.js';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { CitusCluster, testPool } from './cluster.js';

let cluster: CitusCluster;
let url: string;
let pool: pg.Pool;
let db: PgDb;

beforeAll(async () => {
  cluster = await CitusCluster.start();
  url = await cluster.createDatabase('kslate_get_route');
  pool = testPool({ connectionString: url, max: 2 });
  await migrate(pool);
  db = new PgDb(createPool({ connectionString: url, max: 1, timeoutMs: 60_000 }));
  for (let i = 0; i < 4; i++) {
    for (const field of ['a', 'b']) {
      await pool.query(
        `select outcome from kslate_write($1, $2, $3, $4, $5, $6, $7::jsonb, $8::text[], $9, $10, $11, $12, $13, $14, $15)`,
        ['route', `r${i}`, field, 'soft', 'put', null, null, null, 'apikey:a', 'strong', JSON.stringify({ i, field }), null, null, null, null],
      );
    }
  }
});

afterAll(async () => {
  await db?.kysely.destroy();
  await pool?.end();
  await cluster?.stop();
});

/** The text and values of each named statement the pool's client sends, by name. */
function captureNamed(): { sent: Map<string, { text: string; values: unknown[] }>; restore: () => void } {
  const sent = new Map<string, { text: string; values: unknown[] }>();
  const orig = pg.Client.prototype.query;
  (pg.Client.prototype as { query: unknown }).query = function (this: pg.Client, cfg: unknown, ...rest: unknown[]) {
    const q = cfg as { name?: string; text?: string; values?: unknown[] } | null;
    if (q && typeof q === 'object' && q.name?.startsWith('kslate_read_record') && q.text) sent.set(q.name, { text: q.text, values: q.values ?? [] });
    return (orig as (...a: unknown[]) => unknown).call(this, cfg, ...rest);
  } as never;
  return { sent, restore: () => void (pg.Client.prototype.query = orig) };
}

describe('a get on Citus', () => {
  it('is routed to the record\'s shard: one remote command per execution, generic plan included', async () => {
    const { sent, restore } = captureNamed();
    try {
      const some = await db.readRecord('route', 'r1', { fields: ['a', 'b'], entriesLimit: null, entriesBeforeSeq: null, maxBytes: 1 << 20 });
      const all = await db.readRecord('route', 'r2', { fields: null, entriesLimit: null, entriesBeforeSeq: null, maxBytes: 1 << 20 });
      expect(some?.fields.map((f) => [f.name, JSON.parse(f.valueText!)])).toEqual([['a', { i: 1, field: 'a' }], ['b', { i: 1, field: 'b' }]]);
      expect(all?.fields.map((f) => f.name)).toEqual(['a', 'b']);
    } finally {
      restore();
    }
    expect([...sent.keys()].sort()).toEqual(['kslate_read_record', 'kslate_read_record_some']);

    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const issued: string[] = [];
      c.on('notice', (n) => {
        if (/^issuing /.test(n.message ?? '')) issued.push(n.message!);
      });
      await c.query('set citus.log_remote_commands = on');
      await c.query('set client_min_messages = log');
      for (const [name, { text, values }] of sent) {
        // Prepared as the pool prepares it, run past the plan cache's five custom plans.
        for (let i = 0; i < 8; i++) {
          issued.length = 0;
          const rid = `r${i % 4}`;
          const args = values.map((v) => (v === values[values.length - 1] ? rid : v));
          const { rows } = await c.query({ name, text, values: args });
          expect(rows, `${name} run ${i}`).toHaveLength(1);
          expect(issued, `${name} run ${i}: remote commands`).toHaveLength(1);
        }
      }
    } finally {
      await c.end();
    }
  });
});
