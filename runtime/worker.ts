/**
 * `kslate worker`: the sweep loop as a process (decisions §5–6). It serves `/healthz` and
 * `/readyz` on --health-port (ready: the schema is present and, when classes come from the
 * cluster, the class list/watch succeeded within two intervals) and the worker metrics on
 * --metrics-port. SIGTERM aborts the running sweep between statements (the batch under
 * way commits or rolls back whole) and releases the sweep lease before exiting.
 */
import type { Server } from 'node:http';
import { Hono } from 'hono';
import { createPool, PgDb } from '../db/kysely/index.js';
import { DatabaseModeError, migrate, schemaVersion, SCHEMA_VERSION } from '../db/migrate.js';
import { modeFatal } from './startup-error.js';
import { classifyDbError } from '../db/errors.js';
import type { Logger } from '../handlers/context.js';
import type { ClassSource } from '../worker/reconcile-classes.js';
import { SWEEP_LEASE, type RoleMirror, type SweepReport } from '../worker/sweep.js';
import { classDirSource } from './classes/dir.js';
import type { Config } from './config.js';
import { warnIfClearText } from './db-url.js';
import { listenHttp } from './http/listen.js';
import { CHECK_TIMEOUT_MS } from './readiness.js';
import { MAINTENANCE_TIMEOUT_MS, portInUse, StartupError, sweepHolder } from './services.js';
import { createSweeper, type Sweeper } from './sweeper.js';
import { createWorkerMetrics, type WorkerMetrics } from './worker-metrics.js';

/** Classes from a cluster: what the worker needs of runtime/k8s's class source. */
export interface ClusterClasses {
  load(): Promise<ClassSource>;
  /** The last successful LIST (and the watch, once started) is younger than `maxAgeMs`. */
  healthy(maxAgeMs: number): boolean;
  start(): void;
  stop(): void | Promise<void>;
}

export interface WorkerCluster {
  classes: ClusterClasses;
  roles: RoleMirror;
  /** Where the worker says its classes come from, for the log. */
  describe: string;
}

export interface WorkerProcess {
  healthUrl: string;
  metricsUrl: string;
  metrics: WorkerMetrics;
  sweeper: Sweeper;
  /** SIGTERM: abort the sweep between statements, release the lease, close ports and the pool. */
  shutdown(): Promise<void>;
}

export async function startWorker(cfg: Config, log: Logger, cluster: WorkerCluster | null): Promise<WorkerProcess> {
  if (!cfg.databaseUrl) {
    throw new StartupError('kslate worker needs --database-url URL (or KSLATE_DATABASE_URL).');
  }
  warnIfClearText(cfg.databaseUrl, log);
  const intervalMs = cfg.sweepIntervalMs ?? 60_000;
  const pool = createPool({
    connectionString: cfg.databaseUrl,
    max: 3,
    timeoutMs: Math.max(cfg.dbTimeoutMs, MAINTENANCE_TIMEOUT_MS),
    onPoolError: (e) => log.debug('worker database connection lost; reconnecting on next use', { error: e.message }),
  });
  const db = new PgDb(pool);
  const metrics = createWorkerMetrics();
  const holder = sweepHolder();
  let classSource: (() => Promise<ClassSource>) | undefined;
  if (cfg.classesDir) {
    const dir = cfg.classesDir;
    classSource = () => classDirSource(dir);
    log.info(`classes come from the directory ${dir}`);
  } else if (cluster) {
    classSource = () => cluster.classes.load();
    log.info(`classes come from the cluster: ${cluster.describe}`);
  } else {
    log.info('no --classes and no cluster (in-cluster or KUBECONFIG): classes are left as they are; expiry, leases and gauges still run');
  }
  const sweeper = createSweeper({
    deps: {
      db,
      log,
      holder,
      classSource,
      roles: !cfg.classesDir && cluster ? cluster.roles : undefined,
      onGauges: (g, classes) => metrics.setGauges(g, classes),
    },
    log,
    intervalMs,
    budgetMs: cfg.sweepBudgetMs,
    onReport: (r: SweepReport) => metrics.sweepDone(r),
  });

  let draining = false;
  const ready = async (): Promise<{ ok: true } | { ok: false; message: string }> => {
    if (draining) return { ok: false, message: 'The worker is shutting down.' };
    let timer: NodeJS.Timeout | undefined;
    try {
      const v = await Promise.race([
        schemaVersion(pool),
        new Promise<never>((_, rej) => (timer = setTimeout(() => rej(new Error('timeout')), CHECK_TIMEOUT_MS))),
      ]).finally(() => clearTimeout(timer));
      if (v === null || v < SCHEMA_VERSION) {
        return { ok: false, message: `The database schema (version ${SCHEMA_VERSION}) is not there yet; the gateway applies it at start.` };
      }
    } catch (e) {
      return {
        ok: false,
        message:
          (e as Error).message === 'timeout' || classifyDbError(e)
            ? 'The database is unreachable or does not answer; the worker retries on its own.'
            : `Readiness check failed: ${(e as Error).message}`,
      };
    }
    if (!cfg.classesDir && cluster && !cluster.classes.healthy(2 * intervalMs)) {
      return {
        ok: false,
        message: `Listing or watching SharedContext objects has not succeeded for ${(2 * intervalMs) / 1000}s; see the worker log (RBAC: list/watch sharedcontexts.kslate.dev).`,
      };
    }
    return { ok: true };
  };
  const health = new Hono();
  health.get('/healthz', (c) => c.json({ status: 'ok' }, 200));
  health.get('/readyz', async (c) => {
    const r = await ready();
    return r.ok ? c.json({ status: 'ready' }, 200) : c.json({ error: 'UNAVAILABLE', message: r.message }, 503);
  });
  const metricsApp = new Hono();
  metricsApp.get('/metrics', async (c) => c.text(await metrics.registry.metrics(), 200, { 'content-type': metrics.registry.contentType }));

  const servers: Server[] = [];
  const closeAll = async () => {
    // The statement under way commits or rolls back whole; a step stuck longer than the
    // drain timeout (an API server that does not answer) is abandoned and the lease given back.
    if (!(await sweeper.stop(cfg.drainTimeoutMs))) {
      log.warn(`the sweep did not stop within ${cfg.drainTimeoutMs / 1000}s (--drain-timeout); abandoning it`);
      await db.releaseLease(SWEEP_LEASE, holder).catch(() => undefined);
    }
    await cluster?.classes.stop();
    await Promise.all(
      servers.map(
        (srv) =>
          new Promise<void>((res) => {
            (srv as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
            srv.close(() => res());
          }),
      ),
    );
    // A connection stuck in a statement is left to the process exit (PostgreSQL rolls it back).
    await Promise.race([db.kysely.destroy().catch(() => undefined), new Promise((r) => setTimeout(r, 2_000).unref())]);
  };
  const open = async (app: Hono, port: number, setting: string) => {
    try {
      const s = await listenHttp(app.fetch, {
        host: cfg.listenHost,
        port,
        maxConns: 64,
        headerTimeoutMs: cfg.headerTimeoutMs,
        requestTimeoutMs: cfg.requestTimeoutMs,
      });
      servers.push(s.server);
      return s.port;
    } catch (e) {
      await closeAll();
      throw portInUse(e, port, setting);
    }
  };
  const healthPort = await open(health, cfg.healthPort, 'worker health port: --health-port / KSLATE_HEALTH_PORT');
  const metricsPort = await open(metricsApp, cfg.metricsPort, 'worker metrics port: --metrics-port / KSLATE_METRICS_PORT');
  const host = cfg.listenHost.includes(':') ? `[${cfg.listenHost}]` : cfg.listenHost;

  // The schema is normally the gateway's to apply; applying it here too is safe (migrations
  // take their own advisory lock) and lets a worker started first get going.
  try {
    const { applied } = await migrate(pool, { mode: cfg.databaseMode });
    if (applied.length > 0) log.info('database schema applied', { versions: applied });
  } catch (e) {
    if (e instanceof DatabaseModeError) {
      await closeAll();
      modeFatal(e);
    }
    log.warn('database not reachable at start; the sweep retries every interval', { error: (e as Error).message });
  }
  if (cluster && !cfg.classesDir) cluster.classes.start();
  // A first sweep at once, then every interval.
  void sweeper.runNow().catch((e) => log.warn('first sweep failed; will retry next interval', { error: (e as Error)?.message }));
  sweeper.start();
  log.info(
    `kslate worker sweeping every ${intervalMs / 1000}s (health on http://${host}:${healthPort}, metrics on http://${host}:${metricsPort}/metrics)`,
  );
  return {
    healthUrl: `http://${host}:${healthPort}`,
    metricsUrl: `http://${host}:${metricsPort}`,
    metrics,
    sweeper,
    async shutdown() {
      draining = true;
      log.info('shutting down: stopping the sweep at the end of its current statement');
      await closeAll();
      log.info('sweep lease released, database pool closed');
    },
  };
}
