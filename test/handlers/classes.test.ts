/**
 * The classes and class endpoints over HTTP (interface.md "Class", "classes", "class",
 * Errors; decisions §1), including the class lifecycle as a gateway sees it after its own
 * sweep: gone, back again, changed.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { audited, fortress, incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';

// An identity whose name extends another's, to check that subjects match exactly. This file
// runs in its own worker, so adding to the shared key table here affects no other file.
KEYS.alice2 = 'alice2-test-key';

const owned = (name: string, extra: Partial<ClassInput['spec']> = {}, subjects = ['apikey:alice']): ClassInput => ({
  name,
  spec: {
    fields: { x: { kind: 'versioned', type: 'integer' } },
    roles: { maintainer: { subjects, read: ['*'], write: ['*'] } },
    ...extra,
  },
});

const alpha: ClassInput = { ...owned('alpha', { ttl: '720h' }), namespace: 'team-b' };
const zeta = owned('zeta');
const alphaDash = owned('alpha-2');
const alphaDigit = owned('alpha2');
const hidden = owned('hidden', {}, ['apikey:bob']);
/** Service-account subjects only: never an apikey author, whatever the namespace is called. */
const k8sOnly = owned('k8s-only', {}, ['k8s-sa:team-a/*', 'k8s-sa:apikey/*', 'k8s-sa:default/alice']);
const exact = owned('exact', {}, ['apikey:alice']);
const exact2 = owned('exact2', {}, ['apikey:alice2']);
const nobody = owned('nobody', { roles: {} });

const ALL = [zeta, incident, alpha, alphaDash, alphaDigit, hidden, k8sOnly, exact, exact2, nobody, fortress, audited];

const CLASS_KEYS = [
  'checkpoint',
  'durability',
  'fields',
  'gone',
  'history',
  'idPattern',
  'maxTtl',
  'minIdentityStrength',
  'name',
  'namespace',
  'requireEvidence',
  'roles',
  'ttl',
].sort();

const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

describe('GET /v1/classes and /v1/classes/{name}', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway(ALL);
  });
  afterAll(() => t?.close());

  test('lists only the classes in which the caller has a role, sorted by name, as {classes: [{name}]}', async () => {
    const r = await t.call('alice', 'GET', '/v1/classes');
    expect(r.status).toBe(200);
    expect(Object.keys(r.body)).toEqual(['classes']);
    const expected = ['alpha', 'alpha-2', 'alpha2', 'audited', 'exact', 'fortress', 'incident', 'zeta'];
    expect([...expected].sort(byCodePoint)).toEqual(expected);
    expect(r.body.classes).toEqual(expected.map((name) => ({ name })));
    // A live class has no `gone` key at all.
    for (const c of r.body.classes) expect(Object.keys(c)).toEqual(['name']);
  });

  test('each caller sees exactly its own classes', async () => {
    expect((await t.call('bob', 'GET', '/v1/classes')).body).toEqual({ classes: [{ name: 'hidden' }, { name: 'incident' }] });
    expect((await t.call('carol', 'GET', '/v1/classes')).body).toEqual({ classes: [{ name: 'incident' }] });
    expect((await t.call('alice2', 'GET', '/v1/classes')).body).toEqual({ classes: [{ name: 'exact2' }] });
  });

  test('a caller with a role in no class gets {classes: []}', async () => {
    expect(await t.call('dave', 'GET', '/v1/classes')).toEqual({ status: 200, body: { classes: [] } });
  });

  test('the class endpoint returns exactly the keys of the definition, fields and roles in the manifest shape', async () => {
    const r = await t.call('alice', 'GET', '/v1/classes/incident');
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(CLASS_KEYS);
    expect(r.body).toEqual({
      name: 'incident',
      namespace: 'team-a',
      fields: incident.spec.fields,
      roles: incident.spec.roles,
      ttl: null,
      maxTtl: null,
      history: {},
      durability: 'strict',
      checkpoint: { sections: ['summary', 'next_steps'], requiredForResolve: ['responder'] },
      idPattern: '^[a-z0-9-]{1,64}$',
      minIdentityStrength: 'shared-secret',
      requireEvidence: false,
      gone: false,
    });
  });

  test('a reader role is enough to read the class definition', async () => {
    const r = await t.call('bob', 'GET', '/v1/classes/incident');
    expect(r.status).toBe(200);
    expect(r.body.name).toBe('incident');
    expect(r.body.fields).toEqual(incident.spec.fields);
  });

  test('ttl is the duration string; defaults for a class without checkpoint, idPattern, floors', async () => {
    const r = await t.call('alice', 'GET', '/v1/classes/alpha');
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(CLASS_KEYS);
    expect(r.body).toEqual({
      name: 'alpha',
      namespace: 'team-b',
      fields: { x: { kind: 'versioned', type: 'integer' } },
      roles: { maintainer: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
      ttl: '720h',
      maxTtl: null,
      history: {},
      durability: 'strict',
      checkpoint: { sections: [], requiredForResolve: [] },
      idPattern: null,
      minIdentityStrength: 'shared-secret',
      requireEvidence: false,
      gone: false,
    });
    expect(typeof r.body.ttl).toBe('string');
  });

  test('class-level minIdentityStrength and requireEvidence are returned as set; namespace defaults to default', async () => {
    const f = await t.call('alice', 'GET', '/v1/classes/fortress');
    expect(f.status).toBe(200);
    expect(f.body.minIdentityStrength).toBe('pod-bound');
    expect(f.body.namespace).toBe('default');
    const a = await t.call('alice', 'GET', '/v1/classes/audited');
    expect(a.status).toBe(200);
    expect(a.body.requireEvidence).toBe(true);
    expect(a.body.fields).toEqual(audited.spec.fields);
  });

  test('no role: 403 NO_ROLE that reveals nothing of the class', async () => {
    for (const [who, name] of [
      ['dave', 'incident'],
      ['carol', 'alpha'],
      ['alice', 'hidden'],
    ] as const) {
      const r = await t.call(who, 'GET', `/v1/classes/${name}`);
      expect(r.status).toBe(403);
      expect(r.body.error).toBe('NO_ROLE');
      for (const key of Object.keys(r.body)) expect(['error', 'message', 'class', 'record']).toContain(key);
      for (const key of ['fields', 'roles', 'namespace', 'gone', 'ttl', 'checkpoint', 'idPattern']) expect(r.body).not.toHaveProperty(key);
      const text = JSON.stringify(r.body);
      const cls = ALL.find((c) => c.name === name)!;
      for (const field of Object.keys(cls.spec.fields)) expect(text).not.toMatch(new RegExp(`\\b${field}\\b`));
      for (const role of Object.keys(cls.spec.roles)) expect(text).not.toMatch(new RegExp(`\\b${role}\\b`));
      expect(text).not.toContain(cls.namespace ?? 'default');
    }
  });

  test('unknown class: 404 NOT_FOUND, for callers with and without roles elsewhere', async () => {
    for (const who of ['alice', 'dave']) {
      const r = await t.call(who, 'GET', '/v1/classes/no-such-class');
      expect(r.status).toBe(404);
      expect(r.body.error).toBe('NOT_FOUND');
    }
  });

  test('no or bad credential: 401 UNAUTHENTICATED on both endpoints', async () => {
    for (const path of ['/v1/classes', '/v1/classes/incident', '/v1/classes/no-such-class']) {
      const r = await t.call(null, 'GET', path);
      expect(r.status).toBe(401);
      expect(r.body.error).toBe('UNAUTHENTICATED');
    }
    const bad = await t.call('not-a-valid-key', 'GET', '/v1/classes');
    expect(bad.status).toBe(401);
    expect(bad.body.error).toBe('UNAUTHENTICATED');
  });

  test('k8s-sa subjects (ns/*, ns/name) never match apikey authors', async () => {
    for (const who of ['alice', 'bob', 'carol', 'dave']) {
      const r = await t.call(who, 'GET', '/v1/classes/k8s-only');
      expect(r.status).toBe(403);
      expect(r.body.error).toBe('NO_ROLE');
      const list = await t.call(who, 'GET', '/v1/classes');
      expect(list.body.classes.map((c: { name: string }) => c.name)).not.toContain('k8s-only');
    }
  });

  test('apikey subjects match exactly: apikey:alice is alice, not alice2, and apikey:alice2 is not alice', async () => {
    expect((await t.call('alice', 'GET', '/v1/classes/exact')).status).toBe(200);
    const a2 = await t.call('alice2', 'GET', '/v1/classes/exact');
    expect(a2.status).toBe(403);
    expect(a2.body.error).toBe('NO_ROLE');

    expect((await t.call('alice2', 'GET', '/v1/classes/exact2')).status).toBe(200);
    const a = await t.call('alice', 'GET', '/v1/classes/exact2');
    expect(a.status).toBe(403);
    expect(a.body.error).toBe('NO_ROLE');

    // The same holds for writes.
    expect((await t.call('alice2', 'PUT', '/v1/records/exact/r1/fields/x', { value: 1, expected_version: 0 })).body.error).toBe('NO_ROLE');
    expect((await t.call('alice2', 'PUT', '/v1/records/exact2/r1/fields/x', { value: 1, expected_version: 0 })).status).toBe(201);
  });

  test('a class with no roles is visible to nobody', async () => {
    const r = await t.call('alice', 'GET', '/v1/classes/nobody');
    expect(r.status).toBe(403);
    expect(r.body.error).toBe('NO_ROLE');
  });
});

describe('class lifecycle as seen by a gateway after its own sweep', () => {
  const old = owned('old');
  const keep = owned('keep');
  let t: TestGateway;
  let pool: pg.Pool;
  beforeAll(async () => {
    t = await startTestGateway([incident, old, keep]);
    pool = new pg.Pool({ connectionString: t.db.url, max: 2 });
  });
  afterAll(async () => {
    await pool?.end();
    await t?.close();
  });

  const names = (body: { classes: { name: string; gone?: boolean }[] }) => body.classes;

  test('removed manifest: class is gone (listed with gone: true, readable, records kept, writes CLASS_GONE); back again when the manifest returns', async () => {
    const w1 = await t.call('alice', 'PUT', '/v1/records/old/r1/fields/x', { value: 1, expected_version: 0 });
    expect(w1.status).toBe(201);
    // Warm the gateway's class cache so the sweep must invalidate it.
    expect((await t.call('alice', 'GET', '/v1/classes/old')).body.gone).toBe(false);

    t.writeClasses([incident, keep]);
    const s1 = await t.gw.services.sweepOnce();
    expect(s1.ran).toBe(true);

    const list = await t.call('alice', 'GET', '/v1/classes');
    expect(list.status).toBe(200);
    expect(names(list.body)).toEqual([{ name: 'incident' }, { name: 'keep' }, { name: 'old', gone: true }]);
    const keepEntry = list.body.classes.find((c: { name: string }) => c.name === 'keep');
    expect(keepEntry).not.toHaveProperty('gone');

    const cls = await t.call('alice', 'GET', '/v1/classes/old');
    expect(cls.status).toBe(200);
    expect(cls.body.gone).toBe(true);
    expect(Object.keys(cls.body).sort()).toEqual(CLASS_KEYS);
    expect(cls.body.fields).toEqual(old.spec.fields);
    expect(cls.body.roles).toEqual(old.spec.roles);

    // Reads keep working; the record is still there.
    const get = await t.call('alice', 'GET', '/v1/records/old/r1');
    expect(get.status).toBe(200);
    expect(get.body.fields.x.value).toBe(1);
    const rows = await pool.query(`select rid from records where class = 'old'`);
    expect(rows.rows.map((r) => r.rid)).toEqual(['r1']);

    // Writes are CLASS_GONE (410).
    const w2 = await t.call('alice', 'PUT', '/v1/records/old/r1/fields/x', { value: 2, expected_version: 1 });
    expect(w2.status).toBe(410);
    expect(w2.body.error).toBe('CLASS_GONE');
    // ...but a caller with no role still gets NO_ROLE first, and learns nothing.
    const w3 = await t.call('dave', 'PUT', '/v1/records/old/r1/fields/x', { value: 2, expected_version: 1 });
    expect(w3.status).toBe(403);
    expect(w3.body.error).toBe('NO_ROLE');

    // The manifest comes back: the class is live again and writes work.
    t.writeClasses([incident, keep, old]);
    expect((await t.gw.services.sweepOnce()).ran).toBe(true);
    const back = await t.call('alice', 'GET', '/v1/classes/old');
    expect(back.status).toBe(200);
    expect(back.body.gone).toBe(false);
    const list2 = await t.call('alice', 'GET', '/v1/classes');
    expect(names(list2.body)).toEqual([{ name: 'incident' }, { name: 'keep' }, { name: 'old' }]);
    const w4 = await t.call('alice', 'PUT', '/v1/records/old/r1/fields/x', { value: 2, expected_version: 1 });
    expect(w4.status).toBe(200);
    expect(w4.body.version).toBe(2);
  });

  test('a changed manifest (new field, changed type) is visible right after the sweep', async () => {
    // Warm the cache with the current definition.
    const before = await t.call('alice', 'GET', '/v1/classes/keep');
    expect(Object.keys(before.body.fields)).toEqual(['x']);

    const changed: ClassInput = {
      name: 'keep',
      spec: {
        fields: { x: { kind: 'versioned', type: 'string' }, extra: { kind: 'soft', type: 'string' } },
        roles: { maintainer: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
      },
    };
    t.writeClasses([incident, old, changed]);
    expect((await t.gw.services.sweepOnce()).ran).toBe(true);

    const after = await t.call('alice', 'GET', '/v1/classes/keep');
    expect(after.status).toBe(200);
    expect(after.body.fields).toEqual(changed.spec.fields);
    expect(after.body.gone).toBe(false);

    const w1 = await t.call('alice', 'PUT', '/v1/records/keep/k1/fields/extra', { value: 'hello' });
    expect(w1.status).toBe(201);
    // The type change applies to writes too.
    const w2 = await t.call('alice', 'PUT', '/v1/records/keep/k1/fields/x', { value: 5, expected_version: 0 });
    expect(w2.status).toBe(400);
    expect(w2.body.error).toBe('MALFORMED');
    const w3 = await t.call('alice', 'PUT', '/v1/records/keep/k1/fields/x', { value: 'five', expected_version: 0 });
    expect(w3.status).toBe(200);
  });

  test('a role change is visible right after the sweep: a new subject gains access, a removed one loses it', async () => {
    expect((await t.call('bob', 'GET', '/v1/classes/old')).body.error).toBe('NO_ROLE');
    const reshuffled = owned('old', {}, ['apikey:bob']);
    t.writeClasses([incident, reshuffled]);
    expect((await t.gw.services.sweepOnce()).ran).toBe(true);
    expect((await t.call('bob', 'GET', '/v1/classes/old')).status).toBe(200);
    expect((await t.call('alice', 'GET', '/v1/classes/old')).body.error).toBe('NO_ROLE');
    // keep is gone now, and alice still sees it listed as gone.
    expect(names((await t.call('alice', 'GET', '/v1/classes')).body)).toEqual([{ name: 'incident' }, { name: 'keep', gone: true }]);
  });
  test('a manifest of the same name from another namespace is refused: the holder keeps the class', async () => {
    const holder: ClassInput = { ...owned('held'), namespace: 'team-a' };
    const intruder: ClassInput = {
      name: 'held',
      namespace: 'team-b',
      spec: {
        fields: { x: { kind: 'versioned', type: 'integer' }, stolen: { kind: 'soft' } },
        roles: { maintainer: { subjects: ['apikey:dave'], read: ['*'], write: ['*'] } },
      },
    };
    t.writeClasses([incident, holder]);
    expect((await t.gw.services.sweepOnce()).ran).toBe(true);
    expect((await t.call('alice', 'GET', '/v1/classes/held')).body.namespace).toBe('team-a');

    // The intruder comes first in the directory; holding the class beats file order.
    t.writeClasses([intruder, incident, holder]);
    expect((await t.gw.services.sweepOnce()).ran).toBe(true);
    const r = await t.call('alice', 'GET', '/v1/classes/held');
    expect(r.status).toBe(200);
    expect(r.body.namespace).toBe('team-a');
    expect(r.body.fields).toEqual(holder.spec.fields);
    expect(r.body.gone).toBe(false);
    expect((await t.call('dave', 'GET', '/v1/classes/held')).body.error).toBe('NO_ROLE');
  });
});
