/**
 * A PostgreSQL 15 primary with streaming standbys made by `pg_basebackup`, for the standby-read
 * tests and bench (issue 34 items 4 and 6; docs/ha.md "Reads from standbys"). No Patroni: the
 * test owns each server, pauses replay on a standby, and kills one mid-load.
 *
 * PostgreSQL refuses to run as root, so every server runs as the `postgres` user in a directory
 * under /tmp that user owns, on free loopback ports. `stop()` kills what it started and removes
 * the directory; so does the process's exit.
 */
import type { ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../setup/ports.js';
import { accepts, childrenOf, initdb, ownedDir, postgresEnv, runAsPostgres, spawnLogged, waitFor } from '../support/postgres-process.js';
import { PG_BIN } from './cluster.js';

/** Why the harness cannot run here, or null. */
export function missingStreamingTools(): string | null {
  for (const t of ['initdb', 'postgres', 'pg_basebackup']) if (!existsSync(join(PG_BIN, t))) return `missing ${join(PG_BIN, t)}: run scripts/ha-deps.sh (as root)`;
  return null;
}

export interface PgServer {
  name: string;
  port: number;
  dataDir: string;
  proc: ChildProcess | null;
}

export class StreamingCluster {
  readonly primary: PgServer;
  readonly standbys: PgServer[] = [];

  private constructor(readonly dir: string, primaryPort: number) {
    this.primary = { name: 'primary', port: primaryPort, dataDir: join(dir, 'primary'), proc: null };
  }

  /** A primary and `standbys` streaming standbys, each serving reads (hot_standby). */
  static async start(standbys: number): Promise<StreamingCluster> {
    const missing = missingStreamingTools();
    if (missing) throw new Error(missing);
    const dir = ownedDir('kslate-streaming-');
    const c = new StreamingCluster(dir, await freePort());
    try {
      initdb(PG_BIN, c.primary.dataDir, { cwd: dir, env: postgresEnv(dir) });
      appendFileSync(
        join(c.primary.dataDir, 'postgresql.conf'),
        [
          'wal_level = replica',
          'max_wal_senders = 10',
          'hot_standby = on',
          // Reads on a standby are not cancelled for replay for a while (and replay waits), as an operator would set for a read replica.
          'max_standby_streaming_delay = 5s',
          'hot_standby_feedback = on',
          'fsync = off',
          'max_connections = 200',
          // track_counts (default on) feeds pg_stat_user_tables on the standby: the test reads it.
          '',
        ].join('\n'),
      );
      appendFileSync(join(c.primary.dataDir, 'pg_hba.conf'), 'host replication all 127.0.0.1/32 trust\n');
      await c.startServer(c.primary);
      for (let i = 0; i < standbys; i++) await c.addStandby();
      return c;
    } catch (e) {
      await c.stop();
      throw e;
    }
  }

  url(s: PgServer = this.primary, database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${s.port}/${database}`;
  }

  /** A streaming standby cloned from the primary now (pg_basebackup -R). */
  async addStandby(): Promise<PgServer> {
    const s: PgServer = { name: `standby${this.standbys.length}`, port: await freePort(), dataDir: join(this.dir, `standby${this.standbys.length}`), proc: null };
    runAsPostgres(join(PG_BIN, 'pg_basebackup'), ['-D', s.dataDir, '-h', '127.0.0.1', '-p', String(this.primary.port), '-U', 'postgres', '-X', 'stream', '-R', '-c', 'fast'], { cwd: this.dir, env: postgresEnv(this.dir) });
    this.standbys.push(s);
    await this.startServer(s);
    return s;
  }

  /** Start (or restart) one server; resolves once it accepts connections (a standby: reads). */
  async startServer(s: PgServer): Promise<void> {
    const proc = spawnLogged(
      join(PG_BIN, 'postgres'),
      ['-D', s.dataDir, '-p', String(s.port), '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${this.dir}`],
      join(this.dir, `${s.name}.log`),
      { asPostgres: true, env: postgresEnv(this.dir) },
    );
    s.proc = proc;
    await waitFor(
      `${s.name} to accept connections`,
      () => {
        if (proc.exitCode !== null) throw new Error(`${s.name} exited: ${this.log(s).slice(-2000)}`);
        return accepts(this.url(s));
      },
      60_000,
      100,
    );
  }

  log(s: PgServer): string {
    try {
      return readFileSync(join(this.dir, `${s.name}.log`), 'utf8');
    } catch {
      return '';
    }
  }

  /** SIGKILL every process of a server: its backends first, then the postmaster. */
  async kill(s: PgServer): Promise<void> {
    const proc = s.proc;
    if (!proc || proc.exitCode !== null || proc.pid === undefined) return;
    const exited = new Promise((r) => proc.once('exit', r));
    for (const pid of childrenOf(proc.pid)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    proc.kill('SIGKILL');
    await exited;
    s.proc = null;
  }

  /** One statement on a server (a fresh connection). */
  async sql<R extends pg.QueryResultRow = any>(s: PgServer, text: string, values: unknown[] = [], database = 'postgres'): Promise<R[]> {
    const c = new pg.Client({ connectionString: this.url(s, database) });
    await c.connect();
    try {
      return (await c.query<R>(text, values)).rows;
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  /** Wait until every running standby has replayed the primary's current WAL position. */
  async caughtUp(timeoutMs = 60_000): Promise<void> {
    const [{ lsn }] = await this.sql(this.primary, 'select pg_current_wal_lsn()::text as lsn');
    for (const s of this.standbys.filter((x) => x.proc)) {
      await waitFor(`${s.name} to replay ${lsn}`, async () => ((await this.sql(s, 'select pg_last_wal_replay_lsn() >= $1::pg_lsn as ok', [lsn]))[0].ok ? true : undefined), timeoutMs, 50);
    }
  }

  async stop(): Promise<void> {
    for (const s of [...this.standbys, this.primary]) await this.kill(s).catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
