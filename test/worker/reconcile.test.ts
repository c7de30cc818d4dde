/**
 * The class reconciler against a real database (decisions §1): applying manifests, gone and
 * back, refused kind changes, duplicate names across namespaces, invalid sources, no-ops.
 */
import { afterAll, afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import type { ClassRow } from '../../db/port.js';
import { parseManifest } from '../../handlers/class-schema.js';
import type { ClassManifest, ClassSpec } from '../../handlers/types.js';
import { reconcileClasses, type ClassSource } from '../../worker/reconcile-classes.js';
import { freshDatabase, type TestDb } from '../setup/db.js';

const log = { debug() {}, info() {}, warn() {}, error() {} };

/** A manifest as the directory source hands it over: validated, defaults filled in. */
function manifest(name: string, namespace: string, spec: ClassSpec): ClassManifest {
  const parsed = parseManifest({ apiVersion: 'kslate.dev/v1', kind: 'SharedContext', metadata: { name, namespace }, spec });
  if (!parsed.ok) throw new Error(`test manifest invalid: ${parsed.problems.join('; ')}`);
  return parsed.manifest;
}

const baseSpec = (): ClassSpec => ({
  fields: {
    title: { kind: 'versioned', type: 'string' },
    notes: { kind: 'append', type: 'object' },
  },
  roles: { responder: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
});

const source = (manifests: ClassManifest[], problems: string[] = []): ClassSource => ({ manifests, problems });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let tdb: TestDb;
let db: PgDb;
const dbs: TestDb[] = [];
beforeEach(async () => {
  tdb = await freshDatabase();
  dbs.push(tdb);
  db = new PgDb(createPool({ connectionString: tdb.url, max: 4 }));
});
afterEach(async () => {
  await db.kysely.destroy();
});
afterAll(async () => {
  await Promise.all(dbs.map((d) => d.drop()));
});

async function rows(): Promise<Map<string, ClassRow>> {
  return new Map((await db.listClasses()).map((r) => [r.name, r]));
}
async function row(name: string): Promise<ClassRow> {
  const r = (await rows()).get(name);
  if (!r) throw new Error(`no class row ${name}`);
  return r;
}

async function putRecordViaSql(cls: string, rid: string) {
  const res = await db.pool.query<{ id: number }>(
    `insert into records (class, rid, record_version) values ($1, $2, 1) returning id`,
    [cls, rid],
  );
  await db.pool.query(
    `insert into fields (record_id, class, name, kind, value, version, record_version, author, updated_at)
     values ($1, $2, 'title', 'versioned', '"hello"', 1, 1, 'apikey:alice', now())`,
    [res.rows[0].id, cls],
  );
}

describe('reconcileClasses', () => {
  test('applies manifests into the classes table', async () => {
    const a = manifest('incident', 'team-a', baseSpec());
    const b = manifest('change', 'team-b', { ...baseSpec(), ttl: '72h' });
    const report = await reconcileClasses(db, source([a, b]), log);
    expect(report.applied.sort()).toEqual(['change', 'incident']);
    expect(report.refused).toEqual([]);
    expect(report.problems).toEqual([]);
    expect(report.markedGone).toBe(true);

    const all = await rows();
    expect([...all.keys()].sort()).toEqual(['change', 'incident']);
    const inc = all.get('incident')!;
    expect(inc.namespace).toBe('team-a');
    expect(inc.spec).toEqual(a.spec);
    expect(inc.gone).toBe(false);
    expect(inc.status).toBeNull();
    const ch = all.get('change')!;
    expect(ch.namespace).toBe('team-b');
    expect((ch.spec as ClassSpec).ttl).toBe('72h');
  });

  test('removing a manifest marks the class gone; its records stay; the same name brings it back', async () => {
    const a = manifest('incident', 'team-a', baseSpec());
    const b = manifest('other', 'team-a', baseSpec());
    await reconcileClasses(db, source([a, b]), log);
    await putRecordViaSql('incident', 'r1');

    const report = await reconcileClasses(db, source([b]), log);
    expect(report.markedGone).toBe(true);
    const gone = await row('incident');
    expect(gone.gone).toBe(true);
    expect(gone.spec).toEqual(a.spec); // the definition is kept for reads
    expect(gone.namespace).toBe('team-a');
    expect((await row('other')).gone).toBe(false);

    const recs = await db.pool.query(`select rid from records where class = 'incident'`);
    expect(recs.rows.map((r) => r.rid)).toEqual(['r1']);
    const rec = await db.readRecord('incident', 'r1', { fields: null, entriesLimit: null, entriesBeforeSeq: null, maxBytes: 1 << 24 });
    // A get's read hands values over as their stored JSON text (FieldRow.valueText).
    expect(rec?.fields.map((f) => [f.name, f.valueText === undefined ? f.value : JSON.parse(f.valueText)])).toEqual([['title', 'hello']]);

    // Still gone on the next reconcile without it; records still there.
    await reconcileClasses(db, source([b]), log);
    expect((await row('incident')).gone).toBe(true);

    const back = await reconcileClasses(db, source([a, b]), log);
    expect(back.applied).toContain('incident');
    const live = await row('incident');
    expect(live.gone).toBe(false);
    expect(live.status).toBeNull();
    expect(live.spec).toEqual(a.spec);
    expect((await db.pool.query(`select 1 from records where class = 'incident'`)).rowCount).toBe(1);
  });

  test('an empty, problem-free source marks every class gone', async () => {
    await reconcileClasses(db, source([manifest('incident', 'team-a', baseSpec())]), log);
    const report = await reconcileClasses(db, source([]), log);
    expect(report.markedGone).toBe(true);
    expect((await row('incident')).gone).toBe(true);
  });

  test("changing an existing field's kind is refused: old definition stays, report and row status say why", async () => {
    const a = manifest('incident', 'team-a', baseSpec());
    await reconcileClasses(db, source([a]), log);
    const before = await row('incident');

    const spec = baseSpec();
    spec.fields.title = { kind: 'append', type: 'string' };
    spec.fields.added = { kind: 'soft' }; // would apply on its own, but the manifest as a whole is refused
    const changed = manifest('incident', 'team-a', spec);
    const report = await reconcileClasses(db, source([changed]), log);

    expect(report.applied).not.toContain('incident');
    expect(report.refused).toHaveLength(1);
    expect(report.refused[0].name).toBe('incident');
    expect(report.refused[0].namespace).toBe('team-a');
    expect(report.refused[0].reason).toMatch(/kind/);
    expect(report.refused[0].reason).toContain('title');

    const after = await row('incident');
    expect(after.spec).toEqual(before.spec);
    expect((after.spec as ClassSpec).fields.title.kind).toBe('versioned');
    expect((after.spec as ClassSpec).fields).not.toHaveProperty('added');
    expect(after.gone).toBe(false); // refused, not removed
    expect(after.namespace).toBe('team-a');
    const status = JSON.stringify(after.status);
    expect(after.status).not.toBeNull();
    expect(status).toMatch(/kind/);
    expect(status).toContain('title');

    // A manifest without the kind change applies again and clears the status.
    const fixedSpec = baseSpec();
    fixedSpec.fields.added = { kind: 'soft' };
    const fixed = manifest('incident', 'team-a', fixedSpec);
    const r2 = await reconcileClasses(db, source([fixed]), log);
    expect(r2.refused).toEqual([]);
    const ok = await row('incident');
    expect(ok.spec).toEqual(fixed.spec);
    expect(ok.status).toBeNull();
  });

  test('a refused kind change on one class does not hold back the others', async () => {
    await reconcileClasses(db, source([manifest('incident', 'team-a', baseSpec()), manifest('other', 'team-a', baseSpec())]), log);
    const spec = baseSpec();
    spec.fields.notes = { kind: 'versioned' };
    const otherSpec = baseSpec();
    otherSpec.fields.more = { kind: 'soft' };
    const report = await reconcileClasses(db, source([manifest('incident', 'team-a', spec), manifest('other', 'team-a', otherSpec)]), log);
    expect(report.refused.map((r) => r.name)).toEqual(['incident']);
    expect(report.applied).toEqual(['other']);
    expect((await row('other')).spec).toEqual(manifest('other', 'team-a', otherSpec).spec);
    expect(((await row('incident')).spec as ClassSpec).fields.notes.kind).toBe('append');
  });

  test('adding a field or changing a type applies', async () => {
    await reconcileClasses(db, source([manifest('incident', 'team-a', baseSpec())]), log);
    const spec = baseSpec();
    spec.fields.title = { kind: 'versioned', type: 'any' };
    spec.fields.notes = { kind: 'append', type: 'string', requireEvidence: true };
    spec.fields.severity = { kind: 'versioned', type: 'integer' };
    const m = manifest('incident', 'team-a', spec);
    const report = await reconcileClasses(db, source([m]), log);
    expect(report.applied).toEqual(['incident']);
    expect(report.refused).toEqual([]);
    const r = await row('incident');
    expect(r.spec).toEqual(m.spec);
    expect(r.status).toBeNull();
    expect(r.gone).toBe(false);
  });

  test('duplicate name across namespaces: the namespace already holding the class wins, the other is refused as Duplicate', async () => {
    const held = manifest('shared', 'team-a', baseSpec());
    await reconcileClasses(db, source([held]), log);
    const before = await row('shared');
    await sleep(20);

    const intruderSpec = baseSpec();
    intruderSpec.fields.extra = { kind: 'soft' };
    const intruder = manifest('shared', 'team-b', intruderSpec);
    // The intruder comes first: holding the class beats order.
    const report = await reconcileClasses(db, source([intruder, held]), log);
    expect(report.refused).toHaveLength(1);
    expect(report.refused[0]).toMatchObject({ name: 'shared', namespace: 'team-b' });
    expect(report.refused[0].reason).toMatch(/Duplicate/);

    const after = await row('shared');
    expect(after.namespace).toBe('team-a');
    expect(after.spec).toEqual(held.spec);
    expect(after.status).toBeNull();
    expect(after.gone).toBe(false);
    expect(after.updated_at.getTime()).toBe(before.updated_at.getTime());
  });

  test('duplicate name across namespaces with no holder: the first manifest wins', async () => {
    const first = manifest('fresh', 'team-x', baseSpec());
    const secondSpec = baseSpec();
    secondSpec.fields.other = { kind: 'soft' };
    const second = manifest('fresh', 'team-y', secondSpec);
    const report = await reconcileClasses(db, source([first, second]), log);
    expect(report.applied).toEqual(['fresh']);
    expect(report.refused).toHaveLength(1);
    expect(report.refused[0]).toMatchObject({ name: 'fresh', namespace: 'team-y' });
    expect(report.refused[0].reason).toMatch(/Duplicate/);
    const r = await row('fresh');
    expect(r.namespace).toBe('team-x');
    expect(r.spec).toEqual(first.spec);
    expect(r.status).toBeNull();

    // Order flipped on the next run: team-x holds it now, so team-x still wins.
    const again = await reconcileClasses(db, source([second, first]), log);
    expect(again.refused.map((x) => x.namespace)).toEqual(['team-y']);
    expect((await row('fresh')).namespace).toBe('team-x');
  });

  test('a cluster source names its invalid objects: only those keep their previous definition, the rest is reconciled (removed ones gone)', async () => {
    const a = manifest('incident', 'team-a', baseSpec());
    const b = manifest('other', 'team-a', baseSpec());
    const c = manifest('third', 'team-b', baseSpec());
    await reconcileClasses(db, source([a, b, c]), log);

    // incident became invalid, other was deleted, third is unchanged.
    const report = await reconcileClasses(
      db,
      {
        manifests: [c],
        problems: ['team-a/incident: spec.fields: must define at least one field'],
        invalid: [{ name: 'incident', namespace: 'team-a', reason: 'invalid manifest: spec.fields: must define at least one field' }],
      },
      log,
    );
    expect(report.markedGone).toBe(true);
    expect((await row('incident')).gone).toBe(false);
    expect((await row('incident')).spec).toEqual(a.spec);
    expect((await row('incident')).status).toEqual({ refused: 'invalid manifest: spec.fields: must define at least one field' });
    expect((await row('other')).gone).toBe(true);
    expect((await row('third')).gone).toBe(false);

    // An invalid object in another namespace does not protect a class held elsewhere.
    const r2 = await reconcileClasses(
      db,
      { manifests: [], problems: ['x'], invalid: [{ name: 'third', namespace: 'team-z', reason: 'invalid manifest: x' }] },
      log,
    );
    expect(r2.markedGone).toBe(true);
    expect((await row('third')).gone).toBe(true);
  });

  test('a source with problems marks nothing gone that run but still applies the valid manifests', async () => {
    const a = manifest('incident', 'team-a', baseSpec());
    const b = manifest('other', 'team-a', baseSpec());
    await reconcileClasses(db, source([a, b]), log);

    const spec = baseSpec();
    spec.fields.added = { kind: 'soft' };
    const a2 = manifest('incident', 'team-a', spec);
    const problems = ['classes.yaml#2: spec.fields: must define at least one field'];
    const report = await reconcileClasses(db, source([a2], problems), log);
    expect(report.markedGone).toBe(false);
    expect(report.problems).toEqual(problems);
    expect(report.applied).toEqual(['incident']);
    expect((await row('other')).gone).toBe(false);
    expect((await row('incident')).spec).toEqual(a2.spec);

    // A brand-new valid manifest also applies while problems exist.
    const c = manifest('newcomer', 'team-c', baseSpec());
    await reconcileClasses(db, source([a2, c], problems), log);
    expect((await row('newcomer')).gone).toBe(false);
    expect((await row('other')).gone).toBe(false);

    // Once the source is clean, the missing class is marked gone.
    const clean = await reconcileClasses(db, source([a2, c]), log);
    expect(clean.markedGone).toBe(true);
    expect((await row('other')).gone).toBe(true);
  });

  test('a second reconcile with identical manifests is a no-op (updated_at unchanged)', async () => {
    const a = manifest('incident', 'team-a', baseSpec());
    const b = manifest('other', 'team-b', { ...baseSpec(), ttl: '1h30m', checkpoint: { sections: ['summary'] } });
    await reconcileClasses(db, source([a, b]), log);
    const first = await rows();
    await sleep(30);
    // Fresh objects of the same content, as a re-read of the directory would give.
    await reconcileClasses(db, source([manifest('incident', 'team-a', baseSpec()), manifest('other', 'team-b', { ...baseSpec(), ttl: '1h30m', checkpoint: { sections: ['summary'] } })]), log);
    const second = await rows();
    for (const name of ['incident', 'other']) {
      expect(second.get(name)!.updated_at.getTime()).toBe(first.get(name)!.updated_at.getTime());
      expect(second.get(name)!.spec).toEqual(first.get(name)!.spec);
    }

    // A real change does bump it.
    await sleep(30);
    const spec = baseSpec();
    spec.fields.added = { kind: 'soft' };
    await reconcileClasses(db, source([manifest('incident', 'team-a', spec), b]), log);
    const third = await rows();
    expect(third.get('incident')!.updated_at.getTime()).toBeGreaterThan(second.get('incident')!.updated_at.getTime());
    expect(third.get('other')!.updated_at.getTime()).toBe(second.get('other')!.updated_at.getTime());
  });

  test('repeating a removal or a refused kind change is a no-op too', async () => {
    const a = manifest('incident', 'team-a', baseSpec());
    const b = manifest('other', 'team-a', baseSpec());
    await reconcileClasses(db, source([a, b]), log);
    const spec = baseSpec();
    spec.fields.title = { kind: 'soft' };
    const refused = manifest('incident', 'team-a', spec);
    await reconcileClasses(db, source([refused]), log); // incident refused, other gone
    const first = await rows();
    await sleep(30);
    await reconcileClasses(db, source([refused]), log);
    const second = await rows();
    for (const name of ['incident', 'other']) {
      expect(second.get(name)!.updated_at.getTime()).toBe(first.get(name)!.updated_at.getTime());
      expect(second.get(name)!.status).toEqual(first.get(name)!.status);
      expect(second.get(name)!.gone).toBe(first.get(name)!.gone);
    }
    expect(second.get('other')!.gone).toBe(true);
    expect(second.get('incident')!.gone).toBe(false);
  });

  test('logs one line per change naming the class (applied, changed, gone, refused, back), and nothing on a sweep that changes nothing', async () => {
    const lines: { level: string; msg: string; data?: Record<string, unknown> }[] = [];
    const capture = {
      debug() {},
      info: (msg: string, data?: Record<string, unknown>) => lines.push({ level: 'info', msg, data }),
      warn: (msg: string, data?: Record<string, unknown>) => lines.push({ level: 'warn', msg, data }),
      error: (msg: string, data?: Record<string, unknown>) => lines.push({ level: 'error', msg, data }),
    };
    const take = () => lines.splice(0).map((l) => `${l.level} ${l.msg}`);
    const a = manifest('incident', 'team-a', baseSpec());
    const b = manifest('other', 'team-b', baseSpec());

    await reconcileClasses(db, source([a, b]), capture);
    expect(take()).toEqual(['info class team-a/incident applied (new)', 'info class team-b/other applied (new)']);
    expect(lines).toEqual([]);
    await reconcileClasses(db, source([a, b]), capture);
    expect(take()).toEqual([]);

    const spec = baseSpec();
    spec.fields.added = { kind: 'soft' };
    const a2 = manifest('incident', 'team-a', spec);
    await reconcileClasses(db, source([a2, b]), capture);
    expect(take()).toEqual(['info class team-a/incident applied (changed)']);

    await reconcileClasses(db, source([a2]), capture);
    expect(take()).toEqual(['info class team-b/other marked gone: its manifest was removed (its records stay readable)']);
    await reconcileClasses(db, source([a2]), capture);
    expect(take()).toEqual([]);

    const kind = baseSpec();
    kind.fields.title = { kind: 'append', type: 'string' };
    const refused = manifest('incident', 'team-a', kind);
    await reconcileClasses(db, source([refused]), capture);
    const warned = take();
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatch(/^warn class team-a\/incident refused: changing the kind of existing field\(s\) title/);
    await reconcileClasses(db, source([refused]), capture);
    expect(take()).toEqual([]);

    await reconcileClasses(db, source([a2, b]), capture);
    expect(take()).toEqual(['info class team-a/incident applied (no longer refused)', 'info class team-b/other applied (back from gone)']);
  });
});
