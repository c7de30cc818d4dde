/**
 * Retention on Citus (issue 35; migration 0018) and `--database-mode` against a Citus
 * coordinator. A class's history retention purges through the sweep, each record's purge
 * delegated to its node (kslate_purge_history), keeping what kslate_history_kept keeps and
 * moving the record's `history_purged` boundary on its shard; a write's `ttl_seconds` sets and
 * extends the record's own expiry on its node (kslate_extend_expiry, delegated with the write).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { DatabaseModeError, migrate } from '../../db/migrate.js';
import { sweep } from '../../worker/sweep.js';
import { quietLog } from '../setup/gateway.js';
import { CitusCluster, testPool } from './cluster.js';

const DB = 'kslate_ret';
let cluster: CitusCluster;
let pool: pg.Pool;
let db: PgDb;

const write = (cls: string, rid: string, field: string, value: unknown, ttl: number | null = null) =>
  pool.query<{ outcome: string; version: string; expires_ms: string | null }>(
    `select outcome, version, expires_ms from kslate_write($1, $2, $3, 'versioned', 'put', null, null, null, 'apikey:a', 'strong', $4, null, null, null, null, $5::integer)`,
    [cls, rid, field, JSON.stringify(value), ttl],
  );

beforeAll(async () => {
  cluster = await CitusCluster.start();
  await cluster.createDatabase(DB);
  pool = testPool({ connectionString: cluster.url(DB), max: 4 });
}, 600_000);

afterAll(async () => {
  await db?.kysely.destroy();
  await pool?.end();
  await cluster?.stop();
}, 120_000);

describe('--database-mode on a Citus coordinator', () => {
  it('plain refuses a database with the citus extension, before migrating anything', async () => {
    const err = await migrate(pool, { mode: 'plain' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DatabaseModeError);
    expect((err as Error).message).toMatch(/--database-mode plain: database "kslate_ret" has the citus extension/);
    expect((await pool.query(`select to_regclass('records') as t`)).rows[0].t).toBeNull();
  });

  it('citus migrates it distributed: the retention tables too (0018)', async () => {
    await migrate(pool, { mode: 'citus' });
    const kinds = await pool.query<{ t: string; m: string }>(
      `select logicalrelid::text as t, partmethod as m from pg_dist_partition
       where logicalrelid in ('history_purged'::regclass, 'history_retention'::regclass, 'records'::regclass) order by 1`,
    );
    expect(kinds.rows).toEqual([
      { t: 'history_purged', m: 'h' },
      { t: 'history_retention', m: 'n' },
      { t: 'records', m: 'h' },
    ]);
    const fns = await pool.query<{ f: string }>(
      `select p.proname || '(' || d.distribution_argument_index || ')' as f from pg_dist_object d join pg_proc p on p.oid = d.objid
       where p.proname in ('kslate_purge_history', 'kslate_history_kept') and d.distribution_argument_index is not null order by 1`,
    );
    expect(fns.rows.map((r) => r.f)).toEqual(['kslate_history_kept(1)', 'kslate_purge_history(1)']);
  });

  it('carries the autovacuum settings of 0021 to every shard, where autovacuum works (docs/worker.md "Reclaiming space")', async () => {
    for (const [table, scale] of [['history', '0.01'], ['entries', '0.05'], ['idempotency_keys', '0.05'], ['history_purged', '0.05'], ['fields', '0.05'], ['records', '0.05']]) {
      const shell = await pool.query<{ o: string | null }>(`select array_to_string(reloptions, ',') as o from pg_class where oid = $1::regclass`, [table]);
      expect(shell.rows[0].o, table).toContain(`autovacuum_vacuum_scale_factor=${scale}`);
      const shards = await pool.query<{ success: boolean; result: string }>(
        `select success, result from run_command_on_shards($1, $$select array_to_string(reloptions, ',') from pg_class where oid = '%s'::regclass$$)`,
        [table],
      );
      expect(shards.rows.length, table).toBeGreaterThan(1);
      for (const r of shards.rows) expect(r, table).toEqual({ success: true, result: shell.rows[0].o });
    }
  });

  it('a schema migrated on plain PostgreSQL is refused once the extension appears (not redistributed)', async () => {
    await cluster.on('coordinator', 'postgres', (c) => c.query('create database kslate_plainfirst'));
    const p = testPool({ connectionString: cluster.url('kslate_plainfirst'), max: 1 });
    try {
      await migrate(p, { mode: 'plain' });
      await p.query('create extension citus');
      for (const mode of ['auto', 'citus'] as const) {
        const err = await migrate(p, { mode }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(DatabaseModeError);
        expect((err as Error).message).toMatch(/its kslate schema was migrated on plain PostgreSQL \(records is not distributed\)/);
      }
    } finally {
      await p.end();
    }
  });
});

describe('retention on Citus', () => {
  it('a class history retention (keepLast) purges through the sweep on both workers, keeping what the rule keeps', async () => {
    await pool.query(`insert into classes (name, namespace, spec) values ('notes', 'team-n', $1::json)`, [
      JSON.stringify({ history: { keepLast: 2 }, fields: { a: { kind: 'versioned' }, b: { kind: 'versioned' } }, roles: {} }),
    ]);
    const rids = Array.from({ length: 8 }, (_, i) => `n${i}`);
    for (const rid of rids) {
      for (let v = 0; v < 5; v++) expect((await write('notes', rid, 'a', v)).rows[0].outcome).toBe('applied');
      expect((await write('notes', rid, 'b', 'x')).rows[0].outcome).toBe('applied');
    }
    // Records on both workers.
    const ports = await pool.query<{ port: number }>(
      `select distinct s.nodeport as port from records r
       join pg_dist_shard_placement s on s.shardid = get_shard_id_for_distribution_column('records', r.rid) where r.class = 'notes'`,
    );
    expect(ports.rows.length).toBe(2);

    db = new PgDb(createPool({ connectionString: cluster.url(DB), max: 2, timeoutMs: 60_000 }));
    const report = await sweep({ db, log: quietLog, holder: 'citus/retention' }, { steps: ['retention'] });
    expect(report.errors).toEqual([]);
    expect(report.retention!.purged.get('notes')).toBe(3 * rids.length);
    for (const rid of rids) {
      const left = await pool.query<{ field: string; version: string }>(
        `select field, version from history where class = 'notes' and rid = $1 order by id`,
        [rid],
      );
      expect(left.rows.map((r) => `${r.field}${r.version}`)).toEqual(['a4', 'a5', 'b1']);
      // The boundary readers see, on the record's shard: the newest purged row (a3), below a4.
      const cut = await db.historyTruncation('notes', rid);
      const a4 = await pool.query<{ id: string }>(`select id from history where class = 'notes' and rid = $1 and field = 'a' and version = 4`, [rid]);
      expect(cut!.beforeSeq).toBeLessThan(Number(a4.rows[0].id));
      expect(cut!.beforeSeq).toBeGreaterThan(0);
    }
    // A second sweep finds nothing more.
    const again = await sweep({ db, log: quietLog, holder: 'citus/retention' }, { steps: ['retention'] });
    expect(again.retention!.purged.get('notes')).toBe(0);
  });

  it('keeps every applied row written after a checkpoint, beyond keepLast, and purges the older ones', async () => {
    // n0: a at version 5 (record version 5), b at 1 (record version 6); a checkpoint at 6.
    await pool.query(`select * from kslate_save_checkpoint('notes', 'n0', 'reviewer', '{}', 'apikey:a')`);
    for (let v = 0; v < 3; v++) expect((await write('notes', 'n0', 'a', `after-${v}`)).rows[0].outcome).toBe('applied');
    const report = await sweep({ db, log: quietLog, holder: 'citus/retention' }, { steps: ['retention'] });
    expect(report.errors).toEqual([]);
    expect(report.retention!.purged.get('notes')).toBe(2);
    // a6 is beyond keepLast 2 but written after the checkpoint: kept; a4 and a5 are not.
    const left = await pool.query<{ field: string; version: string }>(`select field, version from history where rid = 'n0' order by id`);
    expect(left.rows.map((r) => `${r.field}${r.version}`)).toEqual(['b1', 'a6', 'a7', 'a8']);
  });

  it('ttl_seconds sets the record expiry on its node and a longer one extends it, a shorter one never brings it forward', async () => {
    const first = (await write('notes', 't1', 'a', 1, 3600)).rows[0];
    expect(first.outcome).toBe('applied');
    const longer = (await write('notes', 't1', 'a', 2, 7200)).rows[0];
    expect(Number(longer.expires_ms)).toBeGreaterThan(Number(first.expires_ms) + 3_000_000);
    const shorter = (await write('notes', 't1', 'a', 3, 60)).rows[0];
    expect(shorter.expires_ms).toBe(longer.expires_ms);
    const stored = await pool.query<{ ms: string }>(`select floor(extract(epoch from expires_at) * 1000)::bigint as ms from records where rid = 't1'`);
    expect(stored.rows[0].ms).toBe(longer.expires_ms);
  });
});
