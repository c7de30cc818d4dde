/**
 * Keyed writes inline their arguments as SQL literals (db/kysely/idempotency.ts literal(), so
 * that key, write and COMMIT go in one message). A property test against a real PostgreSQL
 * through a real gateway: arbitrary strings (quotes, backslashes, `$1`/`$2` inside values,
 * unicode beyond the BMP, long ones), numbers, arrays and null, as the value and the evidence
 * of a keyed put, come back equal in get and history, and the replay of the same key answers
 * the same bytes. Text PostgreSQL cannot store (NUL, an unpaired surrogate) is refused as 400
 * MALFORMED, never a 500, and nothing is written; literal() itself refuses a NUL (the
 * protocol's query text ends at the first NUL, so it would cut the statement).
 */
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { literal } from '../../db/kysely/idempotency.js';
import { StorageFault } from '../../db/port.js';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;

beforeAll(async () => {
  t = await startTestGateway([incident]);
}, 60_000);

afterAll(async () => {
  await t?.close();
});

async function req(method: string, path: string, body?: unknown, key?: string): Promise<{ status: number; text: string; body: any }> {
  const headers: Record<string, string> = { authorization: `Bearer ${KEYS.alice}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (key !== undefined) headers['idempotency-key'] = key;
  const r = await fetch(`${t.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, text, body: JSON.parse(text) };
}

/** Strings that stress quoting: quotes, backslashes, placeholders, E'' look-alikes, unicode. */
const nasty = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: fc.constantFrom("'", '\\', '$1', '$2', '$$', "E'", '"', '\n', '\t', ';', '--', '/*', 'é', '😀', '\u2028', 'a'), maxLength: 30 }),
  fc.constantFrom("'", "''", '\\', "\\'", "'; select 1; --", '$1', '$2::text', 'E\'\\x00\'', '😀'.repeat(3), 'x'.repeat(20_000)),
);
const json: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    nasty,
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => (Object.is(d, -0) ? 0 : d)),
    fc.integer(),
    fc.constant(null),
    fc.boolean(),
    fc.array(tie('v'), { maxLength: 4 }),
  ),
})).v;

test('keyed puts: arbitrary values and evidence come back equal in get and history, and the replay is byte-equal', async () => {
  await fc.assert(
    fc.asyncProperty(json, nasty, async (value, evidence) => {
      const rid = `p-${randomUUID().slice(0, 12)}`;
      const key = randomUUID();
      const body = { value, expected_version: 0, evidence };
      const first = await req('PUT', `/v1/records/incident/${rid}/fields/blob`, body, key);
      expect(first.status, first.text).toBe(201);
      const replay = await req('PUT', `/v1/records/incident/${rid}/fields/blob`, body, key);
      expect(replay.status).toBe(201);
      expect(replay.text).toBe(first.text);
      const got = await req('GET', `/v1/records/incident/${rid}`);
      expect(got.body.fields.blob.value).toEqual(value);
      expect(JSON.stringify(got.body.fields.blob.value)).toBe(JSON.stringify(value));
      const h = await req('GET', `/v1/records/incident/${rid}/history`);
      expect(h.body.history).toHaveLength(1);
      // A history row leaves out a null value (its keys are present only when they hold something).
      expect(JSON.stringify(h.body.history[0].value ?? null)).toBe(JSON.stringify(value));
      expect(h.body.history[0].evidence).toBe(evidence);
    }),
    { numRuns: 60 },
  );
}, 120_000);

test('a NUL or an unpaired surrogate in a keyed write answers 400 MALFORMED and writes nothing', async () => {
  const bad = ['a\u0000b', "'\u0000'", '\\\u0000', 'x\ud800', '\udc00y'];
  for (const s of bad) {
    for (const body of [{ value: s, expected_version: 0 }, { value: [1, s], expected_version: 0 }, { value: 'ok', expected_version: 0, evidence: s }]) {
      const rid = `n-${randomUUID().slice(0, 12)}`;
      const r = await req('PUT', `/v1/records/incident/${rid}/fields/blob`, body, randomUUID());
      expect(r.status, r.text).toBe(400);
      expect(r.body.error).toBe('MALFORMED');
      expect((await req('GET', `/v1/records/incident/${rid}`)).status).toBe(404);
    }
  }
});

test('literal() refuses a NUL as a data fault (400 MALFORMED), which would otherwise cut the statement text', () => {
  for (const s of ['\u0000', "a'\u0000", '\\\u0000']) {
    let thrown: unknown;
    try {
      literal(s);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(StorageFault);
    expect((thrown as StorageFault).kind).toBe('data');
  }
  expect(() => literal(['ok', '\u0000'])).toThrow(StorageFault);
  expect(literal("it's \\ $1")).toBe(" E'it''s \\\\ $1'");
});
