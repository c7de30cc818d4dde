/**
 * A get's values as their stored JSON text (FieldRow.valueText, db/kysely/record.ts readRecord):
 * the get answer carries each value as stored, neither parsed nor re-serialised
 * (handlers/pipeline.ts fieldJson). One renderer (renderField) still decides every key: the
 * text fieldJson makes must be byte for byte the object renderField makes of the same row
 * with the value parsed, for every field kind and premise or invocation shape, and the split
 * of the statement's text must hold for values with escaped control characters.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PgDb, createPool } from '../../db/kysely/index.js';
import type { ReadRecordOptions } from '../../db/port.js';
import { formatTime } from '../../handlers/format.js';
import { fieldJson, renderField } from '../../handlers/pipeline.js';
import { freshDatabase, type TestDb } from '../setup/db.js';

let tdb: TestDb;
let pool: pg.Pool;
let db: PgDb;

beforeAll(async () => {
  tdb = await freshDatabase();
  pool = createPool({ connectionString: tdb.url, max: 2 });
  db = new PgDb(pool);
});
afterAll(async () => {
  await pool?.end();
  await tdb?.drop();
});

interface FieldIn {
  name: string;
  kind: 'versioned' | 'soft' | 'task' | 'append';
  /** JSON text as the gateway stores it, or SQL null. */
  value: string | null;
  version: number;
  record_version: number;
  author: string | null;
  identity_strength: string | null;
  evidence: string | null;
  /** jsonb text, or SQL null. */
  based_on: string | null;
  /** json text, or SQL null. */
  invocation: string | null;
  updated_at: string;
  owner: string | null;
  lease_expires_at: string | null;
  lease_lapsed: boolean;
}

let n = 0;
async function insert(fields: FieldIn[]): Promise<string> {
  const rid = `gr-${++n}`;
  const { rows } = await pool.query<{ id: string }>(`insert into records (class, rid, record_version) values ('c', $1, 7) returning id`, [rid]);
  for (const f of fields) {
    await pool.query(
      `insert into fields (rid, record_id, class, name, kind, value, version, record_version, author, identity_strength, evidence,
         based_on, invocation, updated_at, owner, lease_expires_at, lease_lapsed)
       values ($16, $1, 'c', $2, $3, $4::json, $5, $6, $7, $8, $9, $10::jsonb, $11::json, $12, $13, $14, $15)`,
      [rows[0].id, f.name, f.kind, f.value, f.version, f.record_version, f.author, f.identity_strength, f.evidence,
        f.based_on, f.invocation, f.updated_at, f.owner, f.lease_expires_at, f.lease_lapsed, rid],
    );
  }
  return rid;
}

const opts = (fields: string[], maxBytes = 16 << 20): ReadRecordOptions => ({
  fields,
  entriesLimit: null,
  entriesBeforeSeq: null,
  maxBytes,
});

/** The fields as get writes them (fieldJson), and as renderField's object of the row with the value parsed. */
async function both(rid: string, names: string[]): Promise<{ text: string; object: string; texts: (string | undefined)[] }> {
  const row = await db.readRecord('c', rid, opts(names));
  const text = row!.fields.map((f) => `${JSON.stringify(f.name)}:${fieldJson(f, formatTime, () => true)}`).join(',');
  const out: Record<string, unknown> = {};
  for (const f of row!.fields) {
    const parsed = { ...f, value: f.valueText === undefined ? f.value : JSON.parse(f.valueText), valueText: undefined };
    out[f.name] = renderField(parsed, formatTime, () => true);
  }
  return { text: `{${text}}`, object: JSON.stringify(out), texts: row!.fields.map((f) => f.valueText) };
}

// PostgreSQL text holds no NUL; anything else goes.
const text = fc.string({ unit: 'binary', maxLength: 12 }).filter((s) => !s.includes('\0'));
const nulFree = (v: unknown) => !JSON.stringify(v).includes('\\u0000');
const HOUR = 3_600_000;
/** A time at least an hour from now, so "held" cannot change between the two reads. */
const time = (near: boolean) =>
  fc
    .integer({ min: 1, max: near ? 1_000 : 1_000_000 })
    .chain((h) => fc.tuple(fc.constant(h), fc.boolean(), fc.integer({ min: 0, max: 999_999 })))
    .map(([h, future, us]) => {
      const ms = Date.now() + (future ? 1 : -1) * h * HOUR;
      return `${new Date(ms - (ms % 1000)).toISOString().slice(0, 19)}.${String(us).padStart(6, '0')}+00`;
    });

const field = (name: string) =>
  fc.record({
    name: fc.constant(name),
    kind: fc.constantFrom<'versioned' | 'soft' | 'task'>('versioned', 'soft', 'task'),
    value: fc.option(fc.jsonValue({ maxDepth: 3 }).filter(nulFree).map((v) => JSON.stringify(v) ?? 'null'), { nil: null }),
    version: fc.integer({ min: 1, max: 2 ** 40 }),
    record_version: fc.integer({ min: 1, max: 2 ** 40 }),
    author: fc.option(fc.oneof(fc.constant(''), fc.constant('apikey:alice'), text), { nil: null }),
    identity_strength: fc.option(fc.constantFrom('', 'shared-secret', 'sa-bound', 'verified-token'), { nil: null }),
    evidence: fc.option(text, { nil: null }),
    based_on: fc.option(
      fc.oneof(
        fc.constant('null'),
        fc.array(fc.record({ field: fc.constantFrom('a', 'b', 'c'), version: fc.nat(1000) }, { requiredKeys: ['field', 'version'] }), { maxLength: 3 }).map((l) => JSON.stringify(l)),
        fc.array(fc.record({ field: fc.constantFrom('a', 'b'), version: fc.nat(9), inferred: fc.constant(true) }), { maxLength: 2 }).map((l) => JSON.stringify(l)),
      ),
      { nil: null },
    ),
    invocation: fc.option(
      fc.oneof(fc.constant('null'), fc.dictionary(fc.constantFrom('tool', 'run', 'k'), fc.jsonValue({ maxDepth: 2 }).filter(nulFree)).map((o) => JSON.stringify(o))),
      { nil: null },
    ),
    updated_at: time(false),
    owner: fc.option(fc.oneof(fc.constant(''), fc.constant('apikey:bob'), text), { nil: null }),
    lease_expires_at: fc.option(time(true), { nil: null }),
    lease_lapsed: fc.boolean(),
  });

describe('a get with values as stored', () => {
  test('is byte for byte the object renderField makes of the same rows, key order included', async () => {
    await fc.assert(
      fc.asyncProperty(fc.tuple(fc.option(field('a'), { nil: null }), fc.option(field('b'), { nil: null }), fc.option(field('z-9'), { nil: null })), async (list) => {
        const fields: FieldIn[] = list.filter((f) => f !== null);
        const rid = await insert(fields);
        const { text, object, texts } = await both(rid, ['a', 'b', 'z-9', 'never-written']);
        expect(text).toBe(object);
        // Every value came as its stored text (SQL null as JSON null).
        expect(texts).toEqual(fields.map((f) => f.value ?? 'null'));
      }),
      { numRuns: 150 },
    );
  });

  test('a missing record is null', async () => {
    expect(await db.readRecord('c', 'gr-none', opts(['a']))).toBeNull();
  });

  const plain: FieldIn = {
    name: 'a',
    kind: 'versioned',
    value: '{"x":1}',
    version: 1,
    record_version: 1,
    author: 'apikey:alice',
    identity_strength: null,
    evidence: null,
    based_on: null,
    invocation: null,
    updated_at: '2026-11-24T10:00:00.123456+00',
    owner: null,
    lease_expires_at: null,
    lease_lapsed: false,
  };

  test('values holding escaped control characters split where the statement put them', async () => {
    const tricky = [JSON.stringify('a\u0001b'), JSON.stringify({ k: '\u0001', l: ['\u001f', ''] }), String.raw`"\u0001"`];
    const rid = await insert(tricky.map((value, i) => ({ ...plain, name: `f${i}`, value })));
    const { text, object, texts } = await both(rid, ['f0', 'f1', 'f2']);
    expect(texts).toEqual(tricky);
    expect(text).toBe(object);
  });

  test('over the byte budget the kept values come parsed and the rest omitted', async () => {
    const rid = await insert([plain, { ...plain, name: 'b', value: JSON.stringify('y'.repeat(100)) }]);
    const row = await db.readRecord('c', rid, opts(['a', 'b'], 300));
    expect(row!.fields.map((f) => [f.name, Boolean(f.omitted), f.valueText, f.value])).toEqual([
      ['a', false, undefined, { x: 1 }],
      ['b', true, undefined, null],
    ]);
    expect(fieldJson(row!.fields[0], (d) => d.toISOString(), () => true)).toBe(
      '{"value":{"x":1},"version":1,"author":"apikey:alice","updated_at":"2026-11-24T10:00:00.123Z"}',
    );
  });

  test('times are whole milliseconds, cut', async () => {
    const rid = await insert([{ ...plain, updated_at: '2026-11-24T10:00:59.999999+00' }]);
    const row = await db.readRecord('c', rid, opts(['a']));
    expect(fieldJson(row!.fields[0], (d) => d.toISOString(), () => true)).toBe(
      '{"value":{"x":1},"version":1,"author":"apikey:alice","updated_at":"2026-11-24T10:00:59.999Z"}',
    );
  });
});
