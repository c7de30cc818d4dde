/**
 * Process-wide services, built once (style habit 7): one pg Pool, one metrics registry, one
 * class cache, the identity providers and the rejected-credential budget.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import { cancelOwnStatements, createPool, PgDb, REPLICA_DEFAULTS } from '../db/kysely/index.js';
import { replicationRisk } from '../db/kysely/primary.js';
import { cachedRegistry, type ClassRegistry } from '../handlers/class-registry.js';
import type { Ctx, Logger } from '../handlers/context.js';
import type { Identity, IdentityProvider } from '../handlers/types.js';
import { classDirSource } from './classes/dir.js';
import { sweep, type SweepReport } from '../worker/sweep.js';
import type { Config } from './config.js';
import { warnIfClearText } from './db-url.js';
import { ApiKeyProvider } from './identity/apikey.js';
import { StartupError } from './startup-error.js';
import { OidcProvider } from './identity/oidc.js';
import { createMetrics, type PromMetrics } from './metrics.js';
import { RejectedCredentialBudget } from './rate-limit.js';
import { createSweeper, type Sweeper } from './sweeper.js';
import { Readiness } from './readiness.js';
import type { AppServices } from './request.js';
import { ChangeHub, LIVE_QUEUE_BYTES } from './watch-hub.js';

export interface Services extends AppServices {
  cfg: Config;
  /** Requests' pool: every statement bounded by --db-timeout. */
  pool: pg.Pool;
  /**
   * Migrations and sweeps: a few connections with a generous bound (MAINTENANCE_TIMEOUT_MS), so
   * an index build or a large prune is not cancelled by the requests' budget.
   */
  maintenancePool: pg.Pool;
  db: PgDb;
  classes: ClassRegistry;
  metrics: PromMetrics;
  log: Logger;
  providers: IdentityProvider[];
  budget: RejectedCredentialBudget;
  readiness: Readiness;
  cursorKey(): Promise<string>;
  /** One whole sweep now (reconcile classes from --classes, expire, leases, gauges). */
  sweepOnce(): Promise<SweepReport>;
  /** Only the class step of the sweep (at start and after the schema was re-applied). */
  reconcileOnce(): Promise<SweepReport>;
  /** The in-process sweep loop (`serve --sweep-interval`), started by the caller. */
  sweeper: Sweeper;
  /** The change hub: one poller fanning the change log out to every watch stream. */
  watch: ChangeHub;
  /**
   * Close the pool within `budgetMs` (default 5 s; true when it closed in time). A sweep already
   * running is stopped between statements first so its lease is released; connections lost from here on
   * are expected and logged at debug.
   */
  close(budgetMs?: number): Promise<boolean>;
}

/** The bound on migration and sweep statements (a frozen server still fails them, eventually). */
export const MAINTENANCE_TIMEOUT_MS = 300_000;

// The start's errors live in startup-error.ts (the CLI reads them without loading the gateway).
export { PortInUseError, portInUse, StartupError } from './startup-error.js';

export async function createProviders(cfg: Config, log: Logger): Promise<IdentityProvider[]> {
  const providers: IdentityProvider[] = [];
  for (const kind of cfg.identity) {
    if (kind === 'apikey') {
      if (!cfg.apikeysFile) {
        throw new StartupError('--identity includes apikey but no key file is set: pass --apikeys FILE (KSLATE_APIKEYS).');
      }
      providers.push(await ApiKeyProvider.open(cfg.apikeysFile, log));
    } else if (kind === 'oidc') {
      if (!cfg.oidcIssuer) throw new StartupError('--identity includes oidc but no issuer is set: pass --oidc-issuer URL (KSLATE_OIDC_ISSUER).');
      if (!cfg.oidcAudience) {
        throw new StartupError('--identity includes oidc but no audience is set: pass --oidc-audience NAME (KSLATE_OIDC_AUDIENCE), the audience your issuer puts in tokens for kslate.');
      }
      providers.push(
        await OidcProvider.open(
          { issuer: cfg.oidcIssuer, audience: cfg.oidcAudience, jwksUrl: cfg.oidcJwksUrl, usernameClaim: cfg.oidcUsernameClaim },
          log,
        ),
      );
    } else if (kind === 'k8s-sa') {
      // Loaded only when named: @kubernetes/client-node adds ~80 MB of RSS to a process.
      const [{ K8sSaProvider }, { NoClusterError }] = await Promise.all([import('./identity/k8s-sa.js'), import('./k8s/cluster.js')]);
      // Tokens of the OIDC issuer are that provider's: never sent for a TokenReview.
      const foreignIssuers = cfg.identity.includes('oidc') && cfg.oidcIssuer ? [cfg.oidcIssuer] : [];
      try {
        providers.push(K8sSaProvider.fromDefault(cfg.k8sAudience, log, { foreignIssuers }));
      } catch (e) {
        // Without a cluster the provider would review every token at http://localhost:8080:
        // the gateway's own default port, so it would start "ready" and accept nobody.
        if (e instanceof NoClusterError) {
          throw new StartupError(
            `--identity ${cfg.identity.join(',')} needs a Kubernetes cluster for k8s-sa and none was found (not in a pod, KUBECONFIG unset, no ~/.kube/config): ` +
              'outside a cluster pass --identity apikey --apikeys FILE (or oidc), or set KUBECONFIG to a kubeconfig.',
          );
        }
        throw e;
      }
    } else {
      throw new StartupError(
        `Unknown identity provider "${kind}" in --identity (KSLATE_IDENTITY); use k8s-sa, oidc or apikey.`,
      );
    }
  }
  if (providers.length === 0) throw new StartupError('--identity (KSLATE_IDENTITY) names no provider; use --identity apikey.');
  return providers;
}

export async function createServices(cfg: Config, log: Logger): Promise<Services> {
  if (!cfg.databaseUrl) {
    throw new StartupError(
      'No database: pass --database-url postgres://... (or set KSLATE_DATABASE_URL). `kslate dev` runs an embedded one for development.',
    );
  }
  warnIfClearText(cfg.databaseUrl, log);
  const providers = await createProviders(cfg, log);
  let readiness: Readiness;
  let key: string | null = null;
  let closing = false;
  // The request pool's sessions, by process, so a shutdown can cancel what it cut off.
  const applicationName = `kslate ${hostname()}/${process.pid}`.slice(0, 63);
  const pool = createPool({
    connectionString: cfg.databaseUrl,
    max: cfg.dbPoolSize,
    timeoutMs: cfg.dbTimeoutMs,
    applicationName,
    onPoolError: (e) =>
      // While stopping, lost connections are expected (`kslate dev`: Ctrl-C reaches PostgreSQL too).
      closing || readiness?.isDraining
        ? log.debug('database connection closed while stopping', { error: e.message })
        : log.warn('database connection lost; reconnecting on next use', { error: e.message }),
  });
  const maintenancePool = createPool({
    connectionString: cfg.databaseUrl,
    max: 2,
    timeoutMs: Math.max(cfg.dbTimeoutMs, MAINTENANCE_TIMEOUT_MS),
    onPoolError: (e) => log.debug('maintenance database connection lost; reconnecting on next use', { error: e.message }),
  });
  const db = new PgDb(pool, () => void readiness.ensureSchema());
  const maintenanceDb = new PgDb(maintenancePool);
  db.writeLsn = cfg.writeLsn;
  db.onLsnUnsupported = (e) =>
    log.warn('the database refuses pg_current_wal_insert_lsn(): writes answer without X-Kslate-Lsn, so clients cannot ask standbys for read-your-writes (docs/ha.md)', {
      error: e.message,
    });
  const metrics = createMetrics();
  // Coalesced writes (docs/performance.md "Coalesced writes"); the batcher itself stays off on Citus.
  if (cfg.writeBatching) db.batchWrites({
      lanes: cfg.dbPoolSize,
      maxQueued: cfg.writeQueueMax,
      onBatch: (n) => metrics.writeBatch(n),
      onQueueFull: () => metrics.limitRefused('write_queue'),
    });
  // Standbys for reads (docs/ha.md "Reads from standbys"): db routes its reads by the rules of
  // db/kysely/replicas.ts; nothing else knows they exist.
  const replicaPools = cfg.databaseReplicaUrls.map((url, i) => {
    warnIfClearText(url, log);
    return createPool({
      connectionString: url,
      max: cfg.dbPoolSize,
      timeoutMs: cfg.dbTimeoutMs,
      applicationName,
      standby: true,
      onPoolError: (e) =>
        closing ? undefined : log.warn('standby connection lost; reads skip it until it answers again', { replica: i, error: e.message }),
    });
  });
  if (replicaPools.length > 0) {
    await db.useReplicas(
      replicaPools.map((p) => new PgDb(p)),
      { maxLagMs: cfg.replicaMaxLagMs, waitMs: cfg.replicaWaitMs, probeMs: REPLICA_DEFAULTS.probeMs, onRead: (t) => metrics.dbRead(t), log },
    );
    log.info(`reads may use ${replicaPools.length} standby${replicaPools.length === 1 ? '' : 's'}`, {
      replicas: db.replicaStatus().map((r) => ({ replica: r.replica, up: r.up })),
    });
  }
  metrics.gauges.replicas = () => db.replicaStatus();
  const classes = cachedRegistry(() => db.listClasses(), () => Date.now());
  const classSource = cfg.classesDir ? () => classDirSource(cfg.classesDir!) : undefined;
  const sweeper = createSweeper({
    deps: { db: maintenanceDb, log, classSource, onClassesChanged: () => classes.invalidate(), holder: sweepHolder() },
    log,
    intervalMs: cfg.sweepIntervalMs,
    budgetMs: cfg.sweepBudgetMs,
  });
  const sweepOnce = () => sweeper.runNow();
  // At start and after the schema is re-applied only the classes are reconciled (decisions §6);
  // the rest of the sweep is the worker's or --sweep-interval's.
  const reconcileOnce = () =>
    sweep(
      { db: maintenanceDb, log, classSource, onClassesChanged: () => classes.invalidate(), holder: sweepHolder() },
      { steps: ['classes'] },
    );
  readiness = new Readiness(
    pool,
    maintenancePool,
    log,
    async () => {
      key = null; // a re-applied schema has a new cursor key
      classes.invalidate();
      if (classSource) await reconcileOnce();
    },
    // A provider that cannot verify tokens yet (an OIDC issuer not reached) makes the gateway not ready.
    () => providers.map((p) => p.notReady?.() ?? null).find((m) => m !== null) ?? null,
    cfg.allowAsyncReplication ? undefined : () => replicationRisk(pool),
    () =>
      db.replicaStatus().flatMap((r) =>
        !r.up
          ? [`Standby ${r.replica} (--database-replica-url number ${Number(r.replica) + 1}) does not answer: reads skip it and the gateway keeps retrying it.`]
          : r.lagSeconds !== null && r.lagSeconds * 1000 >= cfg.replicaMaxLagMs
            ? [`Standby ${r.replica} is ${r.lagSeconds.toFixed(1)} s behind the primary (over --replica-max-lag): reads without X-Kslate-Min-Lsn skip it.`]
            : [],
      ),
    cfg.databaseMode,
  );
  const watch = new ChangeHub(
    db,
    {
      pollMs: cfg.watchPollMs,
      heartbeatMs: cfg.watchHeartbeatMs,
      maxStreams: cfg.watchMaxStreams,
      maxStreamsPerOwner: cfg.watchMaxStreamsPerIdentity,
      queueMax: cfg.watchQueue,
      queueBytes: LIVE_QUEUE_BYTES,
      retentionMs: cfg.watchRetentionMs,
      pageBytes: cfg.watchStreamBufferBytes,
      bufferBytes: cfg.watchBufferBytes,
      slowMs: cfg.watchSlowTimeoutMs,
      maxAgeMs: cfg.watchMaxAgeMs,
    },
    log,
    { ended: (reason) => metrics.watchEnded(reason), refused: (limit) => metrics.limitRefused(limit) },
  );
  metrics.gauges.watchStreams = () => watch.open;
  metrics.gauges.watchBufferedBytes = () => watch.buffered;
  return {
    cfg,
    pool,
    maintenancePool,
    watch,
    db,
    classes,
    metrics,
    log,
    providers,
    budget: new RejectedCredentialBudget(),
    readiness,
    trustProxy: cfg.trustProxy,
    idempotencyTtlSeconds: Math.round(cfg.idempotencyTtlMs / 1000),
    newId: randomUUID,
    async cursorKey() {
      if (key === null) {
        const k = await db.meta('cursor_key');
        if (!k) throw new Error('cursor_key missing from kslate_meta');
        key = k;
      }
      return key;
    },
    sweepOnce,
    reconcileOnce,
    sweeper,
    async close(budgetMs = 5_000) {
      const deadline = Date.now() + budgetMs;
      let cancelled = 0;
      watch.close();
      for (const p of providers) (p as { close?: () => void }).close?.();
      const until = <T>(p: Promise<T>, ms: number) => {
        let t: NodeJS.Timeout | undefined;
        return Promise.race([p.then(() => true), new Promise<boolean>((r) => (t = setTimeout(() => r(false), ms)))]).finally(() =>
          clearTimeout(t),
        );
      };
      // A running sweep stops between statements and releases its lease before the pool closes.
      await until(sweeper.stop(), Math.max(0, deadline - Date.now()));
      closing = true;
      // pool.end() waits for every checked-out client. Statements still running past the
      // budget (a write waiting for a row lock) are cancelled, so none commits after the
      // request was cut off; their clients then end.
      const ended = db.kysely.destroy().catch(() => undefined);
      let clean = await until(ended, Math.max(500, deadline - Date.now()));
      if (!clean) {
        const n = await until(cancelOwnStatements(maintenancePool, applicationName).then((k) => void (cancelled = k)), 1_000);
        if (n) log.warn(`cancelled ${cancelled} database statement${cancelled === 1 ? '' : 's'} still running at shutdown; they are rolled back`);
        clean = await until(ended, 1_000);
      }
      await until(maintenanceDb.kysely.destroy().catch(() => undefined), 1_000);
      db.stopReplicas();
      await until(Promise.all(replicaPools.map((p) => p.end().catch(() => undefined))), 1_000);
      return clean;
    },
  };
}

/** Names this process in the sweep lease row: host, pid and a random part. */
export function sweepHolder(): string {
  return `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`;
}

