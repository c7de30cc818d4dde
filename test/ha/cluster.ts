/**
 * A real high-availability PostgreSQL for the HA tests (issue 34): etcd, two or three
 * PostgreSQL 15 nodes managed by Patroni in strict synchronous mode, and HAProxy routing to
 * the primary by Patroni's REST check (`/primary`), all on loopback ports, in a directory the
 * harness owns. Debian's packages (`scripts/ha-deps.sh` installs them): patroni 3.0.x,
 * etcd-server 3.4, haproxy 2.6, postgresql-15.
 *
 * PostgreSQL refuses to run as root, so Patroni (and the postgres it starts) runs as the
 * `postgres` user; etcd and HAProxy run as the test. `stop()` kills every process it started
 * (by pid, frozen ones too) and removes the directory; so does the process's exit.
 */
import { spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { stringify } from 'yaml';
import { freePort } from '../setup/ports.js';
import { alive, childrenOf, ownedDir, postgresEnv, postgresUser, signal, spawnLogged, waitFor } from '../support/postgres-process.js';

export { waitFor };

export const PG_BIN = '/usr/lib/postgresql/15/bin';

/**
 * Patroni's timing. A primary that stops renewing its leader key loses it after `ttl`; the HA
 * loop runs every `loop_wait`; `loop_wait + 2 * retry_timeout <= ttl` (Patroni's rule). Short,
 * so a failover takes seconds, but not so short that a starved 2-core CI machine fails over
 * by itself.
 */
export const PATRONI_TIMING = { ttl: 12, loop_wait: 2, retry_timeout: 5 };

/** The tools the harness needs: what `scripts/ha-deps.sh` installs. Null when all are there. */
export function missingTools(): string | null {
  const missing = ['patroni', 'etcd', 'haproxy'].filter((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0);
  if (!existsSync(join(PG_BIN, 'postgres'))) missing.push('postgresql-15');
  return missing.length ? `missing ${missing.join(', ')}: run scripts/ha-deps.sh (as root) first` : null;
}

interface Member {
  name: string;
  role: string;
  state: string;
  lag?: number | string;
  timeline?: number;
}

export interface NodeInfo {
  name: string;
  pgPort: number;
  restPort: number;
  dir: string;
  dataDir: string;
  patroni: ChildProcess | null;
  /** Pids stopped with SIGSTOP by freeze(), to be continued by thaw(). */
  frozen: number[];
}

export class HaCluster {
  readonly nodes: NodeInfo[] = [];
  private etcd: ChildProcess | null = null;
  private haproxy: ChildProcess | null = null;
  private etcdPort = 0;
  private stopped = false;

  private constructor(
    readonly dir: string,
    readonly haproxyPort: number,
    readonly scope: string,
  ) {}

  /** postgres:// URL of the primary through HAProxy, for `database`. */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.haproxyPort}/${database}`;
  }

  /** The URL of one node directly (not through HAProxy). */
  nodeUrl(name: string, database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.node(name).pgPort}/${database}`;
  }

  node(name: string): NodeInfo {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`no node ${name}`);
    return n;
  }

  /** Start etcd, `nodes` Patroni members and HAProxy; resolves when a primary with a synchronous standby serves through HAProxy. */
  static async start(opts: { nodes?: number; timeoutMs?: number } = {}): Promise<HaCluster> {
    const missing = missingTools();
    if (missing) throw new Error(missing);
    const dir = ownedDir('kslate-ha-');
    const c = new HaCluster(dir, await freePort(), `kslate-${process.pid}`);
    try {
      await c.boot(opts.nodes ?? 3, opts.timeoutMs ?? 180_000);
      return c;
    } catch (e) {
      await c.stop();
      throw e;
    }
  }

  /** A child logging to `<dir>/<log>.log` (support/postgres-process.ts spawnLogged). */
  private spawnLogged(cmd: string, args: string[], log: string, opts: SpawnOptions & { asPostgres?: boolean } = {}): ChildProcess {
    return spawnLogged(cmd, args, join(this.dir, `${log}.log`), opts);
  }

  private async boot(count: number, timeoutMs: number): Promise<void> {
    const { uid, gid } = postgresUser();
    this.etcdPort = await freePort();
    const peerPort = await freePort();
    const etcdDir = join(this.dir, 'etcd');
    this.etcd = this.spawnLogged(
        'etcd',
        [
          '--name', 'e1',
          '--data-dir', etcdDir,
          '--listen-client-urls', `http://127.0.0.1:${this.etcdPort}`,
          '--advertise-client-urls', `http://127.0.0.1:${this.etcdPort}`,
          '--listen-peer-urls', `http://127.0.0.1:${peerPort}`,
          '--initial-advertise-peer-urls', `http://127.0.0.1:${peerPort}`,
          '--initial-cluster', `e1=http://127.0.0.1:${peerPort}`,
          // Patroni 3.0.x speaks etcd's v2 API here (see patroniConfig).
          '--enable-v2=true',
        ],
        'etcd',
    );
    await waitFor('etcd', async () => ((await fetch(`http://127.0.0.1:${this.etcdPort}/health`)).ok ? true : undefined), 30_000);

    for (let i = 1; i <= count; i++) {
      const name = `pg${i}`;
      const nodeDir = join(this.dir, name);
      mkdirSync(nodeDir);
      chownSync(nodeDir, uid, gid);
      this.nodes.push({ name, pgPort: await freePort(), restPort: await freePort(), dir: nodeDir, dataDir: join(nodeDir, 'data'), patroni: null, frozen: [] });
    }
    for (const n of this.nodes) {
      writeFileSync(join(n.dir, 'patroni.yml'), stringify(this.patroniConfig(n)));
      chownSync(join(n.dir, 'patroni.yml'), uid, gid);
    }
    // The first node bootstraps (initdb); the others clone it once it leads, which keeps a
    // starved machine from racing three initdbs.
    this.startPatroni(this.nodes[0].name);
    await this.waitForLeader(timeoutMs);
    for (const n of this.nodes.slice(1)) this.startPatroni(n.name);

    writeFileSync(join(this.dir, 'haproxy.cfg'), this.haproxyConfig());
    this.haproxy = this.spawnLogged('haproxy', ['-db', '-f', join(this.dir, 'haproxy.cfg')], 'haproxy');
    await this.waitHealthy(timeoutMs);
    await waitFor('the primary through HAProxy', () => this.primaryThroughProxy(), timeoutMs);
  }

  private patroniConfig(n: NodeInfo): Record<string, unknown> {
    return {
      scope: this.scope,
      name: n.name,
      log: { level: 'INFO' },
      restapi: { listen: `127.0.0.1:${n.restPort}`, connect_address: `127.0.0.1:${n.restPort}` },
      // etcd's v2 API, not `etcd3`: Patroni 3.0.2's etcd3 client re-creates its leader key
      // unconditionally when its lease has expired (fixed in 3.0.3, patroni/patroni#2689), so
      // a primary frozen past the ttl steals the key back from the promoted standby on
      // resume: a split brain. The v2 client only writes the key while it still holds it.
      etcd: { host: `127.0.0.1:${this.etcdPort}` },
      bootstrap: {
        dcs: {
          ...PATRONI_TIMING,
          maximum_lag_on_failover: 1024 * 1024,
          // The setting kslate needs (docs/ha.md): a commit is acknowledged only once a
          // standby has it, and with no standby commits wait rather than go asynchronous.
          synchronous_mode: true,
          synchronous_mode_strict: true,
          postgresql: {
            use_pg_rewind: true,
            use_slots: true,
            parameters: {
              wal_log_hints: 'on',
              max_connections: 100,
              max_wal_senders: 10,
              max_replication_slots: 10,
              wal_keep_size: '128MB',
              // The test kills processes, never the machine: the OS keeps what was written, so
              // skipping fsync loses nothing here and spares a shared CI disk.
              fsync: 'off',
            },
          },
        },
        initdb: [{ encoding: 'UTF8' }, { locale: 'C' }],
        pg_hba: ['local all all trust', 'host replication replicator 127.0.0.1/32 trust', 'host all all 127.0.0.1/32 trust'],
      },
      postgresql: {
        listen: `127.0.0.1:${n.pgPort}`,
        connect_address: `127.0.0.1:${n.pgPort}`,
        data_dir: n.dataDir,
        bin_dir: PG_BIN,
        pgpass: join(n.dir, 'pgpass'),
        authentication: {
          superuser: { username: 'postgres', password: 'ha-test' },
          replication: { username: 'replicator', password: 'ha-test' },
          rewind: { username: 'postgres', password: 'ha-test' },
        },
        parameters: { unix_socket_directories: n.dir },
        remove_data_directory_on_rewind_failure: true,
        remove_data_directory_on_diverged_timelines: true,
      },
    };
  }

  private haproxyConfig(): string {
    return [
      'global',
      '  maxconn 2000',
      'defaults',
      '  mode tcp',
      '  timeout connect 2s',
      '  timeout client 30m',
      '  timeout server 30m',
      '  timeout check 1s',
      'listen primary',
      `  bind 127.0.0.1:${this.haproxyPort}`,
      // Patroni answers 200 on /primary only on the member holding the leader key.
      '  option httpchk GET /primary',
      '  http-check expect status 200',
      // Sessions to a member marked down are cut, so no client keeps talking to a demoted primary.
      '  default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions',
      ...this.nodes.map((n) => `  server ${n.name} 127.0.0.1:${n.pgPort} maxconn 200 check port ${n.restPort}`),
      '',
    ].join('\n');
  }

  /** (Re)start a node's Patroni (as the postgres user); it starts or rejoins its PostgreSQL. */
  startPatroni(name: string): void {
    const n = this.node(name);
    if (n.patroni && n.patroni.exitCode === null && n.patroni.signalCode === null) throw new Error(`${name}: Patroni is running`);
    n.patroni = this.spawnLogged('patroni', [join(n.dir, 'patroni.yml')], name, {
      asPostgres: true,
      cwd: n.dir,
      env: postgresEnv(n.dir, { PYTHONUNBUFFERED: '1' }),
    });
  }

  /** The postmaster's pid (from its data directory), or null when none runs. */
  postmasterPid(name: string): number | null {
    try {
      const pid = Number(readFileSync(join(this.node(name).dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      return pid > 0 && alive(pid) ? pid : null;
    } catch {
      return null;
    }
  }

  /** Every process of a node: Patroni, the postmaster and its children. */
  private nodePids(name: string): number[] {
    const n = this.node(name);
    const pids: number[] = [];
    if (n.patroni?.pid && n.patroni.exitCode === null && n.patroni.signalCode === null) pids.push(n.patroni.pid);
    const pm = this.postmasterPid(name);
    if (pm) pids.push(pm, ...childrenOf(pm));
    return pids;
  }

  /** The machine dies: SIGKILL to the node's Patroni, its postmaster and every backend at once. */
  async kill(name: string): Promise<void> {
    const pids = this.nodePids(name);
    signal(pids, 'SIGKILL');
    this.node(name).frozen = [];
    await waitFor(`${name}'s processes to die`, () => (pids.some(alive) ? undefined : true), 30_000, 50);
  }

  /** The machine freezes (a VM paused, a stalled disk): SIGSTOP to Patroni, the postmaster and its backends. */
  freeze(name: string): void {
    const pids = this.nodePids(name);
    signal(pids, 'SIGSTOP');
    this.node(name).frozen = pids;
  }

  thaw(name: string): void {
    const n = this.node(name);
    signal(n.frozen, 'SIGCONT');
    n.frozen = [];
  }

  /** Patroni's view of the cluster from the first member that answers (GET /cluster). */
  async members(): Promise<Member[] | null> {
    for (const n of this.nodes) {
      if (n.frozen.length) continue;
      try {
        const res = await fetch(`http://127.0.0.1:${n.restPort}/cluster`, { signal: AbortSignal.timeout(2_000) });
        if (res.ok) return ((await res.json()) as { members: Member[] }).members;
      } catch {
        /* try the next */
      }
    }
    return null;
  }

  /** The running leader's name, as Patroni sees it. */
  async leader(): Promise<string | null> {
    const m = await this.members();
    return m?.find((x) => x.role === 'leader' && x.state === 'running')?.name ?? null;
  }

  async waitForLeader(timeoutMs: number, not?: string): Promise<string> {
    return waitFor(not ? `a leader other than ${not}` : 'a leader', async () => {
      const l = await this.leader();
      return l && l !== not ? l : undefined;
    }, timeoutMs);
  }

  /**
   * Every member running, one leader, a synchronous standby streaming and every replica
   * on the leader's timeline: the state a failover test starts from.
   */
  async waitHealthy(timeoutMs: number): Promise<{ leader: string; sync: string }> {
    return waitFor('every member running with a synchronous standby', async () => {
      const m = await this.members();
      if (!m || m.length !== this.nodes.length) return undefined;
      const leader = m.find((x) => x.role === 'leader');
      const sync = m.find((x) => x.role === 'sync_standby');
      if (!leader || !sync || leader.state !== 'running') return undefined;
      if (m.some((x) => !['running', 'streaming'].includes(x.state) || x.timeline !== leader.timeline)) return undefined;
      return { leader: leader.name, sync: sync.name };
    }, timeoutMs, 500);
  }

  /** Patroni's planned switchover (REST POST /switchover), from the leader to `candidate`. */
  async switchover(leader: string, candidate: string): Promise<void> {
    const res = await fetch(`http://127.0.0.1:${this.node(leader).restPort}/switchover`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ leader, candidate }),
      signal: AbortSignal.timeout(60_000),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`switchover ${leader} -> ${candidate}: ${res.status} ${text}`);
  }

  /** Which node answers through HAProxy, when it is a writable primary; undefined otherwise. */
  async primaryThroughProxy(): Promise<number | undefined> {
    const c = new pg.Client({ connectionString: this.url(), connectionTimeoutMillis: 2_000, query_timeout: 2_000 });
    c.on('error', () => undefined);
    try {
      await c.connect();
      const { rows } = await c.query<{ port: number; ro: boolean }>('select inet_server_port() as port, pg_is_in_recovery() as ro');
      return rows[0].ro ? undefined : rows[0].port;
    } catch {
      return undefined;
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  /** Run SQL on the primary (through HAProxy). */
  async sql<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, database = 'postgres'): Promise<R[]> {
    const c = new pg.Client({ connectionString: this.url(database), connectionTimeoutMillis: 5_000 });
    c.on('error', () => undefined);
    await c.connect();
    try {
      return (await c.query<R>(text)).rows;
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  /** The tail of a process's log in the cluster directory (for failure messages). */
  logTail(name: string, lines = 40): string {
    try {
      return readFileSync(join(this.dir, `${name}.log`), 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }

  /**
   * Stop everything: every process of the cluster killed by pid (frozen ones included; the
   * cluster is thrown away, so nothing is stopped gracefully) and the directory removed,
   * unless KSLATE_HA_KEEP=1 keeps it for a post-mortem.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const pids = this.nodes.flatMap((n) => this.nodePids(n.name));
    if (this.haproxy?.pid) pids.push(this.haproxy.pid);
    if (this.etcd?.pid) pids.push(this.etcd.pid);
    signal(pids, 'SIGKILL');
    await waitFor('the cluster processes to exit', () => (pids.some(alive) ? undefined : true), 15_000, 100);
    if (process.env.KSLATE_HA_KEEP !== '1') rmSync(this.dir, { recursive: true, force: true });
  }
}
