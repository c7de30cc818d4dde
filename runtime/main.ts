/**
 * The `kslate` command line: serve, dev, worker, sweep, migrate, classes check. Each command's
 * modules are loaded when it runs, so `kslate help` and `--help` load none of the gateway.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from '../handlers/context.js';
import { COMMAND_DEFAULTS, ConfigError, FLAGS, parseConfig, type Config } from './config.js';
import { warnIfClearText } from './db-url.js';
import { describeError } from './describe-error.js';
import { StartupError, modeFatal } from './startup-error.js';
import type { WorkerCluster, WorkerProcess } from './worker.js';

/** One flag of a usage text, with the default the command uses (its own, else the flag's). */
const flagLine = (k: string, defaults: Record<string, string> = {}) => {
  const f = FLAGS[k];
  const dflt = defaults[k] ?? f.default;
  return `  --${k.padEnd(16)} ${f.env.padEnd(24)} ${f.help}${dflt ? ` (default ${dflt})` : ''}`;
};

/** Every transport the gateway serves, and where (the same handlers behind each). */
const TRANSPORTS = `The gateway's transports (the same operations and answers on each):
  HTTP/JSON     /v1/... on --listen; its OpenAPI document at /v1/openapi.json
  watch (SSE)   /v1/records/CLASS/ID/watch and /v1/classes/CLASS/watch on --listen
  MCP           streamable HTTP at /mcp on --listen; /mcp/session for resource subscriptions
  gRPC          svc.v1.SvcService on --grpc-port (0, the default, turns it off)
  web console   /ui on --listen, read-only (--ui=false turns it off)
  probes        /metrics, /readyz, /healthz on --metrics-port (/readyz, /healthz also on --listen)`;

const USAGE = `kslate — shared, versioned records for fleets of agents

Usage:
  kslate serve  --database-url URL [flags]   run the gateway (HTTP/JSON, SSE watch, MCP, gRPC, web console)
  kslate dev    [flags]                      embedded PostgreSQL + example classes and keys (npm start)
  kslate worker --database-url URL [flags]   run the sweep loop (expiry, leases, classes, roles, gauges)
  kslate sweep  --database-url URL [flags]   run one sweep and exit (for cron)
  kslate migrate --database-url URL          apply the database schema and exit
  kslate classes check DIR                   validate SharedContext manifests
  kslate version                             print the version (also --version, -v)
  kslate COMMAND --help                      that command's usage and flags

${TRANSPORTS}

Flags (each also an environment variable):
${Object.keys(FLAGS).map((k) => flagLine(k)).join('\n')}
`;

const DEV_ONLY = ['data-dir', 'dev-pg-port'];
const WORKER_ONLY = ['health-port', 'watch-namespace'];
const SERVE_FLAGS = Object.keys(FLAGS).filter((k) => !DEV_ONLY.includes(k) && !WORKER_ONLY.includes(k));
const SWEEP_FLAGS = ['database-url', 'database-mode', 'classes', 'watch-namespace', 'sweep-budget', 'log-level'];
const WORKER_FLAGS = [...SWEEP_FLAGS, 'sweep-interval', 'health-port', 'metrics-port', 'listen', 'db-timeout'];

/** `kslate COMMAND --help`: what the command does and the flags it reads. */
const COMMAND_USAGE: Record<string, { usage: string; flags: string[] }> = {
  serve: {
    usage: `kslate serve --database-url URL [flags]\n\nRun the gateway. SIGTERM or SIGINT drains requests in flight (--drain-timeout), then stops.\n\n${TRANSPORTS}`,
    flags: SERVE_FLAGS,
  },
  dev: {
    usage: 'kslate dev [flags]        (what `npm start` runs)\n\nThe gateway and the sweep in one process on an embedded PostgreSQL kept under --data-dir, with the\nexample classes and keys (defaults: --identity apikey --apikeys examples/apikeys.yaml\n--classes examples/classes --sweep-interval 10s --allow-async-replication true), on loopback only. With --database-url it uses\nthat database instead. Ctrl-C stops it.',
    flags: Object.keys(FLAGS),
  },
  worker: {
    usage:
      'kslate worker --database-url URL [flags]\n\nRun the sweep every --sweep-interval (default 60s): reconcile classes (--classes DIR, else the\ncluster\'s SharedContext objects when in a cluster or KUBECONFIG is set), mirror roles into RBAC,\nexpire records past their class ttl, flag lapsed leases, refresh the gauges. /healthz and /readyz on\n--health-port (8081), metrics on --metrics-port (9090), both on the host of --listen (its port is unused).\nSIGTERM stops the sweep between statements and releases its lease.',
    flags: WORKER_FLAGS,
  },
  sweep: {
    usage:
      'kslate sweep --database-url URL [--classes DIR]\n\nRun one sweep (the same steps as kslate worker) and exit, for cron: 0 when every step succeeded\nor another sweep was running (nothing done), 1 when a step failed. A refused manifest is printed\n(manifest refused: ...) but does not fail the sweep; the other classes are reconciled.',
    flags: SWEEP_FLAGS,
  },
  migrate: {
    usage: 'kslate migrate --database-url URL [--database-mode auto|plain|citus]\n\nApply the database schema and exit (on a Citus coordinator: distributed by record, docs/scale-out.md).',
    flags: ['database-url', 'database-mode'],
  },
  classes: {
    usage: 'kslate classes check DIR\n\nValidate the SharedContext manifests in DIR: "ok", or one line per problem and exit 1.',
    flags: [],
  },
  version: { usage: 'kslate version        (also kslate --version, kslate -v)\n\nPrint the version.', flags: [] },
};

function commandHelp(cmd: string): string {
  const c = COMMAND_USAGE[cmd];
  const flags =
    c.flags.length > 0 ? `\nFlags (each also an environment variable):\n${c.flags.map((k) => flagLine(k, COMMAND_DEFAULTS[cmd])).join('\n')}\n` : '';
  return `Usage: ${c.usage}\n${flags}`;
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return `kslate ${pkg.version}\n`;
}

/**
 * Classes and RBAC from the cluster, when there is one (in-cluster service account or an
 * explicit KUBECONFIG) and no --classes was given.
 */
async function workerCluster(cfg: Config, log: Logger, onChange: () => void): Promise<WorkerCluster | null> {
  if (cfg.classesDir) return null;
  // Loaded only here: @kubernetes/client-node adds ~80 MB of RSS to a process that has
  // classes from a directory (or no cluster) and never calls the API server.
  const { detectCluster, serverOf } = await import('./k8s/cluster.js');
  const kubeConfig = detectCluster();
  if (!kubeConfig) return null;
  const [{ createClusterClassSource }, { K8sRoleMirror }] = await Promise.all([import('./k8s/class-source.js'), import('./k8s/role-mirror.js')]);
  const namespace = cfg.watchNamespace;
  const classes = createClusterClassSource({ kubeConfig, namespace, log, onChange });
  return {
    classes,
    roles: new K8sRoleMirror({ kubeConfig, namespace, listed: () => classes.listed() }),
    describe: `SharedContext objects ${namespace ? `in namespace ${namespace}` : 'in every namespace'} at ${serverOf(kubeConfig)}`,
  };
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd !== undefined && COMMAND_USAGE[cmd] && (rest.includes('--help') || rest.includes('-h'))) {
    process.stdout.write(commandHelp(cmd));
    return 0;
  }
  switch (cmd) {
    case 'serve': {
      const cfg = parseConfig(rest);
      const [{ createLogger }, { guardFaults }, { startGateway }, { stopOnSignals }] = await Promise.all([
        import('./logger.js'),
        import('./fault-guard.js'),
        import('./serve.js'),
        import('./shutdown.js'),
      ]);
      const serveLog = createLogger({ level: cfg.logLevel });
      guardFaults(serveLog);
      const gw = await startGateway(cfg, serveLog);
      stopOnSignals(serveLog, () => gw.shutdown(cfg.drainTimeoutMs));
      return -1; // keep running
    }
    case 'dev':
      await (await import('./dev.js')).dev(rest);
      return -1;
    case 'worker': {
      const cfg = parseConfig(rest, process.env, COMMAND_DEFAULTS.worker);
      const [{ createLogger }, { guardFaults }, { startWorker }, { stopOnSignals }] = await Promise.all([
        import('./logger.js'),
        import('./fault-guard.js'),
        import('./worker.js'),
        import('./shutdown.js'),
      ]);
      const log = createLogger({ level: cfg.logLevel });
      guardFaults(log);
      let w: WorkerProcess | undefined;
      w = await startWorker(cfg, log, await workerCluster(cfg, log, () => w?.sweeper.trigger()));
      const started = w;
      stopOnSignals(log, () => started.shutdown());
      return -1; // keep running
    }
    case 'sweep': {
      const cfg = parseConfig(rest);
      if (!cfg.databaseUrl) throw new StartupError('kslate sweep needs --database-url URL (or KSLATE_DATABASE_URL).');
      const [{ createLogger }, { createPool, PgDb }, { migrate }, { classDirSource }, { sweep }, { MAINTENANCE_TIMEOUT_MS, sweepHolder }] = await Promise.all([
        import('./logger.js'),
        import('../db/kysely/index.js'),
        import('../db/migrate.js'),
        import('./classes/dir.js'),
        import('../worker/sweep.js'),
        import('./services.js'),
      ]);
      const log = createLogger({ level: cfg.logLevel });
      warnIfClearText(cfg.databaseUrl, log);
      const pool = createPool({ connectionString: cfg.databaseUrl, max: 3, timeoutMs: MAINTENANCE_TIMEOUT_MS });
      const db = new PgDb(pool);
      const ac = new AbortController();
      const onSignal = () => ac.abort();
      process.once('SIGTERM', onSignal);
      process.once('SIGINT', onSignal);
      try {
        await migrate(pool, { mode: cfg.databaseMode }).catch(modeFatal);
        const cluster = cfg.classesDir ? null : await workerCluster(cfg, log, () => undefined);
        const classesDir = cfg.classesDir;
        const report = await sweep(
          {
            db,
            log,
            holder: sweepHolder(),
            classSource: classesDir ? () => classDirSource(classesDir) : cluster ? () => cluster.classes.load() : undefined,
            roles: cluster?.roles,
            signal: ac.signal,
          },
          { budgetMs: cfg.sweepBudgetMs },
        );
        if (!report.ran) process.stdout.write('another sweep is running; nothing done\n');
        else {
          if (report.classes) {
            process.stdout.write(`classes reconciled: ${report.classes.applied.join(', ') || '(none)'}\n`);
            for (const p of report.classes.problems) process.stdout.write(`manifest refused: ${p}\n`);
            for (const r of report.classes.refused) process.stdout.write(`manifest refused: ${r.namespace}/${r.name}: ${r.reason}\n`);
          }
          if (report.expired) process.stdout.write(`records expired: ${report.expired.records}${report.expired.more ? ' (more next sweep)' : ''}\n`);
          for (const e of report.errors) process.stdout.write(`step ${e.step} failed: ${e.message}\n`);
        }
        return report.ok ? 0 : 1;
      } finally {
        process.off('SIGTERM', onSignal);
        process.off('SIGINT', onSignal);
        await pool.end();
      }
    }
    case 'migrate': {
      const cfg = parseConfig(rest);
      if (!cfg.databaseUrl) throw new StartupError(`kslate ${cmd} needs --database-url URL (or KSLATE_DATABASE_URL).`);
      const [{ default: pg }, { migrate }] = await Promise.all([import('pg'), import('../db/migrate.js')]);
      const pool = new pg.Pool({ connectionString: cfg.databaseUrl, max: 2 });
      try {
        await migrate(pool, { mode: cfg.databaseMode }).catch(modeFatal);
        process.stdout.write('schema up to date\n');
        return 0;
      } finally {
        await pool.end();
      }
    }
    case 'classes': {
      if (rest[0] !== 'check' || !rest[1]) throw new ConfigError('usage: kslate classes check DIR');
      const { classesCheck } = await import('./classes-check.js');
      return classesCheck(rest[1], (line) => process.stdout.write(line + '\n'));
    }
    case 'version':
    case '--version':
    case '-v':
      process.stdout.write(version());
      return 0;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE);
      return cmd === undefined ? 2 : 0;
    default:
      process.stderr.write(`unknown command "${cmd}"\n\n${USAGE}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (e: unknown) => {
    let code = 1;
    try {
      const known = e instanceof ConfigError || e instanceof StartupError;
      if (e instanceof StartupError) code = e.exitCode;
      else if (e instanceof ConfigError) code = 2;
      process.stderr.write(`kslate: ${known ? (e as Error).message : describeError(e)}\n`);
    } catch {
      // The last handler: whatever happened above, still exit non-zero.
    }
    process.exit(code);
  },
);
