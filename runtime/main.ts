/** The `kslate` command line: serve, dev, sweep, migrate, classes check. */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { migrate } from '../db/migrate.js';
import { PgDb } from '../db/kysely/index.js';
import { readClassDir } from './classes/dir.js';
import { sweep } from '../worker/sweep.js';
import { classesCheck } from './classes-check.js';
import { ConfigError, FLAGS, parseConfig } from './config.js';
import { describeError } from './describe-error.js';
import { dev } from './dev.js';
import { guardFaults } from './fault-guard.js';
import { createLogger } from './logger.js';
import { startGateway } from './serve.js';
import { stopOnSignals } from './shutdown.js';
import { StartupError, sweepHolder } from './services.js';

const flagLine = (k: string) => {
  const f = FLAGS[k];
  return `  --${k.padEnd(16)} ${f.env.padEnd(24)} ${f.help}${f.default ? ` (default ${f.default})` : ''}`;
};

const USAGE = `kslate — shared, versioned records for fleets of agents

Usage:
  kslate serve  --database-url URL [flags]   run the gateway (HTTP/JSON, MCP)
  kslate dev    [flags]                      embedded PostgreSQL + example classes and keys (npm start)
  kslate sweep  --database-url URL --classes DIR   run one sweep and exit (for cron)
  kslate migrate --database-url URL          apply the database schema and exit
  kslate classes check DIR                   validate SharedContext manifests
  kslate version                             print the version (also --version, -v)
  kslate COMMAND --help                      that command's usage and flags

Flags (each also an environment variable):
${Object.keys(FLAGS).map(flagLine).join('\n')}
`;

const DEV_ONLY = ['data-dir', 'dev-pg-port'];
const SERVE_FLAGS = Object.keys(FLAGS).filter((k) => !DEV_ONLY.includes(k));

/** `kslate COMMAND --help`: what the command does and the flags it reads. */
const COMMAND_USAGE: Record<string, { usage: string; flags: string[] }> = {
  serve: {
    usage: 'kslate serve --database-url URL [flags]\n\nRun the gateway: HTTP/JSON and MCP on --listen, gRPC on --grpc-port, /metrics, /readyz and\n/healthz on --metrics-port. SIGTERM or SIGINT drains requests in flight (--drain-timeout), then stops.',
    flags: SERVE_FLAGS,
  },
  dev: {
    usage: 'kslate dev [flags]        (what `npm start` runs)\n\nThe gateway and the sweep in one process on an embedded PostgreSQL kept under --data-dir, with the\nexample classes and keys (defaults: --identity apikey --apikeys examples/apikeys.yaml\n--classes examples/classes --sweep-interval 10s), on loopback only. With --database-url it uses\nthat database instead. Ctrl-C stops it.',
    flags: Object.keys(FLAGS),
  },
  sweep: {
    usage: 'kslate sweep --database-url URL --classes DIR\n\nRun one sweep (reconcile the classes in DIR, prune read sets) and exit: 0 when done or when\nanother sweep is running, 1 when a manifest was refused.',
    flags: ['database-url', 'classes', 'log-level'],
  },
  migrate: {
    usage: 'kslate migrate --database-url URL\n\nApply the database schema and exit.',
    flags: ['database-url'],
  },
  classes: {
    usage: 'kslate classes check DIR\n\nValidate the SharedContext manifests in DIR: "ok", or one line per problem and exit 1.',
    flags: [],
  },
  version: { usage: 'kslate version        (also kslate --version, kslate -v)\n\nPrint the version.', flags: [] },
};

function commandHelp(cmd: string): string {
  const c = COMMAND_USAGE[cmd];
  const flags = c.flags.length > 0 ? `\nFlags (each also an environment variable):\n${c.flags.map(flagLine).join('\n')}\n` : '';
  return `Usage: ${c.usage}\n${flags}`;
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return `kslate ${pkg.version}\n`;
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
      const serveLog = createLogger({ level: cfg.logLevel });
      guardFaults(serveLog);
      const gw = await startGateway(cfg, serveLog);
      stopOnSignals(serveLog, () => gw.shutdown(cfg.drainTimeoutMs));
      return -1; // keep running
    }
    case 'dev':
      await dev(rest);
      return -1;
    case 'sweep':
    case 'migrate': {
      const cfg = parseConfig(rest);
      if (!cfg.databaseUrl) throw new StartupError(`kslate ${cmd} needs --database-url URL (or KSLATE_DATABASE_URL).`);
      const log = createLogger({ level: cfg.logLevel });
      const pool = new pg.Pool({ connectionString: cfg.databaseUrl, max: 4 });
      try {
        await migrate(pool);
        if (cmd === 'migrate') {
          process.stdout.write('schema up to date\n');
          return 0;
        }
        const db = new PgDb(pool);
        const classesDir = cfg.classesDir;
        const report = await sweep({
          db,
          log,
          classSource: classesDir ? () => readClassDir(classesDir) : undefined,
          holder: sweepHolder(),
        });
        if (!report.ran) process.stdout.write('another sweep is running; nothing done\n');
        else if (report.classes) process.stdout.write(`classes reconciled: ${report.classes.applied.join(', ') || '(none)'}\n`);
        return report.classes && (report.classes.problems.length > 0 || report.classes.refused.length > 0) ? 1 : 0;
      } finally {
        await pool.end();
      }
    }
    case 'classes': {
      if (rest[0] !== 'check' || !rest[1]) throw new ConfigError('usage: kslate classes check DIR');
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
