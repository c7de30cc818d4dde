/** A database of its own for one test file, cloned from the run's migrated template. */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { withDb } from './global.js';

export interface TestDb {
  url: string;
  name: string;
  drop(): Promise<void>;
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>, url: string = inject('pgAdminUrl')): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export async function freshDatabase(opts: { migrated?: boolean } = {}): Promise<TestDb> {
  const name = `kslate_t_${randomBytes(6).toString('hex')}`;
  const template = opts.migrated === false ? 'template0' : inject('pgTemplate');
  // On Citus (test/citus/global.ts) the clone is made on every worker too, under the same
  // name: the coordinator's copy of the metadata names shards the workers' copies hold.
  const workers = (opts.migrated === false ? undefined : inject('pgCitusWorkers')) ?? [];
  // CREATE DATABASE ... TEMPLATE needs the template free of other sessions; retry briefly.
  for (const node of [...workers, inject('pgAdminUrl')]) {
    for (let attempt = 0; ; attempt++) {
      try {
        await admin((c) => c.query(`create database ${name} template ${template}`), node);
        break;
      } catch (e) {
        if (attempt > 50 || !/being accessed by other users/.test((e as Error).message)) throw e;
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
      }
    }
  }
  const url = withDb(inject('pgAdminUrl'), name);
  return {
    url,
    name,
    drop: async () => {
      for (const node of [inject('pgAdminUrl'), ...workers]) await admin((c) => c.query(`drop database if exists ${name} with (force)`), node);
    },
  };
}

/**
 * `update <table> set <set> where <where>` for a test that rewrites rows behind the gateway's
 * back (backdating history to age it past a retention rule). On Citus an UPDATE through the
 * coordinator refuses a STABLE function of a column (`created_at - interval ...`: time-zone
 * dependent), so there it runs on every shard of the table (run_command_on_shards) — the
 * same rows changed. `set` and `where` are SQL with literals inlined and no `%`.
 */
export async function updateRows(sql: pg.ClientBase, table: string, set: string, where: string): Promise<void> {
  if (/%/.test(set + where)) throw new Error('updateRows: no % in set or where');
  const citus = (await sql.query(`select 1 from pg_extension where extname = 'citus'`)).rowCount;
  if (!citus) {
    await sql.query(`update ${table} set ${set} where ${where}`);
    return;
  }
  const { rows } = await sql.query(`select success, result from run_command_on_shards($1, $2)`, [table, `update %s set ${set} where ${where}`]);
  const failed = rows.filter((r: { success: boolean }) => !r.success);
  if (failed.length) throw new Error(`updateRows on the shards of ${table}: ${JSON.stringify(failed)}`);
}
