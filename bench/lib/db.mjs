/**
 * PostgreSQL for the bench: an embedded server in a temp dir (or KSLATE_BENCH_DATABASE_URL),
 * the kslate schema, and set-based seeds (one INSERT ... SELECT per table and class).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './util.mjs';

// The gateway's int8 parsing (db/kysely/pool.ts): counters as JS numbers.
export const pgTypes = {
  getTypeParser(oid, format) {
    if (oid === 20) return (v) => Number(v);
    return pg.types.getTypeParser(oid, format);
  },
};

/** The field columns the gateway's reads select (db/kysely/record.ts fieldColumns; the lease rule spelled out, for schemas before 0010). */
export const FIELD_COLUMNS = `f.name, f.kind, f.value, f.version, f.record_version, f.author, f.identity_strength, f.evidence,
   f.based_on, f.invocation, f.updated_at, f.owner, f.lease_expires_at, f.lease_lapsed,
   (f.owner is not null and f.lease_expires_at > now()) as lease_held`;

export const CLASS = 'bench';
export const QCLASS = 'benchq';
export const FIELDS = ['f1', 'f2', 'f3', 'f4', 'f5', 'f6', 'f7', 'f8'];
export const STATUSES = ['open', 'investigating', 'mitigated', 'resolved'];
export const TEAMS = 1000;
export const HOT = 10;
export const HIST_RID = 'hist-0';

const quiet = (say, pgLog) => ({ debug: (m) => pgLog?.(m), info: (m) => say(m), warn: (m) => say(m), error: (m) => say(m) });

/**
 * Start PostgreSQL (or take the given URL). Returns { url, stop, embedded }.
 * `dist` is the compiled project (for startEmbeddedPostgres).
 */
export async function startDatabase({ dist, say, pgLog }) {
  const given = process.env.KSLATE_BENCH_DATABASE_URL;
  if (given) return { url: given, embedded: false, stop: async () => {} };
  const { startEmbeddedPostgres } = await import(join(dist, 'runtime', 'dev.js'));
  const dir = mkdtempSync(join(tmpdir(), 'kslate-bench-pg-'));
  const port = await freePort();
  const db = await startEmbeddedPostgres(dir, port, quiet(say, pgLog), false);
  return {
    url: db.url,
    embedded: true,
    dataDir: join(dir, 'pg'),
    stop: async () => {
      await db.stop().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function withClient(url, fn) {
  const c = new pg.Client({ connectionString: url, types: pgTypes });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end().catch(() => undefined);
  }
}

export async function migrateDb(url, dist) {
  const { migrate } = await import(join(dist, 'db', 'migrate.js'));
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    return await migrate(pool);
  } finally {
    await pool.end();
  }
}

/** The postmaster's pid when the server runs on this machine (for CPU accounting), else null. */
export async function postmasterPid(url) {
  return withClient(url, async (c) => {
    const { rows } = await c.query('select pg_backend_pid() as pid');
    try {
      const stat = readFileSync(`/proc/${rows[0].pid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (comm !== 'postgres') return null;
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      return null;
    }
  });
}

export async function serverInfo(url) {
  return withClient(url, async (c) => {
    const v = await c.query('show server_version');
    const s = await c.query(
      `select name, setting, unit from pg_settings
       where name in ('shared_buffers','max_connections','synchronous_commit','fsync','wal_level','work_mem','effective_cache_size','max_wal_size','checkpoint_timeout','jit')`,
    );
    return {
      version: v.rows[0].server_version,
      settings: Object.fromEntries(s.rows.map((r) => [r.name, r.unit ? `${r.setting} ${r.unit}` : r.setting])),
    };
  });
}

/**
 * Seed every scenario's data. Sizes: { put, query, history, tasks }.
 * - bench/r-0..put-1: 8 versioned fields f1..f8 at version 1 (put, get)
 * - bench/hot-0..9: the same shape (hot)
 * - bench/task-0..tasks-1: empty records whose task field `job` is claimed (claim)
 * - bench/hist-0: f1 at version H with H history rows (history)
 * - benchq/q-0..query-1: `team` (1000 values) and `status` (4 values) (query)
 * Rows of these classes left by an earlier run on the same database are deleted first.
 */
export async function seed(url, sizes, say) {
  const t0 = performance.now();
  await withClient(url, async (c) => {
    await c.query(`delete from records where class in ($1, $2)`, [CLASS, QCLASS]);
    await c.query(`delete from history where class in ($1, $2)`, [CLASS, QCLASS]);
  });
  // Two chains on two connections (the bench class and the query class), side by side.
  const chain = (steps) =>
    withClient(url, async (c) => {
      await c.query(`set maintenance_work_mem = '256MB'`);
      // Rows are consistent by construction: skip the per-row foreign-key triggers while
      // seeding (needs a superuser, as the embedded server's postgres is; else just slower).
      await c.query(`set session_replication_role = replica`).catch(() => say('  seed: not a superuser; foreign-key checks stay on'));
      for (const [label, sql, params] of steps) {
        const t = performance.now();
        const r = await c.query(sql, params);
        say(`  seed: ${label} (${r.rowCount ?? 0} rows, ${((performance.now() - t) / 1000).toFixed(1)} s)`);
      }
    });
  await Promise.all([
    chain([
      [
        'bench records',
        `insert into records (class, rid, record_version)
         select $1, 'r-' || g, 8 from generate_series(0, $2 - 1) g
         union all select $1, 'hot-' || g, 8 from generate_series(0, $3 - 1) g
         union all select $1, 'task-' || g, 0 from generate_series(0, $4 - 1) g
         union all select $1, $5, $6`,
        [CLASS, sizes.put, HOT, sizes.tasks, HIST_RID, sizes.history],
      ],
      [
        'bench fields (8 per record)',
        `insert into fields (rid, record_id, class, name, kind, value, version, record_version, author, identity_strength, updated_at)
         select r.rid, r.id, $1, 'f' || k, 'versioned', json_build_object('n', 0, 'k', k, 'note', 'seeded value of field f' || k),
                1, k, 'apikey:seed', 'shared-secret', now()
         from records r cross join generate_series(1, 8) k
         where r.class = $1 and (r.rid like 'r-%' or r.rid like 'hot-%')
         order by r.id, k`,
        [CLASS],
      ],
      [
        'history of the seeded fields (the put that created each)',
        `insert into history (class, rid, field, op, version, record_version, value, author, identity_strength,
                              expected_version, outcome)
         select f.class, r.rid, f.name, 'put', 1, f.record_version, f.value, 'apikey:seed', 'shared-secret', 0, 'applied'
         from fields f join records r on r.id = f.record_id
         where f.class = $1
         order by r.id, f.record_version`,
        [CLASS],
      ],
      [
        'history record field',
        `insert into fields (rid, record_id, class, name, kind, value, version, record_version, author, identity_strength, updated_at)
         select r.rid, r.id, $1, 'f1', 'versioned', json_build_object('n', $3::int), $3::int, $3::int, 'apikey:seed', 'shared-secret', now()
         from records r where r.class = $1 and r.rid = $2`,
        [CLASS, HIST_RID, sizes.history],
      ],
      [
        'history rows of the history record',
        `insert into history (class, rid, field, op, version, record_version, value, author, identity_strength,
                              expected_version, outcome, created_at)
         select $1, $2, 'f1', 'put', g, g, json_build_object('n', g, 'note', 'seeded history row'), 'apikey:seed',
                'shared-secret', g - 1, 'applied', now() - make_interval(secs => $3::int - g)
         from generate_series(1, $3::int) g`,
        [CLASS, HIST_RID, sizes.history],
      ],
    ]),
    chain([
      [
        'query records',
        `insert into records (class, rid, record_version) select $1, 'q-' || g, 2 from generate_series(0, $2 - 1) g`,
        [QCLASS, sizes.query],
      ],
      [
        'query fields (team, status)',
        `insert into fields (rid, record_id, class, name, kind, value, version, record_version, author, identity_strength, updated_at)
         select r.rid, r.id, $1, n.name, 'versioned',
                case n.name when 'team' then to_json('team-' || (r.id % $2))
                            else to_json(($3::text[])[1 + (r.id % 4)]) end,
                1, n.k, 'apikey:seed', 'shared-secret', now()
         from records r cross join (values ('team', 1), ('status', 2)) as n(name, k)
         where r.class = $1
         order by r.id, n.k`,
        [QCLASS, TEAMS, STATUSES],
      ],
    ]),
  ]);
  const t = performance.now();
  await withClient(url, async (c) => {
    // Row sizes as the gateway records them on every write (migration 0003), so reads
    // measure the budgeted path of new data, not the fallback for rows written before it.
    await c.query(`update fields set bytes = coalesce(octet_length(value::text), 0) where bytes is null`);
    await c.query(`update history set bytes = coalesce(octet_length(value::text), 0) where bytes is null`);
    await c.query('vacuum analyze records');
    await c.query('vacuum analyze fields');
    await c.query('vacuum analyze history');
  });
  say(`  seed: row sizes, vacuum analyze (${((performance.now() - t) / 1000).toFixed(1)} s)`);
  return { seconds: (performance.now() - t0) / 1000 };
}

/**
 * Log the plan of every statement slower than `ms` (auto_explain, for sessions opened from
 * now on: the gateway's pool and the raw clients), so a plan that differs from the one
 * EXPLAIN shows afterwards is caught in the act.
 */
export async function enableAutoExplain(url, ms) {
  await withClient(url, async (c) => {
    await c.query(`load 'auto_explain'`);
    const { rows } = await c.query('select current_database() as db');
    const db = '"' + rows[0].db.replace(/"/g, '""') + '"';
    await c.query(`alter database ${db} set session_preload_libraries = 'auto_explain'`);
    await c.query(`alter database ${db} set auto_explain.log_min_duration = '${Number(ms)}ms'`);
  });
}

/** Group auto_explain log entries by statement: how many, and the first plan of each. */
export function summarizeAutoExplain(chunks) {
  const by = new Map();
  for (const chunk of chunks) {
    for (const entry of chunk.split(/(?=\S*\s*LOG:\s+duration:)/)) {
      const m = /duration: ([\d.]+) ms\s+plan:\s*Query Text:([\s\S]*)$/.exec(entry);
      if (!m) continue;
      const lines = m[2].split('\n');
      const at = lines.findIndex((l) => /\(cost=/.test(l));
      if (at < 0) continue;
      const key = lines.slice(0, at).join(' ').replace(/\s+/g, ' ').trim().slice(0, 120);
      const g = by.get(key) ?? { statement: key, count: 0, max_ms: 0, first_plan: lines.slice(at).map((l) => l.trim()).filter(Boolean) };
      g.count++;
      g.max_ms = Math.max(g.max_ms, Number(m[1]));
      by.set(key, g);
    }
  }
  return [...by.values()].sort((a, b) => b.count - a.count);
}

export async function checkpoint(url) {
  await withClient(url, (c) => c.query('checkpoint')).catch(() => undefined);
}

/**
 * The database a side bench (bench:transaction, bench:durability) runs on: a new database
 * `kslate_bench_<tag>_<8 hex>` on the server KSLATE_BENCH_DATABASE_URL names (dropped by
 * `stop`), or else an embedded server of its own (startDatabase).
 */
export async function benchDatabase({ dist, say, tag }) {
  const given = process.env.KSLATE_BENCH_DATABASE_URL;
  if (!given) return startDatabase({ dist, say });
  const name = `kslate_bench_${tag}_${randomUUID().slice(0, 8)}`;
  const admin = new pg.Client({ connectionString: given });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = new URL(given);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    stop: async () => {
      await admin.query(`drop database if exists ${name} with (force)`).catch(() => undefined);
      await admin.end();
    },
  };
}
