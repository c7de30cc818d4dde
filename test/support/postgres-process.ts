/**
 * Starting PostgreSQL (and what runs it, e.g. Patroni) as the `postgres` user, for the
 * harnesses that own their servers: test/ha/cluster.ts (Patroni), test/ha/streaming.ts
 * (primary and pg_basebackup standbys) and test/citus/cluster.ts (coordinator and workers).
 *
 * PostgreSQL refuses to run as root, so under root every server runs as `postgres`, in a
 * directory that user owns (`ownedDir`); under any other user it runs as that user. Every
 * process started here is remembered by pid and SIGKILLed if the test process exits without
 * stopping it.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { chownSync, closeSync, mkdtempSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

export interface OsUser {
  uid: number;
  gid: number;
}

/** The user PostgreSQL runs as: `postgres` under root (PostgreSQL refuses root), else the test's own user. */
export function postgresUser(): OsUser {
  if (process.getuid?.() !== 0) return { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('no postgres user: install postgresql-15 (scripts/ha-deps.sh)');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** A new directory under the system temp dir, owned by the user PostgreSQL runs as. */
export function ownedDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const { uid, gid } = postgresUser();
  chownSync(dir, uid, gid);
  return dir;
}

/** The environment a server or tool gets: a PATH, a HOME, a locale, and `extra`. */
export function postgresEnv(home: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8', ...extra };
}

/** The pids whose parent is `pid` (from /proc), e.g. a postmaster's backends. */
export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      // "pid (comm) state ppid ...": comm may hold spaces, so read after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(d));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** Whether `pid` runs; a zombie (exited, not yet reaped) counts as gone. */
export function alive(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Send `sig` to each pid, ignoring those already gone. */
export function signal(pids: number[], sig: NodeJS.Signals): void {
  for (const p of pids) {
    try {
      process.kill(p, sig);
    } catch {
      /* already gone */
    }
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Poll `probe` until it returns a value other than undefined, or fail naming `what` after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs: number, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await sleep(everyMs);
  }
}

/** Every process started here and still running, SIGKILLed if the test process exits without stopping it. */
const everyPid = new Set<number>();
process.once('exit', () => signal([...everyPid], 'SIGKILL'));

/**
 * Spawn a child writing stdout and stderr to `logFile` (appended: a restarted server keeps
 * its earlier log). A file, not a pipe: nothing has to read it, so a chatty child never
 * blocks. `asPostgres` runs it as the user PostgreSQL runs as.
 */
export function spawnLogged(cmd: string, args: string[], logFile: string, opts: SpawnOptions & { asPostgres?: boolean } = {}): ChildProcess {
  const { asPostgres, ...spawnOpts } = opts;
  const fd = openSync(logFile, 'a');
  try {
    const child = spawn(cmd, args, { ...spawnOpts, ...(asPostgres ? postgresUser() : {}), stdio: ['ignore', fd, fd] });
    const pid = child.pid;
    if (pid) everyPid.add(pid);
    child.once('exit', () => pid && everyPid.delete(pid));
    return child;
  } finally {
    closeSync(fd);
  }
}

/** Run a PostgreSQL tool (initdb, pg_basebackup) as the postgres user; throws with its output when it fails. */
export function runAsPostgres(tool: string, args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv }): void {
  const r = spawnSync(tool, args, { ...postgresUser(), cwd: opts.cwd, env: opts.env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${tool} ${args.join(' ')} failed: ${r.stderr || r.stdout || r.error?.message}`);
}

/** `initdb` of a test server: user postgres, trust, UTF-8, locale C. */
export function initdb(bin: string, dataDir: string, opts: { cwd: string; env: NodeJS.ProcessEnv; extra?: string[] }): void {
  runAsPostgres(join(bin, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C', ...(opts.extra ?? [])], opts);
}

/** Whether the server at `url` accepts a connection and a statement now (true), else throws. */
export async function accepts(url: string): Promise<true> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  c.on('error', () => undefined);
  try {
    await c.connect();
    await c.query('select 1');
    return true;
  } finally {
    await c.end().catch(() => undefined);
  }
}
