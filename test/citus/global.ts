/**
 * Global setup of the behaviour suite on Citus (vitest.citus.config.ts, issue 35 item 3): one
 * Citus cluster for the run (test/citus/cluster.ts) and a migrated template database,
 * distributed over the workers, that every test file clones — on every node, under the same
 * name, so the clone's metadata on the coordinator names shards that the clone on each worker
 * holds (test/setup/db.ts, `pgCitusWorkers`). The same files as `npm test`, pointed at the
 * coordinator.
 */
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { migrate } from '../../db/migrate.js';
import '../setup/global.js';
import { withDb } from '../setup/global.js';
import { CitusCluster, waitFor, testPool } from './cluster.js';

export default async function setup(project: TestProject) {
  const cluster = await CitusCluster.start();
  const template = `kslate_tpl_${process.pid}`;
  await cluster.createDatabase(template);
  const pool = testPool({ connectionString: withDb(cluster.url(), template), max: 1 });
  await migrate(pool);
  await pool.end();
  // A template must have no sessions when cloned, but Citus keeps some per database: its
  // maintenance daemon and the coordinator's cached connections to the workers. Closed to
  // connections (a background worker cannot reconnect either), then those ended.
  for (const n of cluster.nodes) {
    await cluster.on(n.name, 'postgres', async (c) => {
      await c.query(`alter database ${template} allow_connections false`);
      await c.query(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, [template]);
    });
  }
  for (const n of cluster.nodes) {
    await waitFor(`the template's sessions on ${n.name} to end`, () =>
      cluster.on(n.name, 'postgres', async (c) => {
        const { rowCount } = await c.query(`select 1 from pg_stat_activity where datname = $1`, [template]);
        return rowCount ? undefined : true;
      }), 30_000);
  }
  project.provide('pgAdminUrl', cluster.url());
  project.provide('pgTemplate', template);
  project.provide('pgCitusWorkers', cluster.workers.map((w) => cluster.nodeUrl(w.name)));
  return async () => {
    await cluster.stop();
  };
}
