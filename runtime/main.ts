/** The `kslate` command line: serve, dev, sweep, migrate, classes check. */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { migrate } from '../db/migrate.js';
import { PgDb } from '../db/kysely/index.js';
import { readClassDir } from '../worker/class-source/dir.js';
import { sweep } from '../worker/sweep.js';
import { classesCheck } from './classes-check.js';
import { ConfigError, FLAGS, parseConfig } from './config.js';
import { dev } from './dev.js';
import { createLogger } from './logger.js';
import { startGateway } from './serve.js';
import { StartupError } from './services.js';

const USAGE = `kslate — shared, versioned records for fleets of agents

Usage:
  kslate serve  --database-url URL [flags]   run the gateway (HTTP/JSON, MCP)
  kslate dev    [flags]                      embedded PostgreSQL + example classes and keys (npm start)
  kslate sweep  --database-url URL --classes DIR   run one sweep and exit (for cron)
  kslate migrate --database-url URL          apply the database schema and exit
  kslate classes check DIR                   validate SharedContext manifests
  kslate version

Flags (each also an environment variable):
${Object.entries(FLAGS)
  .map(([k, f]) => `  --${k.padEnd(16)} ${f.env.padEnd(24)} ${f.help}${f.default ? ` (default ${f.default})` : ''}`)
  .join('\n')}
`;

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  const log = createLogger({ level: process.env.KSLATE_LOG_LEVEL ?? 'info' });
  switch (cmd) {
    case 'serve': {
      const cfg = parseConfig(rest);
      const gw = await startGateway(cfg, createLogger({ level: cfg.logLevel }));
      const stop = () => void gw.close().finally(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      return -1; // keep running
    }
    case 'dev':
      await dev(rest, log);
      return -1;
    case 'sweep':
    case 'migrate': {
      const cfg = parseConfig(rest);
      if (!cfg.databaseUrl) throw new StartupError(`kslate ${cmd} needs --database-url URL (or KSLATE_DATABASE_URL).`);
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
          withLock: (k, fn) => db.withLock(k, fn),
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
    case '--version': {
      const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
      process.stdout.write(`kslate ${pkg.version}\n`);
      return 0;
    }
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
  (e) => {
    const known = e instanceof ConfigError || e instanceof StartupError;
    process.stderr.write(`kslate: ${known ? e.message : (e as Error).stack ?? String(e)}\n`);
    process.exit(known ? 2 : 1);
  },
);
