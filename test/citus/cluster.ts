/**
 * A real Citus cluster for the Citus tests (issue 35, docs/scale-out.md): a coordinator and
 * two workers (more with addWorker), each a PostgreSQL 15 with the citus extension, on
 * loopback ports, in a directory the harness owns.
 *
 * Citus is built from source by `scripts/citus-build.sh` (KSLATE_CITUS_SRC names the tarball;
 * the build is cached) into a copy of Debian's PostgreSQL 15. PostgreSQL refuses to run as
 * root, so the nodes run as the `postgres` user; when that user cannot read the build's cache
 * (root's home is closed to it), the installation is copied into the cluster's directory.
 * `stop()` kills every process it started (by pid) and removes the directory; so does the
 * process's exit.
 *
 * Citus is per database: a database is distributed once the extension exists in it on every
 * node and the coordinator knows the workers (createDatabase does both).
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort } from '../setup/ports.js';
import { accepts, alive, initdb, ownedDir, postgresEnv, postgresUser, signal, spawnLogged, waitFor } from '../support/postgres-process.js';

export { waitFor };

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** Where Debian's layout puts the binaries, inside the build's root. */
const PG_BIN_IN_ROOT = 'usr/lib/postgresql/15/bin';

/**
 * The Citus tarball: KSLATE_CITUS_SRC (relative to the repository's parent, as CI passes it,
 * or absolute), else the machine's vendored copy next to the checkout or in /work/shared.
 */
export function citusSource(): string | null {
  const given = process.env.KSLATE_CITUS_SRC;
  const candidates = given
    ? [given.startsWith('/') ? given : resolve(repo, '..', given), resolve(given)]
    : [resolve(repo, '../shared/vendor/citus/citus-13.2.2.tar.gz'), '/work/shared/vendor/citus/citus-13.2.2.tar.gz'];
  return candidates.find((p) => existsSync(p)) ?? null;
}

/** Build (or find cached) Citus; the root of the PostgreSQL-with-Citus installation. */
export function buildCitus(): string {
  const src = citusSource();
  if (!src) throw new Error('no Citus source tarball: set KSLATE_CITUS_SRC (e.g. ../shared/vendor/citus/citus-13.2.2.tar.gz)');
  const res = spawnSync(join(repo, 'scripts/citus-build.sh'), [], {
    env: { ...process.env, KSLATE_CITUS_SRC: src },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: 30 * 60_000,
  });
  if (res.status !== 0) throw new Error(`scripts/citus-build.sh failed (${res.status ?? res.signal})`);
  const root = res.stdout.trim().split('\n').pop() ?? '';
  if (!existsSync(join(root, PG_BIN_IN_ROOT, 'postgres'))) throw new Error(`citus-build.sh printed ${root}, which has no postgres`);
  return root;
}

export interface CitusNode {
  name: string;
  port: number;
  dataDir: string;
  proc: ChildProcess | null;
}

export class CitusCluster {
  readonly nodes: CitusNode[] = [];
  private stopped = false;

  private constructor(
    readonly dir: string,
    readonly bin: string,
  ) {}

  get coordinator(): CitusNode {
    return this.nodes[0];
  }

  get workers(): CitusNode[] {
    return this.nodes.slice(1);
  }

  /** postgres:// URL of the coordinator (what the gateway is pointed at), for `database`. */
  url(database = 'postgres'): string {
    return this.nodeUrl('coordinator', database);
  }

  nodeUrl(name: string, database = 'postgres'): string {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`no node ${name}`);
    return `postgres://postgres@127.0.0.1:${n.port}/${database}`;
  }

  /** Build Citus if needed, start a coordinator and `workers` workers; resolves when the database `postgres` is distributed over them. */
  static async start(opts: { workers?: number; timeoutMs?: number } = {}): Promise<CitusCluster> {
    const root = buildCitus();
    const { uid, gid } = postgresUser();
    const dir = ownedDir('kslate-citus-');
    let bin = join(root, PG_BIN_IN_ROOT);
    if (spawnSync('test', ['-x', join(bin, 'postgres')], { uid, gid }).status !== 0) {
      // The postgres user cannot reach the cache (e.g. under /root): a copy it can.
      const copy = join(dir, 'pg');
      cpSync(join(root, 'usr'), join(copy, 'usr'), { recursive: true, preserveTimestamps: true });
      spawnSync('chown', ['-R', `${uid}:${gid}`, copy]);
      bin = join(copy, PG_BIN_IN_ROOT);
    }
    const c = new CitusCluster(dir, bin);
    try {
      const timeoutMs = opts.timeoutMs ?? 120_000;
      const names = ['coordinator', ...Array.from({ length: opts.workers ?? 2 }, (_, i) => `worker${i + 1}`)];
      for (const name of names) c.nodes.push({ name, port: await freePort(), dataDir: join(dir, name), proc: null });
      await Promise.all(c.nodes.map((n) => c.initNode(n, timeoutMs)));
      await c.distribute('postgres');
      return c;
    } catch (e) {
      await c.stop();
      throw e;
    }
  }

  private async initNode(n: CitusNode, timeoutMs: number): Promise<void> {
    initdb(this.bin, n.dataDir, { cwd: this.dir, env: postgresEnv(this.dir), extra: ['--no-sync'] });
    const conf = [
      `port = ${n.port}`,
      `listen_addresses = '127.0.0.1'`,
      `unix_socket_directories = '${this.dir}'`,
      `shared_preload_libraries = 'citus'`,
      `citus.enable_statistics_collection = off`,
      // Every test file's gateways open pools to the coordinator, which opens connections to the workers.
      `max_connections = 300`,
      // Citus commits a transaction that wrote on several nodes in two phases.
      `max_prepared_transactions = 200`,
      // Shard moves (the rebalancer) use logical replication.
      `wal_level = logical`,
      `max_replication_slots = 20`,
      `max_wal_senders = 20`,
      `max_worker_processes = 32`,
      // The tests kill processes, never the machine: skipping fsync loses nothing and spares a shared disk.
      `fsync = off`,
      `full_page_writes = off`,
      `shared_buffers = 64MB`,
      `logging_collector = off`,
      '',
    ].join('\n');
    writeFileSync(join(n.dataDir, 'postgresql.conf'), `${readFileSync(join(n.dataDir, 'postgresql.conf'), 'utf8')}\n${conf}`);
    this.startNode(n);
    await waitFor(`${n.name} to accept connections`, () => accepts(this.nodeUrl(n.name)), timeoutMs, 100);
  }

  private startNode(n: CitusNode): void {
    n.proc = spawnLogged(join(this.bin, 'postgres'), ['-D', n.dataDir], join(this.dir, `${n.name}.log`), { asPostgres: true, env: postgresEnv(this.dir) });
  }

  /** Run `fn` with a client on node `name`, database `database`. */
  async on<T>(name: string, database: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
    const c = new pg.Client({ connectionString: this.nodeUrl(name, database) });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  }

  /**
   * Make `database` (existing on the coordinator) a Citus database: created on every worker
   * when missing, the extension in it on every node, the coordinator told where it is and
   * where each worker is.
   */
  async distribute(database: string): Promise<void> {
    for (const w of this.workers) {
      await this.on(w.name, 'postgres', async (c) => {
        const { rowCount } = await c.query('select 1 from pg_database where datname = $1', [database]);
        if (!rowCount) await c.query(`create database ${pg.escapeIdentifier(database)}`);
      });
      await this.on(w.name, database, (c) => c.query('create extension if not exists citus'));
    }
    await this.on('coordinator', database, async (c) => {
      await c.query('create extension if not exists citus');
      await c.query('select citus_set_coordinator_host($1, $2)', ['127.0.0.1', this.coordinator.port]);
      for (const w of this.workers) await c.query('select citus_add_node($1, $2)', ['127.0.0.1', w.port]);
    });
  }

  /** A new database, distributed over every worker. */
  async createDatabase(database: string): Promise<string> {
    await this.on('coordinator', 'postgres', (c) => c.query(`create database ${pg.escapeIdentifier(database)}`));
    await this.distribute(database);
    return this.url(database);
  }

  /**
   * Start one more worker and add it to `databases` (each already distributed): the
   * extension created in it and citus_add_node on the coordinator. Its shards come with a
   * rebalance (citus_rebalance_start).
   */
  async addWorker(databases: string[]): Promise<CitusNode> {
    const n: CitusNode = { name: `worker${this.nodes.length}`, port: await freePort(), dataDir: join(this.dir, `worker${this.nodes.length}`), proc: null };
    this.nodes.push(n);
    await this.initNode(n, 120_000);
    for (const db of databases) {
      if (db !== 'postgres') await this.on(n.name, 'postgres', (c) => c.query(`create database ${pg.escapeIdentifier(db)}`));
      await this.on(n.name, db, (c) => c.query('create extension if not exists citus'));
      await this.on('coordinator', db, (c) => c.query('select citus_add_node($1, $2)', ['127.0.0.1', n.port]));
    }
    return n;
  }

  /** The log of node `name` (for a failing test's message). */
  log(name: string): string {
    try {
      return readFileSync(join(this.dir, `${name}.log`), 'utf8');
    } catch {
      return '';
    }
  }

  /** Fast shutdown of every node (SIGKILL after 30 s), then the directory removed. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const pids = this.nodes.map((n) => n.proc?.pid).filter((p): p is number => !!p && alive(p));
    signal(pids, 'SIGINT');
    try {
      await waitFor('the nodes to stop', () => (pids.some(alive) ? undefined : true), 30_000, 50);
    } catch {
      signal(pids, 'SIGKILL');
    }
    if (!process.env.KSLATE_CITUS_KEEP) rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A pg.Pool for a test on the cluster. pg-pool re-emits an idle client's error on the pool, and
 * a pool with no 'error' listener turns it into an uncaught exception: the cluster stopping at a
 * file's end (57P01, "terminating connection due to administrator command") reaches clients the
 * pool is still closing, since pool.end() does not wait for their sockets to close. Such errors
 * are expected then; any other is written out for the run's log.
 */
export function testPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('error', (err: Error & { code?: string }) => {
    if (err.code === '57P01' || err.code === 'ECONNRESET') return;
    console.warn(`citus test pool: idle connection error: ${err.message}`);
  });
  return pool;
}
