/**
 * The sweep under its Postgres advisory lock (decisions §5): a second concurrent sweep is a
 * no-op, so a cron schedule or several in-process sweepers can never double-run.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { parseManifest } from '../../handlers/class-schema.js';
import type { ClassManifest } from '../../handlers/types.js';
import type { ClassSource } from '../../worker/reconcile-classes.js';
import { sweep, SWEEP_LOCK, type SweepDeps } from '../../worker/sweep.js';
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
  return { db, log, classSource, onClassesChanged, withLock: (k, fn) => db.withLock(k, fn) };
}

test('the sweep lock key is the documented one', () => {
  expect(SWEEP_LOCK).toBe(7283641002);
});

test('a sweep runs, reconciles its class source and tells the registry', async () => {
  let changed = 0;
  const report = await sweep(deps(async () => ({ manifests: [manifest('alpha')], problems: [] }), () => changed++));
  expect(report.ran).toBe(true);
  expect(report.classes?.applied).toEqual(['alpha']);
  expect(changed).toBe(1);
  expect((await db.listClasses()).map((c) => c.name)).toContain('alpha');
});

test('while another session holds the advisory lock the sweep is a no-op; after release it runs', async () => {
  const holder = new pg.Client({ connectionString: tdb.url });
  await holder.connect();
  try {
    await holder.query('select pg_advisory_lock(7283641002)');
    let calls = 0;
    const src = async () => {
      calls++;
      return { manifests: [manifest('beta')], problems: [] };
    };
    const blocked = await sweep(deps(src));
    expect(blocked).toEqual({ ran: false });
    expect(calls).toBe(0);
    expect((await db.listClasses()).map((c) => c.name)).not.toContain('beta');

    await holder.query('select pg_advisory_unlock(7283641002)');
    const ran = await sweep(deps(src));
    expect(ran.ran).toBe(true);
    expect(calls).toBe(1);
    expect((await db.listClasses()).map((c) => c.name)).toContain('beta');
  } finally {
    await holder.end();
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
  expect(second).toEqual({ ran: false });
  release();
  expect((await first).ran).toBe(true);
  expect(calls).toBe(1);

  // Started together: never two at once (the lock is free before and after).
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

test('a failing sweep releases the lock for the next one', async () => {
  await expect(
    sweep(
      deps(async () => {
        throw new Error('source broke');
      }),
    ),
  ).rejects.toThrow('source broke');
  const next = await sweep(deps(async () => ({ manifests: [manifest('alpha'), manifest('beta')], problems: [] })));
  expect(next.ran).toBe(true);
});
