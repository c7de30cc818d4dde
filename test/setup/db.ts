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
