/**
 * JSON <-> google.protobuf.Value/Struct (runtime/grpc/convert.ts), through the real protobuf
 * encoding of the loaded protos, and the HTTP body -> response message shapes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  claimResultMsg,
  checkpointLoadResultMsg,
  fieldMsg,
  jsonToStruct,
  jsonToValue,
  NotJsonError,
  structToJson,
  valueToJson,
} from '../../runtime/grpc/convert.js';
import type { Struct, Struct__Output } from '../../runtime/grpc/generated/google/protobuf/Struct.js';
import type { Value, Value__Output } from '../../runtime/grpc/generated/google/protobuf/Value.js';
import type { Field, Field__Output } from '../../runtime/grpc/generated/svc/v1/Field.js';
import { loadSvcProto, messageType } from '../../runtime/grpc/proto.js';

const definition = loadSvcProto();
const valueType = messageType<Value, Value__Output>(definition, 'google.protobuf.Value');
const structType = messageType<Struct, Struct__Output>(definition, 'google.protobuf.Struct');
const fieldType = messageType<Field, Field__Output>(definition, 'svc.v1.Field');

/** JSON -> Value -> bytes -> Value -> JSON. */
const throughValue = (x: unknown) => valueToJson(valueType.deserialize(valueType.serialize(jsonToValue(x))));
const throughStruct = (o: Record<string, unknown>) => structToJson(structType.deserialize(structType.serialize(jsonToStruct(o))));

describe('JSON through google.protobuf.Value', () => {
  it('round-trips arbitrary JSON unchanged', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (x) => {
        expect(throughValue(x)).toStrictEqual(x);
      }),
      { numRuns: 300 },
    );
  });

  it('round-trips arbitrary JSON objects through Struct', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 4 }), { noNullPrototype: true }), (o) => {
        expect(throughStruct(o)).toStrictEqual(o);
      }),
      { numRuns: 200 },
    );
  });

  it('keeps every JSON type, including null inside lists and objects', () => {
    const x = { s: 'text ✓', n: -12.5, i: 7, t: true, f: false, z: null, l: [1, 'two', null, [], {}], o: { deep: { er: [0] } } };
    expect(throughValue(x)).toStrictEqual(x);
    expect(throughValue(null)).toBeNull();
    expect(throughValue('')).toBe('');
    expect(throughValue(0)).toBe(0);
  });

  it('keeps a "__proto__" key as a plain key, as JSON.parse does', () => {
    const o = JSON.parse('{"__proto__": {"x": 1}, "a": 2}') as Record<string, unknown>;
    const back = throughStruct(o);
    expect(Object.keys(back)).toEqual(expect.arrayContaining(['__proto__', 'a']));
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(JSON.stringify(back)).toBe(JSON.stringify(o));
  });

  it('reads values the way JSON.stringify does (so gRPC answers what HTTP answers)', () => {
    const x = { keep: 1, gone: undefined, fn: () => 1, when: new Date(Date.UTC(2026, 0, 2)), nan: NaN, list: [undefined, Infinity] };
    expect(throughValue(x)).toStrictEqual(JSON.parse(JSON.stringify(x)));
  });

  it('refuses a Value with no kind set, naming where it is', () => {
    const empty = valueType.deserialize(Buffer.alloc(0));
    expect(() => valueToJson(empty, 'value')).toThrow(NotJsonError);
    expect(() => valueToJson(empty, 'value')).toThrow(/value: a google\.protobuf\.Value with no kind set/);
    const nested = structType.deserialize(structType.serialize({ fields: { a: { listValue: { values: [{ numberValue: 1 }, {}] } } } }));
    expect(() => structToJson(nested, 'document')).toThrow(/document\.a\[1\]: a google\.protobuf\.Value with no kind set/);
  });

  it('refuses non-finite numbers, which have no JSON form', () => {
    for (const n of [NaN, Infinity, -Infinity]) {
      const v = valueType.deserialize(valueType.serialize({ numberValue: n }));
      expect(() => valueToJson(v, 'entry')).toThrow(/entry: .* is not a JSON number/);
    }
  });
});

describe('HTTP bodies as response messages', () => {
  const through = (f: Record<string, unknown>) => fieldType.deserialize(fieldType.serialize(fieldMsg(f)));

  it('a versioned field keeps every key; absent optional keys stay absent', () => {
    const f = through({
      value: { a: [1, null] },
      version: 3,
      author: 'apikey:alice',
      identity_strength: 'shared-secret',
      evidence: 'seen it',
      based_on: [{ field: 'status', version: 2 }, { field: 'triage', version: 1, kind: 'fence', inferred: true }],
      invocation: { run: 'r-1', n: 2 },
      updated_at: '2026-01-01T00:00:00.000+00:00',
    });
    expect(valueToJson(f.value!)).toStrictEqual({ a: [1, null] });
    expect(f).toMatchObject({
      version: 3,
      author: 'apikey:alice',
      identity_strength: 'shared-secret',
      evidence: 'seen it',
      based_on: [
        { field: 'status', version: 2, kind: '', inferred: false },
        { field: 'triage', version: 1, kind: 'fence', inferred: true },
      ],
      updated_at: '2026-01-01T00:00:00.000+00:00',
      declare_no_premises: false,
      lease_lapsed: false,
    });
    expect(structToJson(f.invocation!)).toStrictEqual({ run: 'r-1', n: 2 });
    expect('owner' in f).toBe(false);
    expect('lease_expires_at' in f).toBe(false);
  });

  it('a null value is a Value set to null; a task field has no value at all', () => {
    expect(valueToJson(through({ value: null, version: 1, updated_at: 't' }).value!)).toBeNull();
    const task = through({ version: 2, author: 'apikey:bob', updated_at: 't', owner: 'apikey:bob', lease_expires_at: 'u' });
    expect(task.value).toBeNull();
    expect(task).toMatchObject({ owner: 'apikey:bob', lease_expires_at: 'u' });
    expect(through({ version: 3, updated_at: 't', lease_lapsed: true }).lease_lapsed).toBe(true);
  });

  it('based_on [] (declared no premises) is told apart from no based_on', () => {
    expect(through({ value: 1, version: 1, updated_at: 't', based_on: [] }).declare_no_premises).toBe(true);
    expect(through({ value: 1, version: 1, updated_at: 't' }).declare_no_premises).toBe(false);
  });

  it('an append field carries its entries, each with identity_strength and invocation', () => {
    const f = through({
      version: 2,
      entries: [
        { seq: 1, value: 'a', author: 'apikey:alice', updated_at: 't1' },
        { seq: 2, value: { n: 1 }, author: 'apikey:bob', identity_strength: 'shared-secret', evidence: 'e', updated_at: 't2', invocation: { tool: 'x' } },
      ],
    });
    expect(f.version).toBe(2);
    expect('updated_at' in f).toBe(false);
    expect(f.entries).toHaveLength(2);
    expect(f.entries[0]).toMatchObject({ seq: 1, author: 'apikey:alice', updated_at: 't1' });
    expect('identity_strength' in f.entries[0]).toBe(false);
    expect(f.entries[1]).toMatchObject({ seq: 2, identity_strength: 'shared-secret', evidence: 'e' });
    expect(structToJson(f.entries[1].invocation!)).toStrictEqual({ tool: 'x' });
  });

  it('claim: created from the outcome, owner absent after a release', () => {
    expect(claimResultMsg({ created: true, body: { record: 'c/1', field: 'job', owner: 'apikey:a', lease_expires_at: 't', version: 1, record_version: 1 } })).toMatchObject({
      created: true,
      owner: 'apikey:a',
    });
    const released = claimResultMsg({ created: false, body: { record: 'c/1', field: 'job', version: 2, record_version: 2 } });
    expect(released.created).toBe(false);
    expect('owner' in released).toBe(false);
    expect('took_over_from' in released).toBe(false);
  });

  it('checkpoint load: a null document is an unset Struct; null author/evidence are absent', () => {
    const r = checkpointLoadResultMsg({
      body: { record: 'c/1', role: 'r', document: null, record_version: 0, changed_fields: [{ field: 'f', version: 1, author: 'apikey:a', evidence: null }] },
    });
    expect(r.document).toBeNull();
    expect(r.changed_fields![0]).toStrictEqual({ field: 'f', version: 1, author: 'apikey:a' });
  });
});
