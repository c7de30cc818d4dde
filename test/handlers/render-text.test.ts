/**
 * One walk of a field's keys (handlers/pipeline.ts walkField), written down two ways: as an
 * object (renderField: query, watch, write answers) and as JSON text (fieldJson: get). For
 * random field rows of every kind — values given parsed or as stored text, premises a reader
 * may or may not see, task leases held, lapsed or gone, append entries — the text must be
 * byte for byte JSON.stringify of the object. And formatTime from epoch milliseconds
 * (handlers/format.ts formatTimeMs) must write what the Date getters write, over Date's range.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import type { EntryRow, FieldRow } from '../../db/port.js';
import { formatTime, formatTimeMs, localTime, TIME_ZONE_IS_UTC } from '../../handlers/format.js';
import { fieldJson, renderField, renderWritten, ObjectSink, TextSink } from '../../handlers/pipeline.js';

const noNul = (v: unknown) => JSON.stringify(v) !== undefined;
const json = fc.jsonValue({ maxDepth: 3 }).filter(noNul);
const text = fc.string({ unit: 'binary', maxLength: 10 });
const date = fc.integer({ min: -8.64e15, max: 8.64e15 }).map((ms) => new Date(ms));
const premises = fc.option(
  fc.array(
    fc.record({ field: fc.constantFrom('a', 'b', 'c'), version: fc.nat(1000), kind: fc.constantFrom('fence', undefined), inferred: fc.constantFrom(true, undefined) }, { requiredKeys: ['field', 'version'] }),
    { maxLength: 3 },
  ),
  { nil: null },
);
const invocation = fc.option(fc.dictionary(fc.constantFrom('tool', 'run', 'k'), json), { nil: null });
const written = {
  author: fc.option(fc.oneof(fc.constant(''), text), { nil: null }),
  identity_strength: fc.option(fc.constantFrom('', 'shared-secret', 'verified-token'), { nil: null }),
  evidence: fc.option(text, { nil: null }),
  based_on: premises,
  invocation,
};
const entry: fc.Arbitrary<EntryRow> = fc.record({ seq: fc.nat(), value: json, created_at: date, ...written, author: fc.oneof(fc.constant(''), text) });
const field: fc.Arbitrary<FieldRow> = fc
  .record({
    name: fc.constantFrom('a', 'b', 'c'),
    kind: fc.constantFrom('versioned', 'soft', 'task', 'append'),
    value: json,
    stored: fc.boolean(),
    version: fc.nat(2 ** 40),
    record_version: fc.nat(),
    updated_at: date,
    owner: fc.option(fc.oneof(fc.constant(''), text), { nil: null }),
    lease_expires_at: fc.option(date, { nil: null }),
    lease_held: fc.boolean(),
    lease_lapsed: fc.boolean(),
    entries: fc.option(fc.array(entry, { maxLength: 3 }), { nil: undefined }),
    ...written,
  })
  .map(({ stored, ...f }) => (stored ? { ...f, value: undefined, valueText: JSON.stringify(f.value) } : f));
const readable = fc.subarray(['a', 'b', 'c']).map((l) => (f: string) => l.includes(f));

describe('a field as text and as an object', () => {
  test('the text is JSON.stringify of the object, key order included', () => {
    fc.assert(
      fc.property(field, readable, fc.constantFrom(formatTime, (d: Date) => d.toISOString()), (f, r, fmt) => {
        expect(fieldJson(f, fmt, r)).toBe(JSON.stringify(renderField(f, fmt, r)));
      }),
      { numRuns: 2000 },
    );
  });

  test('a value as stored goes into the text as it is', () => {
    const f: FieldRow = {
      name: 'a', kind: 'soft', value: undefined, valueText: '{"b":1.50}', version: 3, record_version: 9,
      author: 'apikey:a', identity_strength: null, evidence: '', based_on: null, invocation: null,
      updated_at: new Date(0), owner: null, lease_expires_at: null, lease_held: false, lease_lapsed: false,
    };
    expect(fieldJson(f, (d) => d.toISOString(), () => true)).toBe(
      '{"value":{"b":1.50},"version":3,"author":"apikey:a","evidence":"","updated_at":"1970-01-01T00:00:00.000Z"}',
    );
  });

  test('the sinks agree on undefined, non-finite numbers and an empty object', () => {
    for (const v of [undefined, NaN, Infinity, -0, 1e21, null, 'x', [undefined], { a: undefined }]) {
      const o = new ObjectSink();
      const t = new TextSink();
      o.put('k', v);
      t.put('k', v);
      expect(t.end()).toBe(JSON.stringify(o.end()));
    }
    expect(new TextSink().end()).toBe(JSON.stringify(new ObjectSink().end()));
  });

  test("a watch change keeps renderWritten's keys: no version, created_at", () => {
    const r = { value: 1, author: 'x', identity_strength: null, evidence: null, based_on: [{ field: 'a', version: 1 }], invocation: null };
    expect(Object.keys(renderWritten('soft', r, {}, 'created_at', 't', () => true))).toEqual(['value', 'author', 'based_on', 'created_at']);
    expect(Object.keys(renderWritten('task', r, {}, 'created_at', 't', () => false))).toEqual(['author', 'created_at']);
  });
});

describe('formatTime from epoch milliseconds', () => {
  test.runIf(TIME_ZONE_IS_UTC)("writes what the Date's getters write, over Date's whole range", () => {
    const ms = fc.oneof(
      fc.integer({ min: -8.64e15, max: 8.64e15 }),
      fc.integer({ min: Date.UTC(1999, 0, 1), max: Date.UTC(2101, 0, 1) }),
      fc.constantFrom(0, -1, 1, 951_782_400_000, 951_868_799_999, -62_135_596_800_001, 8.64e15, -8.64e15),
    );
    fc.assert(
      fc.property(ms, (t) => {
        expect(formatTimeMs(t)).toBe(localTime(new Date(t)));
        expect(formatTime(new Date(t))).toBe(localTime(new Date(t)));
      }),
      { numRuns: 20_000 },
    );
  });

  test('an invalid time is written as it always was', () => {
    expect(formatTimeMs(NaN)).toBe(localTime(new Date(NaN)));
    expect(formatTime(new Date(NaN))).toBe(localTime(new Date(NaN)));
  });
});
