/**
 * `kslate worker` and `kslate sweep` as a user runs them (real child processes of the built
 * CLI, a real PostgreSQL): health and metrics endpoints, the gauges on /metrics, SIGTERM
 * releasing the lease, `kslate sweep` exit codes, and the lease held across two processes.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, openSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { cleanEnv, ensureBuilt, getJson, kslate, logLines, start, stop, children } from '../setup/cli.js';
import { manifestsYaml, type ClassInput } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';

const notes: ClassInput = {
  name: 'notes',
  namespace: 'team-n',
  spec: {
    ttl: '1h',
    fields: { title: { kind: 'versioned' }, job: { kind: 'task' } },
    roles: { writers: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
  },
};

let work: string;
let classesDir: string;
const dbs: TestDb[] = [];
const db = async () => {
  const d = await freshDatabase();
  dbs.push(d);
  return d;
};
async function query<T = any>(url: string, text: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text, params)).rows as T[];
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  await ensureBuilt();
  work = mkdtempSync(join(tmpdir(), 'kslate-worker-'));
  classesDir = join(work, 'classes');
  mkdirSync(classesDir);
  writeFileSync(join(classesDir, 'notes.yaml'), manifestsYaml([notes]));
}, 180_000);
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const d of dbs) await d.drop();
  rmSync(work, { recursive: true, force: true });
});

/** Records of `notes`: `live` fresh ones, `old` past the 1h ttl, and one lapsed lease. */
async function seed(url: string, live: number, old: number) {
  await query(url, `insert into classes (name, namespace, spec) values ('notes', 'team-n', $1::json) on conflict do nothing`, [
    JSON.stringify({ ...notes.spec, roles: notes.spec.roles }),
  ]);
  await query(
    url,
    `with r as (insert into records (class, rid, record_version, last_write_at)
                select 'notes', 'n' || g, 1, case when g <= $2::int then now() - interval '2 hours' else now() end
                from generate_series(1, $1::int + $2::int) g returning id, rid)
     insert into fields (record_id, class, name, kind, value, version, record_version, author, updated_at, owner, lease_expires_at)
     select id, 'notes', 'job', 'task', null, 1, 1, 'apikey:alice', now(), 'apikey:alice',
            case when rid = 'n' || ($1::int + $2::int) then now() - interval '1 minute' else now() + interval '1 hour' end from r`,
    [live, old],
  );
  await query(
    url,
    `insert into history (class, rid, field, op, version, record_version, author, outcome)
     select 'notes', 'n' || g, 'job', 'claim', 1, 1, 'apikey:alice', 'applied' from generate_series(1, $1) g`,
    [live + old],
  );
}

function metricValue(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

describe('kslate worker', { timeout: 120_000 }, () => {
  test('serves /healthz, /readyz and the worker metrics computed by its sweep; SIGTERM releases the lease and exits 0', async () => {
    const d = await db();
    // The schema first (the gateway's job), then data for the gauges.
    expect((await kslate(['migrate', '--database-url', d.url])).code).toBe(0);
    await seed(d.url, 5, 3);
    const [healthPort, metricsPort] = [await freePort(), await freePort()];
    const w = await start(
      ['worker', '--database-url', d.url, '--classes', classesDir, '--health-port', String(healthPort), '--metrics-port', String(metricsPort), '--sweep-interval', '1h'],
      cleanEnv(),
      { ready: /sweep done/ },
    );
    const base = `http://127.0.0.1:${healthPort}`;
    expect((await getJson(`${base}/healthz`)).status).toBe(200);
    const ready = await getJson(`${base}/readyz`);
    expect(ready.status, JSON.stringify(ready.body)).toBe(200);
    const m = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(m.status).toBe(200);
    const text = await m.text();
    // 3 expired at the first sweep, 5 left; 8 history rows of which the 3 expired ones are purged.
    expect(metricValue(text, 'svc_records', 'class="notes"')).toBe(5);
    expect(metricValue(text, 'svc_history_rows', 'class="notes"')).toBe(5);
    expect(metricValue(text, 'svc_leases_lapsed')).toBe(1);
    expect(metricValue(text, 'svc_role_wrote_nothing', 'class="notes",role="writers"')).toBe(0);
    expect(metricValue(text, 'svc_sweeps_total', 'outcome="ok"')).toBe(1);
    expect(metricValue(text, 'svc_records_expired_total')).toBe(3);
    expect(metricValue(text, 'svc_sweep_duration_seconds')).toBeGreaterThan(0);
    expect(metricValue(text, 'svc_sweep_last_success_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000 - 120);
    // One log line per sweep says what each step did.
    const line = logLines(w.stdout()).find((l) => /^sweep done/.test(l.msg));
    expect(line?.msg).toMatch(/classes 1 applied, 0 refused; expired 3 records \(purged 3 history rows, 0 entries\); leases 1 newly lapsed/);
    expect(line).toMatchObject({ records_expired: 3, leases_flagged: 1 });

    await stop(w.child);
    const { code } = await w.exited;
    expect(code).toBe(0);
    expect(w.stdout()).toMatch(/sweep lease released/);
    expect(await query(d.url, 'select * from sweep_lease')).toEqual([]);
  });

  test('a refused SharedContext: every sweep still succeeds (last success set), svc_classes_refused counts it, the warning is logged once', async () => {
    const d = await db();
    const dir = join(work, 'refused-loop');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'notes.yaml'), manifestsYaml([notes]));
    writeFileSync(join(dir, 'bad.yaml'), 'apiVersion: kslate.dev/v1\nkind: SharedContext\nmetadata: {name: Bad}\nspec: {}\n');
    const metricsPort = await freePort();
    const w = await start(
      ['worker', '--database-url', d.url, '--classes', dir, '--health-port', '0', '--metrics-port', String(metricsPort), '--sweep-interval', '1s'],
      cleanEnv(),
      { ready: /sweep done[\s\S]*sweep done/ },
    );
    try {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      expect(metricValue(text, 'svc_sweeps_total', 'outcome="failed"')).toBe(0);
      expect(metricValue(text, 'svc_sweeps_total', 'outcome="ok"')).toBeGreaterThanOrEqual(2);
      expect(metricValue(text, 'svc_sweep_last_success_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000 - 120);
      expect(metricValue(text, 'svc_classes_refused')).toBe(1);
      const logs = logLines(w.stdout());
      expect(logs.filter((l) => /^sweep done/.test(l.msg)).length).toBeGreaterThanOrEqual(2);
      // One line per problem of the file, each once although every sweep refuses it again.
      const refusals = logs.filter((l) => l.msg.includes('bad.yaml')).map((l) => l.msg);
      expect(refusals.length).toBeGreaterThan(0);
      expect(new Set(refusals).size).toBe(refusals.length);
      expect(logs.filter((l) => l.level === 'error' || /failed/.test(l.msg))).toEqual([]);
    } finally {
      await stop(w.child);
    }
  });

  test('/readyz is 503 while the database is unreachable, with a message saying what to do; /healthz stays 200', async () => {
    const healthPort = await freePort();
    // A database URL that does not answer: schema cannot be there.
    const w = await start(
      ['worker', '--database-url', 'postgres://nobody@127.0.0.1:1/none', '--health-port', String(healthPort), '--metrics-port', '0', '--sweep-interval', '1h'],
      cleanEnv(),
      { ready: /kslate worker sweeping/ },
    );
    const r = await getJson(`http://127.0.0.1:${healthPort}/readyz`);
    expect(r.status).toBe(503);
    expect(r.body).toMatchObject({ error: 'UNAVAILABLE' });
    expect(r.body.message).toMatch(/unreachable|schema/);
    expect((await getJson(`http://127.0.0.1:${healthPort}/healthz`)).status).toBe(200);
    await stop(w.child);
    expect((await w.exited).code).toBe(0);
  });

  test('SIGTERM during a sweep: the sweep is stopped (abandoned after --drain-timeout when stuck), the lease released, exit 0', async () => {
    const d = await db();
    expect((await kslate(['migrate', '--database-url', d.url])).code).toBe(0);
    // Another session holds the class table: the class step's first statement waits for it.
    const blocker = new pg.Client({ connectionString: d.url });
    await blocker.connect();
    await blocker.query('begin');
    await blocker.query('lock table classes in access exclusive mode');
    const w = await start(
      ['worker', '--database-url', d.url, '--classes', classesDir, '--health-port', '0', '--metrics-port', '0', '--drain-timeout', '1s'],
      cleanEnv(),
      { ready: /kslate worker sweeping/ },
    );
    for (let i = 0; (await query(d.url, 'select holder from sweep_lease')).length === 0; i++) {
      if (i > 200) throw new Error('the sweep never took the lease');
      await new Promise((r) => setTimeout(r, 50));
    }
    const t0 = Date.now();
    w.child.kill('SIGTERM');
    const { code } = await w.exited;
    expect(code).toBe(0);
    expect(Date.now() - t0).toBeLessThan(4_000);
    expect(w.stdout()).toMatch(/did not stop within 1s/);
    expect(await query(d.url, 'select * from sweep_lease')).toEqual([]);
    await blocker.query('rollback');
    await blocker.end();
  });

  test('a health port in use is one clear line and exit 1', async () => {
    const d = await db();
    const srv = (await import('node:net')).createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const port = (srv.address() as import('node:net').AddressInfo).port;
    try {
      const r = await kslate(['worker', '--database-url', d.url, '--health-port', String(port), '--metrics-port', '0']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`port ${port} is already in use \\(worker health port: --health-port`));
    } finally {
      srv.close();
    }
  });
});

describe('kslate sweep', { timeout: 120_000 }, () => {
  test('exit 0 when every step succeeded, and it expires records like the worker', async () => {
    const d = await db();
    expect((await kslate(['migrate', '--database-url', d.url])).code).toBe(0);
    await seed(d.url, 2, 4);
    const r = await kslate(['sweep', '--database-url', d.url, '--classes', classesDir]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('records expired: 4');
    expect(await query(d.url, `select count(*)::int as n from records`)).toEqual([{ n: 2 }]);
  });

  test('a refused manifest is printed and the others reconciled, exit 0; a step that fails (an unreadable directory) is exit 1', async () => {
    const d = await db();
    const bad = join(work, 'bad');
    mkdirSync(bad, { recursive: true });
    writeFileSync(join(bad, 'bad.yaml'), 'apiVersion: kslate.dev/v1\nkind: SharedContext\nmetadata: {name: Bad}\nspec: {}\n');
    writeFileSync(join(bad, 'notes.yaml'), manifestsYaml([notes]));
    const refused = await kslate(['sweep', '--database-url', d.url, '--classes', bad]);
    expect(refused.code, refused.stdout + refused.stderr).toBe(0);
    expect(refused.stdout).toMatch(/manifest refused: .*bad\.yaml/);
    expect(refused.stdout).toContain('classes reconciled: notes');
    const missing = await kslate(['sweep', '--database-url', d.url, '--classes', join(work, 'no-such-dir')]);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(/step classes failed: .*no-such-dir: cannot read the classes directory .*--classes/);
  });

  test('two processes at once: while one holds the sweep lease the other does nothing and exits 0', async () => {
    const d = await db();
    expect((await kslate(['migrate', '--database-url', d.url])).code).toBe(0);
    // The first sweep blocks reading a FIFO in its classes directory while it holds the lease.
    const slow = join(work, 'slow');
    mkdirSync(slow, { recursive: true });
    writeFileSync(join(slow, 'notes.yaml'), manifestsYaml([notes]));
    const fifo = join(slow, 'zz-wait.yaml');
    execFileSync('mkfifo', [fifo]);
    const first = kslate(['sweep', '--database-url', d.url, '--classes', slow, '--log-level', 'debug']);
    // Wait until it holds the lease.
    for (let i = 0; ; i++) {
      const rows = await query(d.url, 'select holder from sweep_lease');
      if (rows.length === 1) break;
      if (i > 200) throw new Error('the first sweep never took the lease');
      await new Promise((r) => setTimeout(r, 50));
    }
    const second = await kslate(['sweep', '--database-url', d.url, '--classes', classesDir]);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain('another sweep is running; nothing done');
    expect(await query(d.url, `select name from classes`)).toEqual([]); // the second did nothing
    // Let the first finish.
    const fd = openSync(fifo, 'w');
    writeSync(fd, '# nothing\n');
    closeSync(fd);
    const r1 = await first;
    expect(r1.code, r1.stdout + r1.stderr).toBe(0);
    expect(await query(d.url, `select name from classes`)).toEqual([{ name: 'notes' }]);
    expect(await query(d.url, 'select * from sweep_lease')).toEqual([]);
  });
});
