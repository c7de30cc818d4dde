/**
 * A PostgreSQL 15 primary with streaming standbys made by `pg_basebackup`, for the standby-read
 * tests and bench (issue 34 items 4 and 6; docs/ha.md "Reads from standbys"). No Patroni: the
 * test owns each server, pauses replay on a standby, and kills one mid-load.
 *
 * PostgreSQL refuses to run as root, so every server runs as the `postgres` user in a directory
 * under /tmp that user owns, on free loopback ports. `stop()` kills what it started and removes
 * the directory; so does the process's exit.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, chownSync, closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../setup/ports.js';
import { PG_BIN, waitFor } from './cluster.js';

function postgresUser(): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('no postgres user: install postgresql-15 (scripts/ha-deps.sh)');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Why the harness cannot run here, or null. */
export function missingStreamingTools(): string | null {
  for (const t of ['initdb', 'postgres', 'pg_basebackup']) if (!existsSync(join(PG_BIN, t))) return `missing ${join(PG_BIN, t)}: run scripts/ha-deps.sh (as root)`;
  return null;
}

/** The pids whose parent is `pid` (from /proc): a postmaster's backends. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(d));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

const started = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of started) c.kill('SIGKILL');
});

export interface PgServer {
  name: string;
  port: number;
  dataDir: string;
  proc: ChildProcess | null;
}

export class StreamingCluster {
  readonly primary: PgServer;
  readonly standbys: PgServer[] = [];
  private readonly owner = postgresUser();

  private constructor(readonly dir: string, primaryPort: number) {
    this.primary = { name: 'primary', port: primaryPort, dataDir: join(dir, 'primary'), proc: null };
  }

  /** A primary and `standbys` streaming standbys, each serving reads (hot_standby). */
  static async start(standbys: number): Promise<StreamingCluster> {
    const missing = missingStreamingTools();
    if (missing) throw new Error(missing);
    const dir = mkdtempSync(join(tmpdir(), 'kslate-streaming-'));
    const c = new StreamingCluster(dir, await freePort());
    try {
      chownSync(dir, c.owner.uid, c.owner.gid);
      c.run('initdb', ['-D', c.primary.dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C']);
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

  /** Run a PostgreSQL tool as the postgres user; throws with its output when it fails. */
  private run(tool: string, args: string[]): void {
    const r = spawnSync(join(PG_BIN, tool), args, { uid: this.owner.uid, gid: this.owner.gid, cwd: this.dir, encoding: 'utf8', env: { PATH: '/usr/bin:/bin', LANG: 'C' } });
    if (r.status !== 0) throw new Error(`${tool} ${args.join(' ')} failed: ${r.stderr || r.stdout || r.error?.message}`);
  }

  url(s: PgServer = this.primary, database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${s.port}/${database}`;
  }

  /** A streaming standby cloned from the primary now (pg_basebackup -R). */
  async addStandby(): Promise<PgServer> {
    const s: PgServer = { name: `standby${this.standbys.length}`, port: await freePort(), dataDir: join(this.dir, `standby${this.standbys.length}`), proc: null };
    this.run('pg_basebackup', ['-D', s.dataDir, '-h', '127.0.0.1', '-p', String(this.primary.port), '-U', 'postgres', '-X', 'stream', '-R', '-c', 'fast']);
    this.standbys.push(s);
    await this.startServer(s);
    return s;
  }

  /** Start (or restart) one server; resolves once it accepts connections (a standby: reads). */
  async startServer(s: PgServer): Promise<void> {
    const fd = openSync(join(this.dir, `${s.name}.log`), 'a');
    try {
      s.proc = spawn(join(PG_BIN, 'postgres'), ['-D', s.dataDir, '-p', String(s.port), '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${this.dir}`], {
        uid: this.owner.uid,
        gid: this.owner.gid,
        stdio: ['ignore', fd, fd],
        env: { PATH: '/usr/bin:/bin', LANG: 'C' },
      });
    } finally {
      closeSync(fd);
    }
    const proc = s.proc;
    started.add(proc);
    proc.once('exit', () => started.delete(proc));
    await waitFor(
      `${s.name} to accept connections`,
      async () => {
        if (proc.exitCode !== null) throw new Error(`${s.name} exited: ${this.log(s).slice(-2000)}`);
        const c = new pg.Client({ connectionString: this.url(s) });
        try {
          await c.connect();
          await c.query('select 1');
          return true;
        } finally {
          await c.end().catch(() => undefined);
        }
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
