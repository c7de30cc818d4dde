/**
 * Migration 0014 on Citus (issue 35, item 2): every per-record table distributed by `rid` and
 * co-located with `records`, the small tables reference tables, and the write functions
 * delegated to the record's node in one hop.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../db/migrate.js';
import { PgDb } from '../../db/kysely/index.js';
import { inline } from '../../db/kysely/idempotency.js';
import { CitusCluster, testPool } from './cluster.js';

let cluster: CitusCluster;
let pool: pg.Pool;

beforeAll(async () => {
  cluster = await CitusCluster.start();
  pool = testPool({ connectionString: await cluster.createDatabase('kslate_schema'), max: 4 });
  await migrate(pool);
});

afterAll(async () => {
  await pool?.end();
  await cluster?.stop();
});

const PER_RECORD = ['records', 'fields', 'entries', 'checkpoints', 'history', 'expired_records', 'read_sets', 'idempotency_keys'];
const REFERENCE = ['kslate_meta', 'classes', 'sweep_lease', 'console_sessions', 'scope_owners'];

/** One put through kslate_write, as db/kysely/writes.ts calls it. */
function put(c: pg.Pool | pg.Client, rid: string, field: string, value: unknown, expect: number | null = null) {
  return c.query<{ outcome: string; version: string; record_version: string }>(
    `select outcome, version, record_version from kslate_write($1, $2, $3, $4, $5, $6, $7::jsonb, $8::text[], $9, $10, $11, $12, $13, $14, $15)`,
    ['c', rid, field, 'versioned', 'put', expect, null, null, 'apikey:a', 'strong', JSON.stringify(value), null, null, null, expect],
  );
}

describe('migration 0014 on Citus', () => {
  it('distributes every per-record table by rid, co-located, and the small tables as reference tables', async () => {
    const { rows } = await pool.query<{ t: string; method: string; col: string | null; colocationid: number }>(
      `select logicalrelid::text as t, partmethod as method, column_to_column_name(logicalrelid, partkey) as col, colocationid
       from pg_dist_partition`,
    );
    const by = new Map(rows.map((r) => [r.t, r]));
    for (const t of PER_RECORD) {
      expect(by.get(t), t).toMatchObject({ method: 'h', col: 'rid' });
      expect(by.get(t)?.colocationid, t).toBe(by.get('records')?.colocationid);
    }
    for (const t of REFERENCE) expect(by.get(t)?.method, t).toBe('n');
  });

  it('distributes the write functions by their record argument, co-located with records', async () => {
    const { rows } = await pool.query<{ f: string; arg: number | null; colocated: boolean }>(
      `select objid::regprocedure::text as f, distribution_argument_index as arg,
              colocationid = (select colocationid from pg_dist_partition where logicalrelid = 'records'::regclass) as colocated
       from pg_catalog.pg_dist_object where classid = 'pg_proc'::regclass and objid::regprocedure::text like 'kslate_%'`,
    );
    const by = new Map(rows.map((r) => [r.f.split('(')[0], r]));
    for (const f of ['kslate_write', 'kslate_claim', 'kslate_save_checkpoint']) {
      expect(by.get(f), f).toMatchObject({ arg: 1, colocated: true });
    }
  });

  it('runs a put on the record\'s worker in one hop from the coordinator, and records land on both workers', async () => {
    const c = new pg.Client({ connectionString: cluster.url('kslate_schema') });
    await c.connect();
    try {
      const remote: string[] = [];
      c.on('notice', (n) => {
        if (/issuing/.test(n.message ?? '')) remote.push(n.message ?? '');
      });
      await c.query(`set citus.log_remote_commands = on`);
      await c.query(`set client_min_messages = log`);
      const res = await put(c, 'one-hop', 'f', { n: 1 });
      expect(res.rows[0]).toMatchObject({ outcome: 'applied', version: '1', record_version: '1' });
      // The coordinator sent the worker the call itself, and nothing else.
      const calls = remote.filter((m) => !/^issuing (BEGIN|COMMIT|SELECT assign_distributed_transaction_id|PREPARE|ROLLBACK)/i.test(m.replace(/^.*?issuing/, 'issuing')));
      expect(calls.length, remote.join('\n')).toBe(1);
      expect(calls[0]).toMatch(/kslate_write/);
    } finally {
      await c.end();
    }
    for (let i = 0; i < 40; i++) expect((await put(pool, `r${i}`, 'f', { i })).rows[0].outcome).toBe('applied');
    const perNode = await pool.query<{ nodeport: number; n: string }>(
      `select nodeport, sum(result::bigint) as n from run_command_on_placements('records', 'select count(*) from %s') group by nodeport`,
    );
    expect(perNode.rows.length).toBe(2);
    expect(perNode.rows.every((r) => Number(r.n) > 0)).toBe(true);
  });

  it('decides CAS, claims, checkpoints and renders history on the record\'s shard', async () => {
    expect((await put(pool, 'cas', 'f', 1)).rows[0].outcome).toBe('applied');
    expect((await put(pool, 'cas', 'f', 2, 1)).rows[0]).toMatchObject({ outcome: 'applied', version: '2' });
    expect((await put(pool, 'cas', 'f', 3, 1)).rows[0]).toMatchObject({ outcome: 'stale', version: '2' });
    const claim = (author: string) =>
      pool.query<{ outcome: string }>(`select outcome from kslate_claim('c', 'cas', 'task', $1, 'strong', 30, null)`, [author]);
    expect((await claim('apikey:a')).rows[0].outcome).toBe('claim');
    expect((await claim('apikey:b')).rows[0].outcome).toBe('held');
    const cp = await pool.query(`select checkpoint_id, record_version from kslate_save_checkpoint('c', 'cas', 'reviewer', '{"x":1}', 'apikey:a')`);
    expect(cp.rows[0]).toMatchObject({ checkpoint_id: '1' });
    const hist = await pool.query<{ outcome: string; rendered: string }>(
      `select outcome, rendered from history where class = 'c' and rid = 'cas' order by id`,
    );
    expect(hist.rows.map((r) => r.outcome)).toEqual(['applied', 'applied', 'stale', 'applied', 'held']);
    expect(JSON.parse(hist.rows[1].rendered)).toMatchObject({ field: 'f', op: 'put', version: 2, value: 2, outcome: 'applied' });
  });

  it('sends every write alone with --write-batching on: a batch would span shards (docs/scale-out.md)', async () => {
    const db = new PgDb(pool);
    const sizes: number[] = [];
    db.batchWrites({ lanes: 1, onBatch: (n) => sizes.push(n) });
    const w = (rid: string) => ({
      class: 'c', rid, field: 'f', kind: 'versioned' as const, op: 'put' as const, value: rid, author: 'apikey:a',
      identity_strength: 'strong', evidence: null, based_on: null, invocation: null, expectVersion: 0, expected_version: 0,
      premises: [], requiredCheckpoints: null,
    });
    // The first write asks whether the database is Citus; the ones after it know.
    expect((await db.writeField(w('batch-0'))).outcome).toBe('applied');
    await db.writeField(w('batch-1'));
    const out = await Promise.all(Array.from({ length: 8 }, (_, i) => db.writeField(w(`batch-${i + 2}`))));
    expect(out.map((o) => o.outcome)).toEqual(out.map(() => 'applied'));
    expect(db.batchingWrites).toBe(false);
    expect(sizes.every((n) => n === 1)).toBe(true);
  });
});

describe('migration 0016 on Citus: a keyed write in one statement', () => {
  /** A keyed put as db/kysely/idempotency.ts sends it: begin; select; commit in one message. */
  function keyedPut(c: pg.Client, rid: string, key: string, digest: string, value: unknown, expect: number | null) {
    const call = inline(
      `select state, status, body, result from kslate_write_keyed($1::text, $2::text, $3::text, $4::text, $5::text, $6::bigint, $7::jsonb, $8::text[], $9::text, $10::text, $11::text, $12::text, $13::text, $14::text, $15::bigint, $16::integer, $17::text, $18::text, $19::integer)`,
      ['c', rid, 'f', 'versioned', 'put', expect, null, null, 'apikey:a', 'strong', JSON.stringify(value), null, null, null, expect, null, key, digest, 60],
    );
    return c.query(`begin; ${call}; commit`) as unknown as Promise<pg.QueryResult<{ state: string; result: { outcome: string; version: number }[] | null }>[]>;
  }

  it('delegates a keyed put to the record\'s worker in one hop, stores its key on the record\'s shard, and replays it', async () => {
    const c = new pg.Client({ connectionString: cluster.url('kslate_schema') });
    await c.connect();
    try {
      const remote: string[] = [];
      c.on('notice', (n) => {
        if (/issuing/.test(n.message ?? '')) remote.push(n.message ?? '');
      });
      await c.query(`set citus.log_remote_commands = on`);
      await c.query(`set client_min_messages = log`);
      const first = (await keyedPut(c, 'keyed', 'k1', 'd1', { n: 1 }, 0))[1].rows[0];
      expect(first.state).toBe('fresh');
      expect(first.result?.[0]).toMatchObject({ outcome: 'applied', version: 1 });
      // The coordinator sent the worker the keyed call itself, and nothing else.
      const calls = remote.filter((m) => !/^issuing (BEGIN|COMMIT|SELECT assign_distributed_transaction_id|PREPARE|ROLLBACK)/i.test(m.replace(/^.*?issuing/, 'issuing')));
      expect(calls.length, remote.join('\n')).toBe(1);
      expect(calls[0]).toMatch(/kslate_write_keyed/);
      remote.length = 0;
      const again = (await keyedPut(c, 'keyed', 'k1', 'd1', { n: 1 }, 0))[1].rows[0];
      expect(again).toEqual({ ...first, state: 'replay' });
      expect((await keyedPut(c, 'keyed', 'k1', 'd2', { n: 2 }, 1))[1].rows[0].state).toBe('reused');
    } finally {
      await c.end();
    }
    // One version written; the key's row on the shard of the record's row.
    const f = await pool.query(`select version from fields where rid = 'keyed' and name = 'f'`);
    expect(f.rows).toEqual([{ version: '1' }]);
    const shards = await pool.query<{ k: string; r: string }>(
      `select get_shard_id_for_distribution_column('idempotency_keys', 'keyed')::text as k,
              get_shard_id_for_distribution_column('records', 'keyed')::text as r`,
    );
    const placed = await pool.query<{ port: number }>(
      `select nodeport as port from pg_dist_shard_placement where shardid in ($1::bigint, $2::bigint)`,
      [shards.rows[0].k, shards.rows[0].r],
    );
    expect(new Set(placed.rows.map((p) => p.port)).size).toBe(1);
    const key = await pool.query(`select rid, digest from idempotency_keys where key = 'k1'`);
    expect(key.rows).toEqual([{ rid: 'keyed', digest: 'd1' }]);
  });
});
