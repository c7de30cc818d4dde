/**
 * The sweep under its lease row (decisions §5, migration 0004): a second concurrent sweep is a
 * no-op, so a cron schedule or several in-process sweepers can never double-run.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { parseManifest } from '../../handlers/class-schema.js';
import type { ClassManifest } from '../../handlers/types.js';
import type { ClassSource } from '../../worker/reconcile-classes.js';
import { sweep, SWEEP_LEASE, type SweepDeps } from '../../worker/sweep.js';
import { freshDatabase, type TestDb } from '../setup/db.js';

const log = { debug() {}, info() {}, warn() {}, error() {} };

function manifest(name: string): ClassManifest {
  const parsed = parseManifest({
    apiVersion: 'kslate.dev/v1',
    kind: 'SharedContext',
    metadata: { name, namespace: 'team-a' },
    spec: { fields: { title: { kind: 'versioned' } }, roles: { r: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } } },
  });
  if (!parsed.ok) throw new Error(parsed.problems.join('; '));
  return parsed.manifest;
}

let tdb: TestDb;
let db: PgDb;
beforeAll(async () => {
  tdb = await freshDatabase();
  db = new PgDb(createPool({ connectionString: tdb.url, max: 6 }));
});
afterAll(async () => {
  await db?.kysely.destroy();
  await tdb?.drop();
});

function deps(classSource?: () => Promise<ClassSource>, onClassesChanged?: () => void): SweepDeps {
  return { db, log, classSource, onClassesChanged, holder: `test/${Math.random().toString(36).slice(2)}` };
}

test('the sweep lease row is the documented one', () => {
  expect(SWEEP_LEASE).toBe('sweep');
});

test('a sweep runs, reconciles its class source and tells the registry', async () => {
  let changed = 0;
  const report = await sweep(deps(async () => ({ manifests: [manifest('alpha')], problems: [] }), () => changed++));
  expect(report.ran).toBe(true);
  expect(report.ok).toBe(true);
  expect(report.classes?.applied).toEqual(['alpha']);
  expect(changed).toBe(1);
  expect((await db.listClasses()).map((c) => c.name)).toContain('alpha');
  // The lease is given back when the sweep ends.
  const c = new pg.Client({ connectionString: tdb.url });
  await c.connect();
  expect((await c.query('select * from sweep_lease')).rows).toEqual([]);
  await c.end();
});

test('while another holder has an unexpired lease the sweep is a no-op; an expired lease is taken over', async () => {
  const c = new pg.Client({ connectionString: tdb.url });
  await c.connect();
  try {
    await c.query(`insert into sweep_lease (name, holder, expires_at) values ('sweep', 'other/1', now() + interval '1 minute')`);
    let calls = 0;
    const src = async () => {
      calls++;
      return { manifests: [manifest('beta')], problems: [] };
    };
    const blocked = await sweep(deps(src));
    expect(blocked).toMatchObject({ ran: false, ok: true });
    expect(calls).toBe(0);
    expect((await db.listClasses()).map((c) => c.name)).not.toContain('beta');
    // The holder's lease is left alone.
    expect((await c.query('select holder from sweep_lease')).rows).toEqual([{ holder: 'other/1' }]);

    // A sweeper that died leaves a lease that runs out; the next sweep takes it.
    await c.query(`update sweep_lease set expires_at = now() - interval '1 second'`);
    const ran = await sweep(deps(src));
    expect(ran.ran).toBe(true);
    expect(calls).toBe(1);
    expect((await db.listClasses()).map((c) => c.name)).toContain('beta');
    expect((await c.query('select * from sweep_lease')).rows).toEqual([]);
  } finally {
    await c.query(`delete from sweep_lease`);
    await c.end();
  }
});

test('two concurrent sweeps: at most one runs', async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let entered!: () => void;
  const inside = new Promise<void>((r) => (entered = r));
  let calls = 0;
  const slow = async (): Promise<ClassSource> => {
    calls++;
    entered();
    await gate;
    return { manifests: [manifest('alpha'), manifest('beta')], problems: [] };
  };
  const first = sweep(deps(slow));
  await inside;
  const second = await sweep(deps(slow));
  expect(second).toMatchObject({ ran: false });
  release();
  expect((await first).ran).toBe(true);
  expect(calls).toBe(1);

  // Started together: never two at once (the lease is free before and after).
  let n = 0;
  let active = 0;
  let most = 0;
  const counted = async (): Promise<ClassSource> => {
    n++;
    active++;
    most = Math.max(most, active);
    await new Promise((r) => setTimeout(r, 100));
    active--;
    return { manifests: [manifest('alpha'), manifest('beta')], problems: [] };
  };
  const results = await Promise.all([sweep(deps(counted)), sweep(deps(counted)), sweep(deps(counted))]);
  expect(most).toBe(1);
  expect(results.filter((r) => r.ran).length).toBe(n);
  expect(n).toBeGreaterThanOrEqual(1);
  expect(results.some((r) => !r.ran)).toBe(true);
});

test('a failing step is reported, the later steps still run, and the lease is released', async () => {
  const failed = await sweep(
    deps(async () => {
      throw new Error('source broke');
    }),
  );
  expect(failed.ran).toBe(true);
  expect(failed.ok).toBe(false);
  expect(failed.errors).toEqual([{ step: 'classes', message: 'source broke' }]);
  expect(failed.gauges).toBeDefined();
  expect(failed.prunedReads).toBeDefined();
  const next = await sweep(deps(async () => ({ manifests: [manifest('alpha'), manifest('beta')], problems: [] })));
  expect(next.ran).toBe(true);
  expect(next.ok).toBe(true);
});

test('a refused manifest does not fail the sweep: the others apply, it is counted, and logged once per change', async () => {
  const lines: string[] = [];
  const capture = {
    debug() {},
    info() {},
    warn: (m: string) => lines.push(`warn ${m}`),
    error: (m: string) => lines.push(`error ${m}`),
  };
  let problems = ['bad.yaml: spec.fields: must define at least one field'];
  const d = { ...deps(async () => ({ manifests: [manifest('gamma')], problems })), log: capture };
  const first = await sweep(d);
  expect(first.errors).toEqual([]);
  expect(first.ok).toBe(true);
  expect(first.classes).toMatchObject({ applied: ['gamma'], refusedCount: 1 });
  expect(lines.filter((l) => l.includes('bad.yaml'))).toEqual(['warn class manifest refused: bad.yaml: spec.fields: must define at least one field']);
  expect(lines.some((l) => l.startsWith('error'))).toBe(false);

  // The same refusal next sweep: still counted, not logged again.
  lines.length = 0;
  const second = await sweep(d);
  expect(second.ok).toBe(true);
  expect(second.classes?.refusedCount).toBe(1);
  expect(lines).toEqual([]);

  // A change is logged once more; fixed, the count is 0.
  problems = ['bad.yaml: metadata.name: must be a DNS label'];
  await sweep(d);
  expect(lines).toEqual(['warn class manifest refused: bad.yaml: metadata.name: must be a DNS label']);
  problems = [];
  expect((await sweep(d)).classes?.refusedCount).toBe(0);
});

test('an aborted sweep stops before its next step and releases the lease', async () => {
  const ac = new AbortController();
  const report = await sweep({
    ...deps(async () => {
      ac.abort();
      return { manifests: [manifest('alpha'), manifest('beta')], problems: [] };
    }),
    signal: ac.signal,
  });
  expect(report.ran).toBe(true);
  expect(report.aborted).toBe(true);
  expect(report.classes).toBeDefined();
  expect(report.expired).toBeUndefined();
  expect(report.gauges).toBeUndefined();
  const again = await sweep(deps());
  expect(again.ran).toBe(true);
});

test('steps: a reconcile-only sweep (a gateway at start) expires nothing and computes no gauges', async () => {
  const report = await sweep(deps(async () => ({ manifests: [manifest('alpha'), manifest('beta')], problems: [] })), { steps: ['classes'] });
  expect(report.ran).toBe(true);
  expect(report.classes?.applied).toEqual(['alpha', 'beta']);
  expect(report.expired).toBeUndefined();
  expect(report.leases).toBeUndefined();
  expect(report.gauges).toBeUndefined();
});
